//! Values in units a person reads at a glance: `400 µs` rather than `400000 ns`, `1.5 GB/s`
//! rather than `1500000000 B/s`, `35.2 MiB` rather than `36909875 B`.
//!
//! A [`Scale`] is chosen once for a set of values (an axis, a table column) from their largest
//! magnitude, so that every value of the set is written in the same unit. Units kymo does not
//! know keep their name and get an SI prefix only when the numbers grow long.

use std::fmt::Write as _;

/// A unit to write values in: divide by `divisor`, then append `unit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    /// What the stored value is divided by.
    pub divisor: f64,
    /// The unit written after the scaled value; empty for a bare number.
    pub unit: String,
}

/// Durations from their base unit, in nanoseconds per unit.
const DURATIONS: &[(&str, f64)] = &[
    ("ps", 1e-3),
    ("ns", 1.0),
    ("us", 1e3),
    ("\u{b5}s", 1e3),
    ("\u{3bc}s", 1e3),
    ("ms", 1e6),
    ("s", 1e9),
];
/// The units durations are written in, in nanoseconds each; larger ones read worse than seconds.
const DURATION_STEPS: &[(&str, f64)] = &[("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];

/// Sizes in bytes per unit; memory is counted in powers of two.
const SIZES: &[(&str, f64)] = &[
    ("b", 1.0),
    ("byte", 1.0),
    ("bytes", 1.0),
    ("kib", 1024.0),
    ("kb", 1e3),
    ("mib", 1_048_576.0),
    ("mb", 1e6),
    ("gib", 1_073_741_824.0),
    ("gb", 1e9),
];
const SIZE_STEPS: &[(&str, f64)] = &[
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1_048_576.0),
    ("GiB", 1_073_741_824.0),
    ("TiB", 1_099_511_627_776.0),
];

/// SI prefixes, for rates and for counts of units kymo does not know.
const SI_STEPS: &[(&str, f64)] = &[("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)];

/// Below this magnitude an unknown unit keeps its plain numbers: `5120 ops` reads fine.
const PLAIN_BELOW: f64 = 1e5;

impl Scale {
    /// The scale for values of `unit` whose largest magnitude is `magnitude`.
    pub fn for_magnitude(unit: &str, magnitude: f64) -> Self {
        let magnitude = if magnitude.is_finite() {
            magnitude.abs()
        } else {
            0.0
        };
        let key = unit.trim().to_lowercase();
        if let Some(per_unit) = lookup(DURATIONS, &key) {
            return stepped(DURATION_STEPS, magnitude * per_unit, per_unit, "");
        }
        if let Some(per_unit) = lookup(SIZES, &key) {
            return stepped(SIZE_STEPS, magnitude * per_unit, per_unit, "");
        }
        if let Some(per_unit) = key.strip_suffix("/s").and_then(|base| lookup(SIZES, base)) {
            // Bytes per second are written in decimal prefixes, as networks and disks are sold.
            return stepped(SI_STEPS, magnitude * per_unit, per_unit, "B/s");
        }
        let unit = unit.trim();
        if magnitude < PLAIN_BELOW {
            return Self::unchanged(unit);
        }
        let prefixed = stepped(SI_STEPS, magnitude, 1.0, "");
        let name = match (prefixed.unit.as_str(), unit) {
            (prefix, "") => prefix.to_owned(),
            ("", unit) => unit.to_owned(),
            // `10.34 M elem/s`: the prefix stands apart from a unit that is a word.
            (prefix, unit) => format!("{prefix} {unit}"),
        };
        Self {
            divisor: prefixed.divisor,
            unit: name,
        }
    }

    /// The scale for a set of values: chosen from the largest finite magnitude among them.
    pub fn for_values(unit: &str, values: impl IntoIterator<Item = f64>) -> Self {
        let magnitude = values
            .into_iter()
            .filter(|v| v.is_finite())
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        Self::for_magnitude(unit, magnitude)
    }

    /// The values as stored.
    pub fn unchanged(unit: &str) -> Self {
        Self {
            divisor: 1.0,
            unit: unit.trim().to_owned(),
        }
    }

    /// `value` in this scale, as a number.
    pub fn apply(&self, value: f64) -> f64 {
        value / self.divisor
    }

    /// `value` in this scale with four significant digits and the unit: `412.3 µs`.
    pub fn format(&self, value: f64) -> String {
        let mut text = String::new();
        push_significant(&mut text, self.apply(value), 4);
        if !self.unit.is_empty() {
            text.push(' ');
            text.push_str(&self.unit);
        }
        text
    }
}

/// `value` of `unit` written in the unit that suits its own magnitude.
pub fn human(value: f64, unit: &str) -> String {
    Scale::for_magnitude(unit, value).format(value)
}

/// A number with `digits` significant digits (at least), without an exponent between 10⁻³
/// and 10⁹, and without trailing zeros after the point.
pub fn significant(value: f64, digits: i32) -> String {
    let mut text = String::new();
    push_significant(&mut text, value, digits);
    text
}

/// [`significant`] written at the end of `out` (a chart writes a few a point): digits, a sign,
/// a point, an exponent or `inf`/`NaN`, nothing that markup would need to escape.
pub fn push_significant(out: &mut String, value: f64, digits: i32) {
    let magnitude = value.abs();
    if !value.is_finite() {
        let _ = write!(out, "{value}");
        return;
    }
    if magnitude != 0.0 && !(1e-3..1e9).contains(&magnitude) {
        let _ = write!(out, "{value:.*e}", (digits - 1).max(0) as usize);
        return;
    }
    let exponent = if magnitude == 0.0 {
        0
    } else {
        magnitude.log10().floor() as i32
    };
    let decimals = (digits - 1 - exponent).clamp(0, 9) as usize;
    let start = out.len();
    let _ = write!(out, "{value:.decimals$}");
    if out[start..].contains('.') {
        let kept = out[start..]
            .trim_end_matches('0')
            .trim_end_matches('.')
            .len();
        out.truncate(start + kept);
    }
}

fn lookup(table: &[(&str, f64)], key: &str) -> Option<f64> {
    table.iter().find(|(name, _)| *name == key).map(|(_, f)| *f)
}

/// The largest step whose size fits `base_magnitude` (in the steps' base unit) at least once,
/// converting from a stored unit worth `per_unit` base units; `suffix` follows each step's name.
fn stepped(steps: &[(&str, f64)], base_magnitude: f64, per_unit: f64, suffix: &str) -> Scale {
    let (name, size) = steps
        .iter()
        .rev()
        .find(|(_, size)| base_magnitude >= *size)
        .unwrap_or(&steps[0]);
    Scale {
        divisor: size / per_unit,
        unit: format!("{name}{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_largest_unit_that_keeps_a_whole_number() {
        assert_eq!(human(400_000.0, "ns"), "400 µs");
        assert_eq!(human(96.123, "ns"), "96.12 ns");
        assert_eq!(human(1_500_000_000.0, "ns"), "1.5 s");
        assert_eq!(human(0.25, "s"), "250 ms");
        assert_eq!(human(3.0, "NS"), "3 ns");
        assert_eq!(human(7200.0, "s"), "7200 s", "nothing past seconds");
    }

    #[test]
    fn sizes_use_binary_prefixes_and_rates_decimal_ones() {
        assert_eq!(human(36_909_875.0, "B"), "35.2 MiB");
        assert_eq!(human(1_115.0, "KiB"), "1.089 MiB");
        assert_eq!(human(512.0, "bytes"), "512 B");
        assert_eq!(human(1.5e9, "B/s"), "1.5 GB/s");
        assert_eq!(human(2_048.0, "KiB/s"), "2.097 MB/s");
        assert_eq!(human(12.0, "B/s"), "12 B/s");
    }

    #[test]
    fn unknown_units_get_a_prefix_only_when_numbers_grow_long() {
        assert_eq!(human(10_340_000.0, "elem/s"), "10.34 M elem/s");
        assert_eq!(human(5_120.0, "ops"), "5120 ops");
        assert_eq!(human(2.5e9, "instructions"), "2.5 G instructions");
        assert_eq!(human(0.5, ""), "0.5");
        assert_eq!(human(2.5e6, ""), "2.5 M");
    }

    #[test]
    fn a_set_of_values_shares_one_unit() {
        let scale = Scale::for_values("ns", [900.0, 1_200.0, f64::NAN]);
        assert_eq!(scale.unit, "µs");
        assert_eq!(scale.format(900.0), "0.9 µs");
        assert_eq!(Scale::for_values("ns", []).unit, "ns");
    }

    #[test]
    fn numbers_that_cannot_be_scaled_are_written_as_they_are() {
        assert_eq!(human(f64::NAN, "ns"), "NaN ns");
        assert_eq!(human(-400_000.0, "ns"), "-400 µs");
        assert_eq!(significant(2.5e-6, 4), "2.500e-6");
        assert_eq!(significant(0.0, 4), "0");
    }

    #[test]
    fn a_number_written_after_text_trims_only_its_own_zeros() {
        let mut out = String::from("at 10.");
        push_significant(&mut out, 2.5, 4);
        assert_eq!(out, "at 10.2.5");
        push_significant(&mut out, 100.0, 4);
        assert_eq!(out, "at 10.2.5100");
    }
}
