//! Human units: a size is shown with the binary prefix that keeps its number between 1 and
//! 1024 (4.5 MiB, not 4718592 B), whatever unit the results were uploaded in. Other units are
//! shown as uploaded. Pure; pages, charts, alerts and the CLI all go through here.

/// Size units a result may carry, with their size in bytes. The decimal spellings are SI
/// (1000), as `kymo.toml` reads them; `/proc`'s `kB` means KiB but a result cannot say so.
const SIZE_UNITS: [(&str, f64); 12] = [
    ("B", 1.0),
    ("bytes", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1_048_576.0),
    ("GiB", 1_073_741_824.0),
    ("TiB", 1_099_511_627_776.0),
    ("kB", 1e3),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
    ("PiB", 1_125_899_906_842_624.0),
];
/// The prefixes values are shown in, smallest first.
const SHOWN: [(&str, f64); 6] = [
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1_048_576.0),
    ("GiB", 1_073_741_824.0),
    ("TiB", 1_099_511_627_776.0),
    ("PiB", 1_125_899_906_842_624.0),
];

/// How values of one unit are shown: multiply by `factor`, write `unit`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownUnit {
    pub unit: String,
    pub factor: f64,
}

impl ShownUnit {
    fn unchanged(unit: &str) -> Self {
        Self {
            unit: unit.to_owned(),
            factor: 1.0,
        }
    }

    /// `value` in this unit.
    pub fn scale(&self, value: f64) -> f64 {
        value * self.factor
    }
}

/// The unit to show values of `unit` in when the largest of them is `magnitude` (in `unit`):
/// for sizes, the largest binary prefix that keeps it at 1 or more; otherwise `unit` itself.
pub fn shown_unit(unit: &str, magnitude: f64) -> ShownUnit {
    let Some((_, bytes_per_unit)) = SIZE_UNITS.iter().find(|(name, _)| *name == unit) else {
        return ShownUnit::unchanged(unit);
    };
    let bytes = (magnitude * bytes_per_unit).abs();
    if !bytes.is_finite() {
        return ShownUnit::unchanged(unit);
    }
    let (name, size) = SHOWN
        .iter()
        .rev()
        .find(|(_, size)| bytes >= *size)
        .unwrap_or(&SHOWN[0]);
    ShownUnit {
        unit: (*name).to_owned(),
        factor: bytes_per_unit / size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(value: f64, unit: &str) -> (f64, String) {
        let s = shown_unit(unit, value);
        (s.scale(value), s.unit)
    }

    #[test]
    fn sizes_take_the_prefix_that_keeps_them_readable() {
        assert_eq!(shown(4_718_592.0, "B"), (4.5, "MiB".into()));
        assert_eq!(shown(512.0, "B"), (512.0, "B".into()));
        assert_eq!(shown(1536.0, "KiB"), (1.5, "MiB".into()));
        assert_eq!(shown(0.5, "KiB"), (512.0, "B".into()));
        let (kb, unit) = shown(2048.0, "kB");
        assert!(
            (kb - 1.953_125).abs() < 1e-12 && unit == "MiB",
            "{kb} {unit}"
        );
        assert_eq!(shown(-3.0 * 1_048_576.0, "B"), (-3.0, "MiB".into()));
        assert_eq!(shown(2.0, "PiB").1, "PiB");
        assert_eq!(shown(0.0, "B"), (0.0, "B".into()));
    }

    #[test]
    fn other_units_and_odd_values_are_left_alone() {
        assert_eq!(shown(4_718_592.0, "ns"), (4_718_592.0, "ns".into()));
        assert_eq!(shown(3.0, "b"), (3.0, "b".into()), "bits are not bytes");
        assert_eq!(shown(3.0, ""), (3.0, "".into()));
        assert_eq!(shown_unit("B", f64::INFINITY), ShownUnit::unchanged("B"));
        assert_eq!(shown_unit("MiB", f64::NAN), ShownUnit::unchanged("MiB"));
    }
}
