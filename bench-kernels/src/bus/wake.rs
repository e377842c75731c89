//! Putting subscribers to sleep and waking them, shared by both backends.
//!
//! A subscriber registers as a sleeper under the lock, re-checks for a message (the race
//! check), then waits. A publisher, after making a message visible, looks for sleepers and
//! only then takes the lock to notify. The sequentially consistent register/look pair
//! ensures a publisher either sees the sleeper or the sleeper sees the message.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Condvar, Mutex};

use crate::variants::WakeMode;

pub(crate) struct Notifier {
    mode: WakeMode,
    sleepers: AtomicUsize,
    armed: AtomicBool,
    lock: Mutex<()>,
    condvar: Condvar,
}

impl Notifier {
    pub(crate) fn new(mode: WakeMode) -> Self {
        Self {
            mode,
            sleepers: AtomicUsize::new(0),
            armed: AtomicBool::new(false),
            lock: Mutex::new(()),
            condvar: Condvar::new(),
        }
    }

    /// Called by a publisher after each message ([`WakeMode::Every`]) or once per publish
    /// call ([`WakeMode::Edge`]); `end_of_call` tells which of the two this is.
    #[inline]
    pub(crate) fn published(&self, end_of_call: bool) {
        fence(Ordering::SeqCst);
        match self.mode {
            WakeMode::Every => {
                if self.sleepers.load(Ordering::Relaxed) > 0 {
                    self.wake_all();
                }
            }
            // Edge: only the first publish after someone went to sleep wakes; the woken
            // subscribers drain everything before they sleep (and arm) again.
            WakeMode::Edge => {
                if end_of_call
                    && self.armed.load(Ordering::Relaxed)
                    && self.armed.swap(false, Ordering::SeqCst)
                {
                    self.wake_all();
                }
            }
        }
    }

    pub(crate) fn mode(&self) -> WakeMode {
        self.mode
    }

    #[cold]
    fn wake_all(&self) {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.condvar.notify_all();
    }

    /// Sleeps until a publisher wakes us, unless `ready()` already holds after we
    /// registered.
    pub(crate) fn sleep_unless(&self, ready: impl Fn() -> bool) {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        match self.mode {
            WakeMode::Every => {
                self.sleepers.fetch_add(1, Ordering::SeqCst);
            }
            WakeMode::Edge => self.armed.store(true, Ordering::SeqCst),
        }
        fence(Ordering::SeqCst);
        if !ready() {
            drop(self.condvar.wait(guard).unwrap_or_else(|e| e.into_inner()));
        }
        if self.mode == WakeMode::Every {
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Wakes everyone regardless of mode (closing the bus).
    pub(crate) fn wake_everyone(&self) {
        fence(Ordering::SeqCst);
        self.wake_all();
    }
}
