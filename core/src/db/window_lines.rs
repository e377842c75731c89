//! Windows of history spelled as lines of text by their queries (`windows.rs`,
//! `shared_windows.rs`): a commit and its runs of the series a line. Text, not JSON: SQLite
//! built and re-read nested arrays of JSON for longer than it took to find the runs, and
//! handing each run to this thread as a row of its own cost more again.

use super::f64_bits::from_bits;
use super::{DbError, decode_error};

/// A commit of the walk as the query spells it, one line of text:
/// `staged position committed_at sha`, then `;series value run samples` for each of its runs
/// of the series (the value as the integer of its bits, `f64_bits.rs`; the samples' stored
/// bytes in hex, empty unless asked for).
pub(super) struct CommitLine<'a> {
    pub(super) staged: bool,
    pub(super) position: i64,
    pub(super) committed_at: i64,
    pub(super) sha: &'a str,
    pub(super) runs: &'a str,
}

/// A run of a [`CommitLine`].
pub(super) struct RunField<'a> {
    pub(super) series_id: i64,
    pub(super) value: f64,
    pub(super) hex: &'a str,
    pub(super) run_id: i64,
}

pub(super) fn malformed(what: &str, text: &str) -> DbError {
    let shown: String = text.chars().take(60).collect();
    decode_error(std::io::Error::other(format!(
        "a window's {what}: {shown:?}"
    )))
}

fn number<T: std::str::FromStr>(field: Option<&str>, what: &str, text: &str) -> Result<T, DbError> {
    field
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| malformed(what, text))
}

impl<'a> CommitLine<'a> {
    pub(super) fn parse(line: &'a str) -> Result<Self, DbError> {
        let (head, runs) = line.split_once(';').unwrap_or((line, ""));
        let mut fields = head.split(' ');
        let staged: u8 = number(fields.next(), "commit", line)?;
        let position = number(fields.next(), "commit", line)?;
        let committed_at = number(fields.next(), "commit", line)?;
        let sha = fields.next().filter(|s| !s.is_empty());
        let (Some(sha), None, 0 | 1) = (sha, fields.next(), staged) else {
            return Err(malformed("commit", line));
        };
        Ok(CommitLine {
            staged: staged == 1,
            position,
            committed_at,
            sha,
            runs,
        })
    }

    pub(super) fn runs(&self) -> impl Iterator<Item = Result<RunField<'a>, DbError>> {
        (self.runs.split(';').filter(|run| !run.is_empty())).map(|run| {
            let mut fields = run.split(' ');
            let series_id = number(fields.next(), "run", run)?;
            let value = from_bits(number(fields.next(), "run", run)?);
            let run_id = number(fields.next(), "run", run)?;
            let (Some(hex), None) = (fields.next(), fields.next()) else {
                return Err(malformed("run", run));
            };
            Ok(RunField {
                series_id,
                value,
                hex,
                run_id,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(line: &str) -> Result<Vec<(i64, f64, String, i64)>, DbError> {
        let commit = CommitLine::parse(line)?;
        commit
            .runs()
            .map(|run| run.map(|r| (r.series_id, r.value, r.hex.to_owned(), r.run_id)))
            .collect()
    }

    #[test]
    fn a_commit_line_reads_its_runs() {
        let bits = |v: f64| v.to_bits() as i64;
        let line = format!(
            "1 42 1700000000 abc0;7 {} 9 0A0B;8 {} 10 ",
            bits(1.5),
            bits(-2e-300)
        );
        let line = line.as_str();
        let commit = CommitLine::parse(line).unwrap();
        assert!(commit.staged);
        assert_eq!((commit.position, commit.committed_at), (42, 1_700_000_000));
        assert_eq!(commit.sha, "abc0");
        assert_eq!(
            runs(line).unwrap(),
            vec![
                (7, 1.5, "0A0B".to_owned(), 9),
                (8, -2e-300, String::new(), 10)
            ]
        );
        // A commit without runs of the series (a staged commit of other series).
        assert!(runs("0 3 5 ff").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_line_is_an_error() {
        for line in [
            "",
            "0 1 2",
            "0 1 2 ",
            "0 1 2 sha extra",
            "2 1 2 sha",
            "x 1 2 sha",
            "0 1.5 2 sha",
            "0 99999999999999999999 2 sha",
            "0 1 2 sha;7 15 9",
            "0 1 2 sha;7 15 9 0A extra",
            "0 1 2 sha;7 nothing 9 0A",
            "0 1 2 sha;7 1.5 9 0A",
            "0 1 2 sha;7 18446744073709551615 9 0A",
            "0 1 2 sha;x 15 9 0A",
            "0 1 2 sha;7 15 -",
        ] {
            assert!(
                CommitLine::parse(line).is_err() || runs(line).is_err(),
                "{line:?} was read"
            );
        }
    }
}
