//! The counted regions: where a kernel's fixed amount of work starts and ends, for the
//! instruction-count run.
//!
//! The count run is a separate process under callgrind (see [`super`]); callgrind dumps its
//! counters when the main thread enters and leaves [`kymo_kernels_counted_region`], so the
//! dump taken on leaving holds exactly the instructions of the work inside, on every thread
//! the work started and joined, and none of process start-up or of the harness. The kernels
//! keep one code path: in a normal run a region is one plain call.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The symbol callgrind's `--dump-before`/`--dump-after` name.
pub const REGION_SYMBOL: &str = "kymo_kernels_counted_region";

/// Operations a timed loop does in its counted region: enough to dwarf a loop's set-up, few
/// enough that callgrind (some 50 times slower than native) gets through every kernel of a
/// commit in seconds.
pub const COUNTED_OPERATIONS: u64 = 20_000;

/// Whether this process is the count run. Process-wide because the count run is a process of
/// its own whose only job is to walk the kernels once through their regions.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Regions entered so far, so that the runner can tell which benchmark each dump belongs to.
static REGIONS: AtomicUsize = AtomicUsize::new(0);

/// Makes this process the count run: timed loops do their fixed work once, in a region.
pub fn start_counting() {
    COUNTING.store(true, Ordering::SeqCst);
}

/// Whether this process is the count run.
pub fn counting() -> bool {
    COUNTING.load(Ordering::SeqCst)
}

/// How many regions this process has entered.
pub fn regions_entered() -> usize {
    REGIONS.load(Ordering::SeqCst)
}

/// Runs `work` inside a counted region and returns what it returned.
pub fn counted<T>(work: impl FnOnce() -> T) -> T {
    let mut work = Some(work);
    let mut out = None;
    REGIONS.fetch_add(1, Ordering::SeqCst);
    // Instrumented from just before the region's call (so that callgrind sees it entered)
    // to just after its return: the count run's set-up costs it no instrumentation.
    super::client::start_instrumentation();
    kymo_kernels_counted_region(&mut || {
        if let Some(work) = work.take() {
            out = Some(work());
        }
    });
    super::client::stop_instrumentation();
    out.expect("the region runs its work exactly once")
}

/// The region itself: a named, never-inlined function whose entry and exit callgrind sees.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn kymo_kernels_counted_region(work: &mut dyn FnMut()) {
    work();
    std::hint::black_box(());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_runs_its_work_once_and_is_counted() {
        let before = regions_entered();
        let mut calls = 0;
        let out = counted(|| {
            calls += 1;
            7
        });
        assert_eq!((out, calls), (7, 1));
        assert!(regions_entered() > before);
    }
}
