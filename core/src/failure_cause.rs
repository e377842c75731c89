//! Why a job failed, in one line: the lines of a failed command's output that say what went
//! wrong. A job's error names the step that failed ("the build command exited with status
//! 101"); the reason is in its output (cargo's `error: ...`, a panic, a permission refused),
//! which the queue page and `kymo jobs` show beside the error. Pure.

/// Longest cause shown, in characters: one line of a table.
const MAX_CAUSE: usize = 300;

/// The cause of a failure whose output ended with `log_tail`: the first error line (a
/// compiler's first error is the one the others follow from; a panic with its message), the
/// deepest `Caused by:` under it (cargo explains a failed download in a chain of them), and
/// the last error line when it says something else; without error lines, a line that tells of
/// a refusal (permission denied, a command not found), else the output's last line. `None` when
/// the output is empty or says nothing the error does not.
pub fn failure_cause(error: &str, log_tail: &str) -> Option<String> {
    let lines: Vec<String> = log_tail
        .lines()
        .map(strip_ansi)
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    // A line that says it is an error outranks a warning that mentions a refusal (cargo warns
    // "failed to write cache ... Permission denied" before the error that stopped it).
    let strong: Vec<usize> = (0..lines.len())
        .filter(|&i| is_error_line(&lines[i]))
        .collect();
    let errors = if strong.is_empty() {
        (0..lines.len())
            .filter(|&i| mentions_a_refusal(&lines[i]))
            .collect()
    } else {
        strong
    };
    let mut parts: Vec<&str> = Vec::new();
    match (errors.first(), errors.last()) {
        (Some(&first), Some(&last)) => {
            parts.push(&lines[first]);
            // A panic says what went wrong on the line after `panicked at FILE:LINE:COL:`.
            if lines[first].contains("panicked at")
                && let Some(message) = lines.get(first + 1)
            {
                parts.push(message);
            }
            if let Some(deepest) = deepest_cause(&lines[first + 1..]) {
                parts.push(deepest);
            }
            if last != first && !parts.contains(&lines[last].as_str()) {
                parts.push(&lines[last]);
            }
        }
        _ => parts.push(lines.last()?),
    }
    let cause = parts.join(" … ");
    if error.contains(cause.as_str()) {
        return None;
    }
    Some(shorten(&cause))
}

/// Whether a line reports an error: `error: ...`, `error[E0425]: ...`, `Error: ...`,
/// `fatal: ...`, or a panic.
fn is_error_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let leads = ["error:", "error[", "fatal:", "fatal error"]
        .iter()
        .any(|p| lower.starts_with(p));
    leads || lower.contains("panicked at")
}

/// Whether a line that is no warning tells of a refusal by the operating system or a shell:
/// what output without error lines failed of.
fn mentions_a_refusal(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    !lower.starts_with("warning")
        && (lower.contains("permission denied")
            || lower.contains("command not found")
            || lower.ends_with(": not found"))
}

/// The last line after the last `Caused by:` among `lines` (cargo's chain of causes ends
/// with the deepest), before the next error.
fn deepest_cause(lines: &[String]) -> Option<&str> {
    let mut deepest = None;
    let mut after_caused_by = false;
    for line in lines {
        if is_error_line(line) && !after_caused_by {
            break;
        }
        if line.eq_ignore_ascii_case("caused by:") {
            after_caused_by = true;
            continue;
        }
        if after_caused_by {
            deepest = Some(line.as_str());
            after_caused_by = false;
        }
    }
    deepest
}

/// `line` without terminal colour codes (cargo colours its errors when it thinks it may).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        if !c.is_control() || c == '\t' {
            out.push(c);
        }
    }
    out
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= MAX_CAUSE {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_CAUSE - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILD_FAILED: &str = "the build command exited with status 101";

    #[test]
    fn a_compiler_error_gives_its_first_error_and_the_summary() {
        let log = "   Compiling useg v0.1.0 (/w)\n\
                   error[E0425]: cannot find value `x` in this scope\n \
                    --> src/lib.rs:3:5\n  |\n3 |     x\n  |     ^ not found in this scope\n\n\
                   error: could not compile `useg` (lib) due to 1 previous error\n";
        assert_eq!(
            failure_cause(BUILD_FAILED, log).unwrap(),
            "error[E0425]: cannot find value `x` in this scope … \
             error: could not compile `useg` (lib) due to 1 previous error"
        );
    }

    #[test]
    fn a_failed_download_names_its_deepest_cause() {
        let log = "\u{1b}[1m\u{1b}[91merror\u{1b}[0m: failed to download `cast v0.3.0`\n\n\
                   Caused by:\n  unable to get packages from source\n\n\
                   Caused by:\n  failed to open `/home/k/.cargo/registry/cache/cast-0.3.0.crate`\n\n\
                   Caused by:\n  Permission denied (os error 13)\n";
        assert_eq!(
            failure_cause(BUILD_FAILED, log).unwrap(),
            "error: failed to download `cast v0.3.0` … Permission denied (os error 13)"
        );
    }

    #[test]
    fn a_warning_that_mentions_a_refusal_does_not_hide_the_error_after_it() {
        // The log tail of a `cargo bench` in the sandbox of a kymo worker whose CARGO_HOME was
        // read-only (a trial on crc32fast 1.5.5).
        let log = "    Updating crates.io index\n\
                   warning: failed to write cache, path: /root/.cargo/registry/index/\
                   index.crates.io-1949cf8c6b5b557f/.cache/cf/g-/cfg-if, error: Permission \
                   denied (os error 13)\n     Locking 59 packages to latest compatible \
                   versions\n Downloading crates ...\n  Downloaded quickcheck v1.1.0\n\
                   error: failed to open `/root/.cargo/registry/cache/\
                   index.crates.io-1949cf8c6b5b557f/quickcheck-1.1.0.crate`\n\n\
                   Caused by:\n  Permission denied (os error 13)\n";
        assert_eq!(
            failure_cause("the run (repeat 1/1) command exited with status 101", log).unwrap(),
            "error: failed to open `/root/.cargo/registry/cache/index.crates.io-1949cf8c6b5b557f/\
             quickcheck-1.1.0.crate` … Permission denied (os error 13)"
        );
    }

    #[test]
    fn a_panic_and_a_missing_command_are_causes() {
        let panic = "running 3 benchmarks\nthread 'main' panicked at src/main.rs:9:5:\n\
                     index out of bounds\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            failure_cause("the run command exited with status 101", panic).unwrap(),
            "thread 'main' panicked at src/main.rs:9:5: … index out of bounds"
        );
        let missing = "sh: 1: criterion-bench: not found\n";
        assert_eq!(
            failure_cause("exited with status 127", missing).unwrap(),
            "sh: 1: criterion-bench: not found"
        );
    }

    #[test]
    fn without_error_lines_the_last_line_is_the_cause() {
        let log = "building\nlinking\nout of disk space on /tmp\n";
        assert_eq!(
            failure_cause(BUILD_FAILED, log).unwrap(),
            "out of disk space on /tmp"
        );
    }

    #[test]
    fn nothing_is_said_twice_or_from_nothing() {
        assert_eq!(failure_cause(BUILD_FAILED, ""), None);
        assert_eq!(failure_cause(BUILD_FAILED, "\n \n\u{1b}[0m\n"), None);
        assert_eq!(
            failure_cause("suite \"s\": timed out", "timed out"),
            None,
            "the error says it already"
        );
    }

    #[test]
    fn hostile_output_gives_one_short_printable_line() {
        let long = format!("error: {}\n", "x".repeat(10_000));
        let cause = failure_cause(BUILD_FAILED, &long).unwrap();
        assert_eq!(cause.chars().count(), MAX_CAUSE);
        assert!(cause.ends_with('…'));
        let control = "error: bad\u{7}\u{0}\u{1b}]0;title\u{7} thing\r\n";
        let cause = failure_cause(BUILD_FAILED, control).unwrap();
        assert!(!cause.chars().any(char::is_control), "{cause:?}");
        assert!(cause.starts_with("error: bad"), "{cause:?}");
    }
}
