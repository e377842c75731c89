//! A thread for CPU-heavy work that should yield to the dashboard: change-point detection over
//! a thousand series after an upload takes seconds of CPU, and run on the async runtime's
//! threads it would hold up every page request queued behind it.
//!
//! The work runs on one thread of its own, created on first use, with a lower scheduling
//! priority (nice 10 on Linux, where each thread has its own): when requests and analysis
//! compete for the cores, the requests win, and the analysis uses whatever is left.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::mpsc::{Sender, channel};

use tokio::sync::oneshot;

type Work = Box<dyn FnOnce() + Send>;

/// How much less the thread's work counts for the scheduler (0 normal, 19 least).
const NICENESS: i32 = 10;

fn thread() -> &'static Sender<Work> {
    static SENDER: OnceLock<Sender<Work>> = OnceLock::new();
    SENDER.get_or_init(|| {
        let (sender, receiver) = channel::<Work>();
        std::thread::Builder::new()
            .name("kymo-low-priority".into())
            .spawn(move || {
                lower_priority();
                for work in receiver {
                    // A panic is reported to the caller (its answer is dropped) and the thread
                    // goes on with the next piece of work.
                    let _ = catch_unwind(AssertUnwindSafe(work));
                }
            })
            .expect("the system can start a thread");
        sender
    })
}

#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: plain system calls on the calling thread; no memory is shared with them.
    let result = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICENESS)
    };
    if result != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot lower the analysis thread's priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Runs `work` on the low-priority thread and waits for its answer; `None` if it panicked.
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (answer, answered) = oneshot::channel();
    let job: Work = Box::new(move || {
        let _ = answer.send(work());
    });
    thread().send(job).ok()?;
    answered.await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_low_priority_thread_and_survives_a_panic() {
        let name = run(|| std::thread::current().name().map(str::to_owned)).await;
        assert_eq!(name.flatten().as_deref(), Some("kymo-low-priority"));
        assert_eq!(run(|| -> u8 { panic!("on purpose") }).await, None);
        assert_eq!(run(|| 6 * 7).await, Some(42), "the thread goes on");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_runs_at_a_lower_priority() {
        // SAFETY: reads the calling thread's own nice value.
        let nice =
            run(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) });
        assert_eq!(nice.await, Some(NICENESS));
    }
}
