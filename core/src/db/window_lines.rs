//! Windows of history spelled as lines of text by their queries (`windows.rs`): the commits of
//! a walk down the branch a line each, then the runs of the window's series at those commits a
//! line each. Text, not rows: handing each of a window's thousands of rows from SQLite's thread
//! to this task cost more than finding it. A run's line is written by this module too
//! ([`run_line`], which the SQL function `window_run` calls), where SQLite's printf was a tenth
//! of a benchmark page. A merge reads the runs it moves as such lines too (`summaries.rs`).

use super::sql_functions::from_bits;
use super::{DbError, decode_error, push_hex};

/// A commit of the walk: `id position committed_at sha`.
pub(super) struct WalkCommit<'a> {
    pub(super) id: i64,
    pub(super) position: i64,
    pub(super) committed_at: i64,
    pub(super) sha: &'a str,
}

/// A run of one of the series at a commit of the walk:
/// `staged series commit value run samples` (the value as the integer of its bits,
/// `sql_functions.rs`; the samples' stored bytes in hex, empty unless asked for), as
/// [`run_line`] writes it.
pub(super) struct RunLine<'a> {
    pub(super) staged: bool,
    pub(super) series_id: i64,
    pub(super) commit_id: i64,
    pub(super) value: f64,
    pub(super) run_id: i64,
    pub(super) hex: &'a str,
}

/// The line of a run (`RunLine`): `value` as a double's bits, `samples` as stored.
pub(super) fn run_line(
    staged: bool,
    series_id: i64,
    commit_id: i64,
    value: f64,
    run_id: i64,
    samples: &[u8],
) -> String {
    let mut line = String::with_capacity(64 + 2 * samples.len());
    let mut digits = itoa::Buffer::new();
    line.push(if staged { '1' } else { '0' });
    for number in [series_id, commit_id, value.to_bits() as i64, run_id] {
        line.push(' ');
        line.push_str(digits.format(number));
    }
    line.push(' ');
    push_hex(&mut line, samples);
    line
}

pub(super) fn malformed(what: &str, text: &str) -> DbError {
    let shown: String = text.chars().take(60).collect();
    decode_error(std::io::Error::other(format!(
        "a window's {what}: {shown:?}"
    )))
}

/// The space-separated fields of a line, read left to right; integers are read as their
/// digits are passed (a window's lines hold some 25,000 of them).
struct Fields<'a> {
    line: &'a str,
    /// What follows the fields read; `None` after the last.
    rest: Option<&'a str>,
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn of(line: &'a str, what: &'static str) -> Self {
        Fields {
            line,
            rest: Some(line),
            what,
        }
    }

    fn malformed(&self) -> DbError {
        malformed(self.what, self.line)
    }

    /// Passes the next field, `length` bytes long, and the space after it.
    fn pass(&mut self, rest: &'a str, length: usize) -> &'a str {
        self.rest = rest.get(length + 1..);
        &rest[..length]
    }

    fn text(&mut self) -> Result<&'a str, DbError> {
        let rest = self.rest.ok_or_else(|| self.malformed())?;
        let length = rest.find(' ').unwrap_or(rest.len());
        Ok(self.pass(rest, length))
    }

    fn int(&mut self) -> Result<i64, DbError> {
        let rest = self.rest.ok_or_else(|| self.malformed())?;
        let bytes = rest.as_bytes();
        let negative = bytes.first() == Some(&b'-');
        let start = usize::from(negative);
        let mut value: i64 = 0;
        let mut at = start;
        while let Some(&byte) = bytes.get(at).filter(|b| **b != b' ') {
            let digit = byte.wrapping_sub(b'0');
            let next = value.checked_mul(10).and_then(|v| match (digit, negative) {
                (10.., _) => None,
                (_, true) => v.checked_sub(i64::from(digit)),
                (_, false) => v.checked_add(i64::from(digit)),
            });
            value = next.ok_or_else(|| self.malformed())?;
            at += 1;
        }
        if at == start {
            return Err(self.malformed());
        }
        self.pass(rest, at);
        Ok(value)
    }

    /// Fails unless every field was read.
    fn end(&self) -> Result<(), DbError> {
        match self.rest {
            None => Ok(()),
            Some(_) => Err(self.malformed()),
        }
    }
}

impl<'a> WalkCommit<'a> {
    pub(super) fn parse(line: &'a str) -> Result<Self, DbError> {
        let mut fields = Fields::of(line, "commit");
        let commit = WalkCommit {
            id: fields.int()?,
            position: fields.int()?,
            committed_at: fields.int()?,
            sha: fields.text()?,
        };
        fields.end()?;
        if commit.sha.is_empty() {
            return Err(fields.malformed());
        }
        Ok(commit)
    }
}

impl<'a> RunLine<'a> {
    pub(super) fn parse(line: &'a str) -> Result<Self, DbError> {
        let mut fields = Fields::of(line, "run");
        let staged = match fields.int()? {
            0 => false,
            1 => true,
            _ => return Err(fields.malformed()),
        };
        let run = RunLine {
            staged,
            series_id: fields.int()?,
            commit_id: fields.int()?,
            value: from_bits(fields.int()?),
            run_id: fields.int()?,
            hex: fields.text()?,
        };
        fields.end()?;
        Ok(run)
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
        // The integers at both ends.
        let run = RunLine::parse("0 7 3 -9223372036854775808 9223372036854775807 A0").unwrap();
        assert_eq!(run.value.to_bits(), i64::MIN as u64);
        assert_eq!(run.run_id, i64::MAX);
    }

    #[test]
    fn a_written_run_line_reads_back() {
        for (staged, value, samples) in [
            (false, 1.5, vec![]),
            (true, -2e-300, vec![0x00, 0xff, 0x7f]),
            (false, f64::MIN, vec![0xa0; 40]),
            (true, f64::MAX, vec![1]),
        ] {
            let line = run_line(staged, 7, i64::MAX, value, -3, &samples);
            let run = RunLine::parse(&line).unwrap();
            assert_eq!(
                (run.staged, run.series_id, run.commit_id, run.run_id),
                (staged, 7, i64::MAX, -3)
            );
            assert_eq!(run.value.to_bits(), value.to_bits());
            assert_eq!(run.hex, crate::db::to_hex(&samples));
        }
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
            "0 7 3 -9223372036854775809 9 0A",
            "0 7 3 9223372036854775808 9 0A",
            "0 7 3 +15 9 0A",
            "0 7 3 -- 9 0A",
            "0 7 3 1-5 9 0A",
            "0  3 15 9 0A",
        ] {
            assert!(RunLine::parse(line).is_err(), "{line:?} was read");
        }
    }
}
