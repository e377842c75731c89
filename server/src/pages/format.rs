//! How numbers, times and links are written on pages.

use kymo_core::protocol::query_value;

/// The link to a benchmark's page: its name percent-encoded, so that `?`, `#`, `%` and
/// spaces stay part of the name. A name with an empty, `.` or `..` part has its `/` encoded
/// too: a browser would otherwise resolve `a/../../queue` to another page.
pub fn benchmark_href(repo: &str, name: &str) -> String {
    let dotted = name.split('/').any(|part| matches!(part, "" | "." | ".."));
    let encoded = query_value(name);
    let encoded = if dotted {
        encoded.replace('/', "%2F")
    } else {
        encoded
    };
    format!("/repos/{}/benchmarks/{encoded}", query_value(repo))
}

/// `2026-11-22 19:44 UTC` from Unix seconds.
pub fn utc(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rem = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// A Unix time as RFC 3339 (`2026-11-22T22:10:00Z`), as Atom wants it.
pub fn rfc3339(seconds: i64) -> String {
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    let rem = seconds.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A duration in seconds as `42s`, `3m 05s` or `2h 10m`.
pub fn elapsed(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A measured value with four significant digits and its unit; a size in the binary prefix
/// that keeps it readable (`4.500 MiB`).
pub fn value(v: f64, unit: &str) -> String {
    let shown = crate::units::shown_unit(unit, v);
    let (v, unit) = (shown.scale(v), shown.unit.as_str());
    let magnitude = v.abs();
    let text = if magnitude != 0.0 && !(1e-3..1e9).contains(&magnitude) {
        format!("{v:.3e}")
    } else {
        let decimals = if magnitude >= 1000.0 {
            0
        } else if magnitude >= 100.0 {
            1
        } else if magnitude >= 10.0 {
            2
        } else {
            3
        };
        format!("{v:.decimals$}")
    };
    if unit.is_empty() {
        text
    } else {
        format!("{text} {unit}")
    }
}

/// The change from `base` to `head` as a signed percentage, and whether it is better or
/// worse given the metric's direction (`""` when it is within 1 %, which this page does not
/// judge; the verdicts do).
pub fn change(base: f64, head: f64, direction: &str) -> (String, &'static str) {
    if base == 0.0 {
        return ("–".into(), "");
    }
    let pct = (head - base) / base.abs() * 100.0;
    let class = if pct.abs() < 1.0 {
        ""
    } else if (pct > 0.0) == (direction == "higher") {
        "better"
    } else {
        "worse"
    };
    (format!("{pct:+.1} %"), class)
}

/// The first line of a commit message.
pub fn summary(message: &str) -> String {
    let line = message.lines().next().unwrap_or("");
    if line.chars().count() > 90 {
        format!("{}…", line.chars().take(89).collect::<String>())
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_links_keep_the_whole_name_in_one_path() {
        assert_eq!(
            benchmark_href("app", "bus/steady/one"),
            "/repos/app/benchmarks/bus/steady/one"
        );
        assert_eq!(
            benchmark_href("app", "q?x=1#frag 100%"),
            "/repos/app/benchmarks/q%3Fx%3D1%23frag%20100%25"
        );
        assert_eq!(
            benchmark_href("app", "dots/../../../queue"),
            "/repos/app/benchmarks/dots%2F..%2F..%2F..%2Fqueue"
        );
        assert_eq!(
            benchmark_href("app", "a//b"),
            "/repos/app/benchmarks/a%2F%2Fb"
        );
    }

    #[test]
    fn utc_renders_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_795_376_640), "2026-11-22 19:44 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(rfc3339(1_795_376_645), "2026-11-22T19:44:05Z");
    }

    #[test]
    fn change_respects_direction() {
        assert_eq!(change(100.0, 110.0, "lower"), ("+10.0 %".into(), "worse"));
        assert_eq!(change(100.0, 110.0, "higher"), ("+10.0 %".into(), "better"));
        assert_eq!(change(100.0, 100.5, "lower").1, "");
        assert_eq!(change(0.0, 1.0, "lower").1, "");
    }

    #[test]
    fn values_keep_four_significant_digits() {
        assert_eq!(value(96.123, "ns"), "96.12 ns");
        assert_eq!(value(10_340_000.0, "elem/s"), "10340000 elem/s");
        assert_eq!(value(2.5e-6, "s"), "2.500e-6 s");
        assert_eq!(value(4_718_592.0, "B"), "4.500 MiB");
        assert_eq!(value(1_141_760.0, "B"), "1.089 MiB");
        assert_eq!(value(135_168.0, "B"), "132.0 KiB");
        assert_eq!(value(1115.0, "KiB"), "1.089 MiB");
        assert_eq!(value(3.0, "VMs"), "3.000 VMs");
        assert_eq!(elapsed(185), "3m 05s");
        assert_eq!(summary("first line\nsecond"), "first line");
    }
}
