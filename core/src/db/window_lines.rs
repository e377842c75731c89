//! Windows of history spelled as lines of text by their queries (`windows.rs`): the commits of
//! a walk down the branch a line each, then the runs of the window's series at those commits a
//! line each. Text, not rows: handing each of a window's thousands of rows from SQLite's thread
//! to this task cost more than finding it.

use super::f64_bits::from_bits;
use super::{DbError, decode_error};

/// A commit of the walk: `id position committed_at sha`.
pub(super) struct WalkCommit<'a> {
    pub(super) id: i64,
    pub(super) position: i64,
    pub(super) committed_at: i64,
    pub(super) sha: &'a str,
}

/// A run of one of the series at a commit of the walk:
/// `staged series commit value run samples` (the value as the integer of its bits,
/// `f64_bits.rs`; the samples' stored bytes in hex, empty unless asked for).
pub(super) struct RunLine<'a> {
    pub(super) staged: bool,
    pub(super) series_id: i64,
    pub(super) commit_id: i64,
    pub(super) value: f64,
    pub(super) run_id: i64,
    pub(super) hex: &'a str,
}

pub(super) fn malformed(what: &str, text: &str) -> DbError {
    let shown: String = text.chars().take(60).collect();
    decode_error(std::io::Error::other(format!(
        "a window's {what}: {shown:?}"
    )))
}

/// The `N` space-separated fields of `line`, exactly.
fn fields<'a, const N: usize>(line: &'a str, what: &str) -> Result<[&'a str; N], DbError> {
    let mut split = line.split(' ');
    let mut fields = [""; N];
    for field in &mut fields {
        *field = split.next().ok_or_else(|| malformed(what, line))?;
    }
    match split.next() {
        None => Ok(fields),
        Some(_) => Err(malformed(what, line)),
    }
}

fn number<T: std::str::FromStr>(field: &str, what: &str, line: &str) -> Result<T, DbError> {
    field.parse().map_err(|_| malformed(what, line))
}

impl<'a> WalkCommit<'a> {
    pub(super) fn parse(line: &'a str) -> Result<Self, DbError> {
        let what = "commit";
        let [id, position, committed_at, sha] = fields(line, what)?;
        if sha.is_empty() {
            return Err(malformed(what, line));
        }
        Ok(WalkCommit {
            id: number(id, what, line)?,
            position: number(position, what, line)?,
            committed_at: number(committed_at, what, line)?,
            sha,
        })
    }
}

impl<'a> RunLine<'a> {
    pub(super) fn parse(line: &'a str) -> Result<Self, DbError> {
        let what = "run";
        let [staged, series_id, commit_id, value, run_id, hex] = fields(line, what)?;
        let staged = match staged {
            "0" => false,
            "1" => true,
            _ => return Err(malformed(what, line)),
        };
        Ok(RunLine {
            staged,
            series_id: number(series_id, what, line)?,
            commit_id: number(commit_id, what, line)?,
            value: from_bits(number(value, what, line)?),
            run_id: number(run_id, what, line)?,
            hex,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_line_reads_its_commit() {
        let commit = WalkCommit::parse("7 42 1700000000 abc0").unwrap();
        assert_eq!(
            (commit.id, commit.position, commit.committed_at, commit.sha),
            (7, 42, 1_700_000_000, "abc0")
        );
    }

    #[test]
    fn a_run_line_reads_its_run() {
        let bits = |v: f64| v.to_bits() as i64;
        let line = format!("1 7 3 {} 9 0A0B", bits(1.5));
        let run = RunLine::parse(&line).unwrap();
        assert!(run.staged);
        assert_eq!(
            (run.series_id, run.commit_id, run.value, run.run_id, run.hex),
            (7, 3, 1.5, 9, "0A0B")
        );
        // Without samples, and a value whose bits are negative as an integer.
        let line = format!("0 8 4 {} 10 ", bits(-2e-300));
        let run = RunLine::parse(&line).unwrap();
        assert_eq!((run.staged, run.value, run.hex), (false, -2e-300, ""));
    }

    #[test]
    fn a_malformed_line_is_an_error() {
        for line in [
            "",
            "1 2 3",
            "1 2 3 ",
            "1 2 3 sha extra",
            "x 2 3 sha",
            "1 2.5 3 sha",
            "1 99999999999999999999 3 sha",
        ] {
            assert!(WalkCommit::parse(line).is_err(), "{line:?} was read");
        }
        for line in [
            "",
            "0 7 3 15 9",
            "0 7 3 15 9 0A extra",
            "2 7 3 15 9 0A",
            "0 7 3 nothing 9 0A",
            "0 7 3 1.5 9 0A",
            "0 7 3 18446744073709551615 9 0A",
            "0 x 3 15 9 0A",
            "0 7 - 15 9 0A",
            "0 7 3 15 - 0A",
        ] {
            assert!(RunLine::parse(line).is_err(), "{line:?} was read");
        }
    }
}
