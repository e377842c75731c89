//! The demo's history: what each commit of the generated repository changes, the variants
//! file and kymo.toml it commits, and which commits tell the story the analysis must find.

use std::path::Path;

/// One commit of the demo history: a message and the variants file it commits.
pub(super) struct DemoCommit {
    pub(super) message: &'static str,
    pub(super) bus: &'static str,
    pub(super) sealed_reader: &'static str,
    pub(super) scheduler: &'static str,
    pub(super) store: &'static str,
    pub(super) seconds_tier: &'static str,
    /// Whether this commit changes a variant: the story the analysis must find.
    pub(super) story: bool,
}

const FAST: DemoCommit = DemoCommit {
    message: "",
    bus: "soa",
    sealed_reader: "mmap",
    scheduler: "drr",
    store: "mmap",
    seconds_tier: "hour",
    story: false,
};

/// The story the demo's history tells: slowdowns land, one is fixed, the rest stay.
pub(super) fn history() -> Vec<DemoCommit> {
    let mut state = DemoCommit { ..FAST };
    let mut commits = Vec::new();
    // Every level lasts at least eight commits: change-point detection needs that many on each
    // side of a change before it calls it significant.
    let steps: [(&str, Option<(&str, &str)>); 30] = [
        ("Initial import of the kernels", None),
        ("docs: explain the ring tiers", None),
        ("ci: cache the cargo registry", None),
        ("tests: cover the broker's group commit", None),
        ("docs: usage of kymo-kernels", None),
        ("refactor: name the capture phases", None),
        ("chore: bump dependencies", None),
        ("docs: fix a typo in the README", None),
        ("tests: fuzz the variants file", None),
        ("ci: build on every push", None),
        (
            "bus: switch to the classic bounded backend",
            Some(("bus", "classic")),
        ),
        ("refactor: split the broker into modules", None),
        ("docs: document the bus knobs", None),
        (
            "log: read sealed segments with read() instead of mmap",
            Some(("sealed_reader", "read")),
        ),
        ("tests: cover the sparse index", None),
        (
            "vmm: keep a day of seconds in the store's finest tier",
            Some(("seconds_tier", "day")),
        ),
        ("refactor: rename the capture simulation", None),
        (
            "scheduler: fall back to FIFO for simplicity",
            Some(("scheduler", "fifo")),
        ),
        ("docs: describe the scenarios", None),
        ("ci: run clippy on all targets", None),
        (
            "bus: back to the structure-of-arrays backend",
            Some(("bus", "soa")),
        ),
        ("docs: add the figures table", None),
        (
            "ring: record through a write() syscall per sample",
            Some(("store", "write")),
        ),
        ("tests: property tests for the ring", None),
        ("chore: bump dependencies again", None),
        ("docs: changelog for 0.2", None),
        ("refactor: shorter names in the runner", None),
        ("tests: a slower CI machine profile", None),
        ("docs: release notes", None),
        ("release 0.2", None),
    ];
    for (message, change) in steps {
        match change {
            Some(("bus", v)) => state.bus = v,
            Some(("sealed_reader", v)) => state.sealed_reader = v,
            Some(("scheduler", v)) => state.scheduler = v,
            Some(("store", v)) => state.store = v,
            Some(("seconds_tier", v)) => state.seconds_tier = v,
            _ => {}
        }
        commits.push(DemoCommit {
            message,
            story: change.is_some(),
            ..state
        });
    }
    commits
}

pub(super) fn variants_toml(c: &DemoCommit) -> String {
    format!(
        "[bus]\nbackend = \"{}\"\n\n[log_read]\nsealed_reader = \"{}\"\n\n[fair_queue]\nscheduler = \"{}\"\n\n[ring]\nstore = \"{}\"\n\n[vm_scale]\nseconds_tier = \"{}\"\n",
        c.bus, c.sealed_reader, c.scheduler, c.store, c.seconds_tier
    )
}

/// The kernels whose instructions the demo counts: one per kernel its story changes (ring store,
/// bus backend, scheduler, sealed reader). Each count runs under callgrind, once per commit.
const COUNTED: [&str; 4] = [
    "ring/write_path/record",
    "bus/steady/one_subscriber",
    "fair_queue/scenario/hot_tenant_sustained",
    "log_read/sealed_vs_active/sealed_10mb",
];

/// The kernel families whose variants the story switches: the demo times these (the producer
/// benchmark, which no commit changes, would only add a second to every commit).
const TIMED: [&str; 4] = ["ring/", "bus/", "fair_queue/", "log_read/"];

/// The demo's kymo.toml runs this very binary's embedded kernels, so no build is needed: the
/// story's quick kernels timed once, alone; then, at the same time (neither needs a free CPU),
/// the story's kernels counted once (counts do not vary, so they need no repeat) and three
/// micro-VMs for a second each (each VM's memory is a sample).
pub(super) fn kymo_toml(kymo: &Path) -> String {
    let kymo = kymo.display();
    let timed: String = TIMED.iter().map(|f| format!(" --filter {f}")).collect();
    let kernels = format!("'{kymo}' kernels --quick --json --variants variants.toml{timed}");
    let filters: String = COUNTED.iter().map(|f| format!(" --filter {f}")).collect();
    let instructions = format!(
        "'{kymo}' kernels --quick --json --instructions-only --variants variants.toml{filters}"
    );
    let vm_scale = format!(
        "'{kymo}' kernels vm-scale --json --vms 3 --duration 1 --tick-ms 20 --stagger-ms 10 --sample-ms 20 --variants variants.toml"
    );
    format!(
        "[[suite]]\nname = \"kernels\"\nrun = {kernels:?}\nformat = \"kymo\"\ntimeout = \"30s\"\n\n\
         [[suite]]\nname = \"kernels-instructions\"\nrun = {instructions:?}\nformat = \"kymo\"\ntimeout = \"60s\"\nconcurrent = true\n\n\
         [[suite]]\nname = \"vm-scale\"\nrun = {vm_scale:?}\nformat = \"kymo\"\ntimeout = \"30s\"\nconcurrent = true\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_history_slows_down_and_recovers() {
        let history = history();
        assert_eq!(history.len(), 30);
        let first = &history[0];
        assert_eq!(
            (first.bus, first.sealed_reader, first.scheduler, first.store),
            ("soa", "mmap", "drr", "mmap")
        );
        let buses: Vec<&str> = history.iter().map(|c| c.bus).collect();
        let slow = buses.iter().position(|b| *b == "classic").unwrap();
        let fixed = buses.iter().skip(slow).position(|b| *b == "soa").unwrap() + slow;
        assert!(slow < fixed, "the bus slowdown is fixed later");
        let last = history.last().unwrap();
        assert_eq!(
            (
                last.sealed_reader,
                last.scheduler,
                last.store,
                last.seconds_tier
            ),
            ("read", "fifo", "write", "day")
        );
        let story = history.iter().filter(|c| c.story).count();
        assert_eq!(story, 6, "five kernel changes and one memory change");
        // Change-point detection needs eight commits on each side of a change.
        let memory = history
            .iter()
            .position(|c| c.seconds_tier == "day")
            .unwrap();
        assert!((8..=22).contains(&memory), "{memory}");
        assert!(variants_toml(last).contains("[vm_scale]\nseconds_tier = \"day\""));
        let toml = kymo_toml(Path::new("/bin/kymo"));
        assert!(toml.contains("name = \"vm-scale\"") && toml.contains("kernels vm-scale --json"));
        assert!(
            toml.contains("--instructions-only")
                && toml.contains("--filter ring/write_path/record")
        );
        assert!(!toml.contains("produce"), "no commit changes the producer");
        assert_eq!(
            toml.matches("concurrent = true").count(),
            2,
            "counts beside memory"
        );
        assert!(
            !toml
                .split("[[suite]]")
                .nth(1)
                .unwrap()
                .contains("concurrent"),
            "timed alone"
        );
    }
}
