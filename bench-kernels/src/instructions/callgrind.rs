//! Reading callgrind's dump files: which trigger wrote each one and how many instructions
//! (`Ir`) it holds. Only the header lines matter; the per-function costs below are skipped.

use crate::error::KernelError;

/// One dump: its part number (callgrind counts dumps from 1), what triggered it, and its
/// instruction total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// The dump's `part:` number: the order in which callgrind wrote the dumps.
    pub part: u64,
    /// The `desc: Trigger:` text, e.g. `--dump-after=kymo_kernels_counted_region`.
    pub trigger: String,
    /// The `summary:` (or, failing that, `totals:`) instruction count.
    pub instructions: u64,
}

/// Parses one dump file's text.
pub fn parse_dump(text: &str) -> Result<Dump, KernelError> {
    let corrupt = |what: &str| KernelError::Corrupt(format!("callgrind dump: {what}"));
    if !text.starts_with("# callgrind format") && !text.starts_with("version:") {
        return Err(corrupt("not a callgrind output file"));
    }
    let (mut part, mut trigger, mut summary, mut totals, mut events) =
        (None, None, None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "part" => part = Some(number(value).ok_or_else(|| corrupt("bad part number"))?),
            "desc" => {
                if let Some(t) = value.strip_prefix("Trigger:") {
                    trigger = Some(t.trim().to_string());
                }
            }
            "events" => events = Some(value.to_string()),
            "summary" => summary = Some(first_number(value).ok_or_else(|| corrupt("bad summary"))?),
            "totals" => totals = Some(first_number(value).ok_or_else(|| corrupt("bad totals"))?),
            _ => {}
        }
    }
    // Counts are read from the first event column, which must be instructions.
    match events.as_deref().and_then(|e| e.split_whitespace().next()) {
        Some("Ir") => {}
        _ => return Err(corrupt("the first event is not Ir (instructions)")),
    }
    Ok(Dump {
        part: part.unwrap_or(1),
        trigger: trigger.unwrap_or_default(),
        instructions: summary
            .or(totals)
            .ok_or_else(|| corrupt("no summary or totals line"))?,
    })
}

fn number(text: &str) -> Option<u64> {
    text.parse().ok()
}

fn first_number(text: &str) -> Option<u64> {
    text.split_whitespace().next().and_then(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The header of a real dump (callgrind 3.19, a C program with a `region` function).
    const AFTER: &str = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 29028\n\
        cmd:  ./t\npart: 4\ndesc: I1 cache: \ndesc: Timerange: Basic block 29345 - 129348\n\
        desc: Trigger: --dump-after=region\npositions: line\nevents: Ir\nsummary: 600006\n\
        cfi=(140) ./csu/../csu/libc-start.c\n* 12\ntotals: 600006\n";

    #[test]
    fn a_real_dump_header_gives_part_trigger_and_count() {
        let dump = parse_dump(AFTER).unwrap();
        assert_eq!(
            dump,
            Dump {
                part: 4,
                trigger: "--dump-after=region".to_string(),
                instructions: 600_006
            }
        );
    }

    #[test]
    fn totals_stand_in_for_a_missing_summary() {
        let text = AFTER.replace("summary: 600006\n", "");
        assert_eq!(parse_dump(&text).unwrap().instructions, 600_006);
    }

    #[test]
    fn malformed_dumps_are_errors() {
        for bad in [
            "",
            "hello world\nsummary: 3\n",
            &AFTER.replace("summary: 600006", "summary: many"),
            &AFTER.replace("events: Ir", "events: Dr Ir"),
            &AFTER
                .replace("summary: 600006\n", "")
                .replace("totals: 600006\n", ""),
            &AFTER.replace("part: 4", "part: -4"),
            &AFTER.replace("summary: 600006", "summary: 99999999999999999999999"),
        ] {
            assert!(parse_dump(bad).is_err(), "{bad:?}");
        }
    }
}
