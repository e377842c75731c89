//! A suite's `instructions = true`: after its timed repeats, the worker runs the suite's
//! command once more under valgrind's callgrind, following every child process, and stores
//! the instructions they executed in total as the metric `instructions` of one benchmark
//! named after the suite.
//!
//! This is for programs that cannot say where a benchmark starts and ends; a count of the
//! whole command includes its start-up, so it moves when the program's work moves, not when
//! the machine is busy. Programs that can say (bench-kernels, gungraun) report counts per
//! benchmark themselves, and criterion benchmarks are counted one by one under cargo's runner
//! ([`criterion`]).

pub mod callgrind_dump;
pub mod criterion;

use std::collections::BTreeMap;
use std::path::Path;

use kymo_core::model::Direction;
use kymo_core::results::{BenchmarkResult, MetricResult};

/// The metric's name, also its unit.
pub const METRIC: &str = "instructions";

/// Most valgrind log files read: one per process the command started.
pub const MAX_PROCESSES: usize = 4096;
/// Largest valgrind log file read, in bytes.
pub const MAX_LOG_BYTES: u64 = 1024 * 1024;

/// The shell command that runs `run` under callgrind, every process writing its valgrind log
/// (which ends with the process's instruction count) into `logs`.
pub fn under_callgrind(run: &str, logs: &Path) -> String {
    let log_file = logs.join("valgrind.%p.log");
    format!(
        "valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=/dev/null --log-file={} sh -c {}",
        shell_quote(&log_file.display().to_string()),
        shell_quote(run)
    )
}

pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Reads one valgrind log: the process's `Collected : N` line.
pub fn collected(log: &str) -> Result<u64, String> {
    let mut found = None;
    for line in log.lines() {
        let Some((_, rest)) = line.split_once("Collected :") else {
            continue;
        };
        let count: u64 = rest
            .trim()
            .parse()
            .map_err(|_| format!("bad count in {line:?}"))?;
        if found.replace(count).is_some() {
            return Err("two `Collected` lines in one log".into());
        }
    }
    found.ok_or_else(|| {
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        format!(
            "no `Collected` line: valgrind did not finish ({})",
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        )
    })
}

/// Sums the counts of every valgrind log in `logs`.
pub fn total_instructions(logs: &Path) -> Result<u64, String> {
    let mut total = 0u64;
    let mut files = 0;
    let entries = std::fs::read_dir(logs).map_err(|e| format!("cannot read the logs: {e}"))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        files += 1;
        if files > MAX_PROCESSES {
            return Err(format!("more than {MAX_PROCESSES} processes"));
        }
        let size = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
        if size > MAX_LOG_BYTES {
            return Err(format!("{} is {size} bytes", path.display()));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let count = collected(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        total = total
            .checked_add(count)
            .ok_or("the total does not fit in 64 bits")?;
    }
    if files == 0 {
        return Err("valgrind wrote no log: is it installed?".into());
    }
    Ok(total)
}

/// The benchmark that carries a command's count: named after its suite.
pub fn command_result(suite: &str, instructions: u64) -> BenchmarkResult {
    BenchmarkResult {
        name: suite.to_string(),
        params: BTreeMap::new(),
        metrics: vec![MetricResult {
            name: METRIC.into(),
            unit: METRIC.into(),
            direction: Direction::Lower,
            value: instructions as f64,
            samples: Vec::new(),
            hdr: None,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The end of a real log (valgrind 3.19, callgrind, `awk` summing 100000 numbers).
    const LOG: &str = "==5056== Callgrind, a call-graph generating cache profiler\n\
        ==5056== Command: awk BEGIN{for(i=0;i<100000;i++)s+=i}\n==5056== \n\
        ==5056== Events    : Ir\n==5056== Collected : 31100145\n==5056== \n\
        ==5056== I   refs:      31,100,145\n";

    #[test]
    fn a_real_log_gives_its_count() {
        assert_eq!(collected(LOG), Ok(31_100_145));
    }

    #[test]
    fn logs_without_one_clean_count_are_errors() {
        for bad in [
            "",
            "==1== killed by signal 9\n",
            &LOG.replace("31100145", "lots"),
            &LOG.replace("31100145", "-3"),
            &LOG.replace("31100145", "99999999999999999999999"),
            &format!("{LOG}{LOG}"),
        ] {
            assert!(collected(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn counts_of_every_process_are_summed_and_bad_directories_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(total_instructions(dir.path()).is_err(), "no log at all");
        std::fs::write(dir.path().join("valgrind.1.log"), LOG).unwrap();
        std::fs::write(
            dir.path().join("valgrind.2.log"),
            LOG.replace("31100145", "5"),
        )
        .unwrap();
        assert_eq!(total_instructions(dir.path()), Ok(31_100_150));
        let huge = vec![b'x'; MAX_LOG_BYTES as usize + 1];
        std::fs::write(dir.path().join("valgrind.3.log"), huge).unwrap();
        assert!(total_instructions(dir.path()).is_err());
        assert!(total_instructions(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn the_command_is_quoted_for_the_shell() {
        let command = under_callgrind("echo 'a b' && true", Path::new("/t/it's"));
        assert!(
            command.contains(r"--log-file='/t/it'\''s/valgrind.%p.log'"),
            "{command}"
        );
        assert!(
            command.ends_with(r"sh -c 'echo '\''a b'\'' && true'"),
            "{command}"
        );
    }
}
