//! The classic bounded broadcast ring: the tail (position, subscriber count) behind a
//! mutex, every slot behind its own reader-writer lock, and a clone of the payload for
//! every reader. The payload stays in its slot until a later lap overwrites it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::wake::Notifier;
use super::{BroadcastBus, BusReceiver, TryRecvError, ring_size};
use crate::variants::WakeMode;

struct Slot<T> {
    /// Position + 1 of the message held; 0 for a slot never written.
    stamp: u64,
    /// Readers that still have to read this message.
    remaining: AtomicUsize,
    value: Option<T>,
}

struct Tail {
    next: u64,
    receivers: usize,
}

struct Shared<T> {
    slots: Box<[RwLock<Slot<T>>]>,
    mask: u64,
    tail: Mutex<Tail>,
    /// Outside the tail lock: a sleeping receiver checks it while holding the notifier's
    /// lock, and a publisher may notify while holding the tail.
    closed: AtomicBool,
    notifier: Notifier,
}

/// The classic backend's publishing handle.
pub struct ClassicBus<T> {
    shared: Arc<Shared<T>>,
}

/// A subscriber of a [`ClassicBus`].
pub struct ClassicReceiver<T> {
    shared: Arc<Shared<T>>,
    next: u64,
}

impl<T> ClassicBus<T> {
    /// A bus holding the last `capacity` messages (rounded up to a power of two).
    pub fn new(capacity: usize, wake: WakeMode) -> Self {
        let size = ring_size(capacity);
        let slots = (0..size)
            .map(|_| {
                RwLock::new(Slot {
                    stamp: 0,
                    remaining: AtomicUsize::new(0),
                    value: None,
                })
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                slots,
                mask: size as u64 - 1,
                tail: Mutex::new(Tail {
                    next: 0,
                    receivers: 0,
                }),
                closed: AtomicBool::new(false),
                notifier: Notifier::new(wake),
            }),
        }
    }
}

impl<T> Shared<T> {
    fn shut_down(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notifier.wake_everyone();
    }

    fn lock_tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, tail: &mut Tail, value: T) {
        let position = tail.next;
        tail.next += 1;
        let mut slot = self.slots[(position & self.mask) as usize]
            .write()
            .unwrap_or_else(|e| e.into_inner());
        slot.stamp = position + 1;
        slot.remaining.store(tail.receivers, Ordering::Relaxed);
        slot.value = Some(value);
    }
}

impl<T: Clone + Send + Sync> BroadcastBus<T> for ClassicBus<T> {
    type Receiver = ClassicReceiver<T>;

    fn subscribe(&self) -> ClassicReceiver<T> {
        let mut tail = self.shared.lock_tail();
        tail.receivers += 1;
        ClassicReceiver {
            shared: Arc::clone(&self.shared),
            next: tail.next,
        }
    }

    fn publish(&self, value: T) -> usize {
        let mut tail = self.shared.lock_tail();
        if tail.receivers == 0 {
            return 0;
        }
        self.shared.write(&mut tail, value);
        let receivers = tail.receivers;
        drop(tail);
        self.shared.notifier.published(true);
        receivers
    }

    fn publish_batch<I>(&self, values: I) -> usize
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let mut tail = self.shared.lock_tail();
        if tail.receivers == 0 {
            return 0;
        }
        let every = self.shared.notifier.mode() == WakeMode::Every;
        for value in values {
            self.shared.write(&mut tail, value);
            if every {
                self.shared.notifier.published(false);
            }
        }
        let receivers = tail.receivers;
        drop(tail);
        self.shared.notifier.published(true);
        receivers
    }

    fn close(&self) {
        self.shared.shut_down();
    }
}

impl<T> Drop for ClassicBus<T> {
    fn drop(&mut self) {
        self.shared.shut_down();
    }
}

impl<T: Clone> ClassicReceiver<T> {
    fn has_message(&self) -> bool {
        let slot = self.shared.slots[(self.next & self.shared.mask) as usize]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        slot.stamp > self.next || self.shared.closed.load(Ordering::SeqCst)
    }
}

impl<T: Clone> BusReceiver<T> for ClassicReceiver<T> {
    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let slot = self.shared.slots[(self.next & self.shared.mask) as usize]
            .read()
            .unwrap_or_else(|e| e.into_inner());
        if slot.stamp == self.next + 1 {
            let value = slot.value.clone().expect("a stamped slot holds a value");
            slot.remaining.fetch_sub(1, Ordering::AcqRel);
            self.next += 1;
            return Ok(value);
        }
        let lapped = slot.stamp > self.next + 1;
        drop(slot);
        let tail = self.shared.lock_tail();
        if lapped {
            let oldest = tail.next.saturating_sub(self.shared.mask + 1);
            let missed = oldest - self.next;
            self.next = oldest;
            return Err(TryRecvError::Lagged(missed));
        }
        if self.shared.closed.load(Ordering::SeqCst) && tail.next == self.next {
            return Err(TryRecvError::Closed);
        }
        Err(TryRecvError::Empty)
    }

    fn wait_for_message(&self) {
        self.shared.notifier.sleep_unless(|| self.has_message());
    }
}

impl<T> Drop for ClassicReceiver<T> {
    fn drop(&mut self) {
        self.shared.lock_tail().receivers -= 1;
    }
}
