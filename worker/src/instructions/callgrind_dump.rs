//! The header of one callgrind dump file: which trigger wrote it, its place in the order of
//! dumps, and the instructions it holds. Only the header is read (it ends before the
//! per-function costs, which can be long), and only so much of it.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Most bytes of a dump read looking for its header's `summary:` line.
const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// What started a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// `--dump-before=FUNCTION`: FUNCTION was entered.
    Before(String),
    /// `--dump-after=FUNCTION`: FUNCTION returned.
    After(String),
    /// The program ended (or anything else callgrind names).
    Other(String),
}

/// One dump's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpHeader {
    /// callgrind's `part:` number: dumps in the order they were written, from 1.
    pub part: u64,
    pub trigger: Trigger,
    /// Instructions (`Ir`) executed since the previous dump.
    pub instructions: u64,
}

/// Reads the header of the dump at `path`.
pub fn read_header(path: &Path) -> Result<DumpHeader, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    let mut reader = BufReader::new(file.take(MAX_HEADER_BYTES));
    loop {
        let start = text.len();
        let read = (reader.read_line(&mut text)).map_err(|e| format!("{}: {e}", path.display()))?;
        if read == 0 || text[start..].starts_with("summary:") {
            break;
        }
    }
    parse_header(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a dump's header lines (up to and including `summary:`).
pub fn parse_header(text: &str) -> Result<DumpHeader, String> {
    if !text.starts_with("# callgrind format") && !text.starts_with("version:") {
        return Err("not a callgrind dump".into());
    }
    let (mut part, mut trigger, mut events, mut summary) = (None, None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "part" => part = Some(value.parse().map_err(|_| "a bad part number")?),
            "desc" => {
                if let Some(t) = value.strip_prefix("Trigger:") {
                    trigger = Some(classify(t.trim()));
                }
            }
            "events" => events = value.split_whitespace().next().map(str::to_owned),
            "summary" => {
                let first = value.split_whitespace().next().unwrap_or("");
                summary = Some(first.parse().map_err(|_| "a bad summary line")?);
            }
            _ => {}
        }
    }
    if events.as_deref() != Some("Ir") {
        return Err("its first event is not Ir (instructions)".into());
    }
    Ok(DumpHeader {
        part: part.unwrap_or(1),
        trigger: trigger.ok_or("no trigger line")?,
        instructions: summary.ok_or("no summary line")?,
    })
}

fn classify(trigger: &str) -> Trigger {
    if let Some(function) = trigger.strip_prefix("--dump-before=") {
        Trigger::Before(function.to_owned())
    } else if let Some(function) = trigger.strip_prefix("--dump-after=") {
        Trigger::After(function.to_owned())
    } else {
        Trigger::Other(trigger.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The header of a real dump (callgrind 3.19, base64 0.22.1's criterion benchmarks).
    const AFTER: &str = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 30061\n\
        cmd:  target/release/deps/benchmarks-019552b039325324 --bench --profile-time 1\n\
        part: 3\n\n\ndesc: I1 cache: \ndesc: D1 cache: \ndesc: LL cache: \n\n\
        desc: Timerange: Basic block 180626 - 180811\n\
        desc: Trigger: --dump-after=criterion::bencher::Bencher<M>::iter\n\n\
        positions: line\nevents: Ir\nsummary: 871\n\n";

    #[test]
    fn a_real_header_gives_its_part_trigger_and_count() {
        let header = parse_header(AFTER).unwrap();
        assert_eq!(header.part, 3);
        assert_eq!(
            header.trigger,
            Trigger::After("criterion::bencher::Bencher<M>::iter".into())
        );
        assert_eq!(header.instructions, 871);
    }

    #[test]
    fn headers_without_one_clean_count_are_errors() {
        for bad in [
            String::new(),
            "hello".into(),
            AFTER.replace("summary: 871", "summary: many"),
            AFTER.replace("summary: 871", "summary: -1"),
            AFTER.replace("summary: 871", ""),
            AFTER.replace("events: Ir", "events: Dr"),
            AFTER.replace("part: 3", "part: x"),
            AFTER.replace(
                "desc: Trigger: --dump-after=criterion::bencher::Bencher<M>::iter",
                "",
            ),
        ] {
            assert!(parse_header(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_the_header_is_read_and_a_huge_file_without_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("callgrind.out.3");
        let body = "fn=(1) x\n0 1\n".repeat(100_000);
        std::fs::write(&path, format!("{AFTER}{body}")).unwrap();
        assert_eq!(read_header(&path).unwrap().instructions, 871);
        std::fs::write(&path, format!("# callgrind format\n{body}summary: 5\n")).unwrap();
        assert!(read_header(&path).is_err());
        assert!(read_header(&dir.path().join("missing")).is_err());
    }
}
