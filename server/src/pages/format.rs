//! How numbers, times and links are written on pages.

use kymo_core::clock::civil_from_days;
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

/// A duration in seconds as `42s`, `3m 05s` or `2h 10m`.
pub fn elapsed(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A measured value with four significant digits in the unit that suits it (`400 µs`, not
/// `400000 ns`).
pub fn value(v: f64, unit: &str) -> String {
    kymo_core::units::human(v, unit)
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

/// How big a change of `change_pct` is, whatever its direction: the size of its ratio on the
/// log scale, so a throughput that fell 99 % (a 100× change) outranks a time that rose 233 %.
pub fn change_size(change_pct: f64) -> f64 {
    let ratio = 1.0 + change_pct / 100.0;
    if ratio > 0.0 {
        ratio.ln().abs()
    } else {
        f64::INFINITY
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
        assert_eq!(value(10_340_000.0, "elem/s"), "10.34 M elem/s");
        assert_eq!(value(2.5e-6, "s"), "2.5 µs");
        assert_eq!(elapsed(185), "3m 05s");
        assert_eq!(summary("first line\nsecond"), "first line");
    }
}
