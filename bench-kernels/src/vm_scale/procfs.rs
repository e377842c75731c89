//! What vm-scale reads from `/proc`: a process's resident memory (now and at its peak) and
//! the processes descending from the launcher. Parsing is pure and tested on hostile text;
//! a process that has gone reads as nothing, not as an error (they come and go while sampled).

use std::collections::HashMap;

/// A `kB` field (`VmRSS`, `VmHWM`) of a `/proc/PID/status` text, in bytes. The kernel's `kB`
/// is 1024 bytes.
pub fn status_bytes(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut words = rest.split_whitespace();
        let kib: u64 = words.next()?.parse().ok()?;
        (words.next() == Some("kB") && words.next().is_none()).then_some(kib.saturating_mul(1024))
    })
}

/// `VmRSS` of `pid` in bytes; 0 once it has exited (or is a zombie, which has no memory).
pub fn resident_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| status_bytes(&status, "VmRSS"))
        .unwrap_or(0)
}

/// This process's peak resident memory (`VmHWM`) in bytes, 0 where `/proc` cannot tell.
pub fn own_peak_resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| status_bytes(&status, "VmHWM"))
        .unwrap_or(0)
}

/// The parent pid in a `/proc/PID/stat` line. The command name sits in parentheses and may
/// itself hold spaces and parentheses, so the fields are read after the last `)`.
pub fn parent_of(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

/// Every process whose chain of parents reaches `root` (not `root` itself), from a map of
/// pid to parent pid.
pub fn descendants_in(parents: &HashMap<u32, u32>, root: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for &pid in parents.keys() {
        let mut at = pid;
        // A chain longer than the table would be a cycle (pids reused mid-scan): stop there.
        for _ in 0..parents.len() {
            match parents.get(&at) {
                Some(&parent) if parent == root => {
                    found.push(pid);
                    break;
                }
                Some(&parent) if parent != 0 && parent != at => at = parent,
                _ => break,
            }
        }
    }
    found.sort_unstable();
    found
}

/// The processes now descending from `root`, read from `/proc`.
pub fn descendants(root: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: HashMap<u32, u32> = entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            Some((pid, parent_of(&stat)?))
        })
        .collect();
    descendants_in(&parents, root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_bytes_and_malformed_ones_are_none() {
        let status = "Name:\tkymo-kernels\nVmHWM:\t    4712 kB\nVmRSS:\t    3580 kB\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(3580 * 1024));
        assert_eq!(status_bytes(status, "VmHWM"), Some(4712 * 1024));
        assert_eq!(status_bytes(status, "VmSwap"), None);
        assert_eq!(status_bytes("VmRSSX:\t1 kB\n", "VmRSS"), None);
        assert_eq!(status_bytes("VmRSS:\t12 MB\n", "VmRSS"), None);
        assert_eq!(status_bytes("VmRSS:\t-1 kB\n", "VmRSS"), None);
        assert_eq!(status_bytes("VmRSS:\t1 kB trailing\n", "VmRSS"), None);
        assert_eq!(
            status_bytes("VmRSS:\t99999999999999999999 kB\n", "VmRSS"),
            None
        );
        assert_eq!(
            status_bytes("VmRSS:\t18446744073709551615 kB\n", "VmRSS"),
            Some(u64::MAX)
        );
    }

    #[test]
    fn the_parent_is_found_after_a_hostile_command_name() {
        assert_eq!(parent_of("42 (sh) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of("42 (a) S 1 (b)) R 9 1 1"), Some(9));
        assert_eq!(parent_of("42 (no closing S 7"), None);
        assert_eq!(parent_of("42 (x) S"), None);
        assert_eq!(parent_of(""), None);
    }

    #[test]
    fn descendants_follow_the_chain_and_survive_cycles() {
        let parents: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 11), (20, 1), (30, 31), (31, 30)]
            .into_iter()
            .collect();
        assert_eq!(descendants_in(&parents, 10), vec![11, 12]);
        assert_eq!(descendants_in(&parents, 12), Vec::<u32>::new());
        assert_eq!(descendants_in(&parents, 99), Vec::<u32>::new());
    }

    #[test]
    fn a_spawned_child_is_a_descendant_and_has_memory() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id();
        let found = descendants(std::process::id());
        let rss = resident_bytes(pid);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found.contains(&pid), "{found:?} lacks {pid}");
        assert!(rss > 0);
        assert_eq!(resident_bytes(pid), 0, "a reaped child reads as 0");
        assert!(own_peak_resident_bytes() > 0);
    }
}
