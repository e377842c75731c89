//! The structure-of-arrays broadcast ring: stamps, pending-reader bitmasks, slot guards and
//! payloads live in four parallel arrays, and the hot paths use a handful of atomics:
//!
//! - publish: reserve a position (`fetch_add`), take the slot's writer guard, store the
//!   payload, the pending mask (the subscribers present) and the stamp;
//! - receive: hold the slot's reader guard, and either clone the payload and clear our bit
//!   (`fetch_and`), or — when our bit is the only one left — take the payload out of the
//!   slot without cloning. So a payload is cloned once per reader except the last, and
//!   with a single subscriber never.
//!
//! Safety argument: a reader touches a payload only while its bit is set in the slot's
//! pending mask and it holds a reader guard; the writer guard excludes readers, so a
//! publisher never overwrites a payload being read. A reader clears its bit only after
//! its clone, so the reader that finds its bit alone (and takes) cannot race a clone.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::wake::Notifier;
use super::{BroadcastBus, BusReceiver, RecvError, TryRecvError, ring_size};
use crate::variants::WakeMode;

const WRITER: u32 = 1 << 31;

struct Shared<T> {
    mask: u64,
    /// Position + 1 of the message in each slot; 0 for never written.
    stamps: Box<[AtomicU64]>,
    /// Per slot, the subscribers that have not read it yet.
    pending: Box<[AtomicU64]>,
    /// Per slot, `WRITER` or the number of readers inside.
    guards: Box<[AtomicU32]>,
    payloads: Box<[UnsafeCell<Option<T>>]>,
    tail: AtomicU64,
    subscribers: AtomicU64,
    closed: AtomicBool,
    notifier: Notifier,
}

// SAFETY: payloads are only reached under the slot guards described in the module docs;
// readers on other threads clone (`T: Sync`) or take (`T: Send`) them.
unsafe impl<T: Send + Sync> Sync for Shared<T> {}
// SAFETY: as above; the shared state owns `T`s that may be dropped on any thread.
unsafe impl<T: Send + Sync> Send for Shared<T> {}

/// The SoA backend's publishing handle.
pub struct SoaBus<T> {
    shared: Arc<Shared<T>>,
}

/// A subscriber of a [`SoaBus`].
pub struct SoaReceiver<T> {
    shared: Arc<Shared<T>>,
    bit: u64,
    next: u64,
}

impl<T> SoaBus<T> {
    /// A bus holding the last `capacity` messages (rounded up to a power of two), for up
    /// to 64 subscribers.
    pub fn new(capacity: usize, wake: WakeMode) -> Self {
        let size = ring_size(capacity);
        Self {
            shared: Arc::new(Shared {
                mask: size as u64 - 1,
                stamps: (0..size).map(|_| AtomicU64::new(0)).collect(),
                pending: (0..size).map(|_| AtomicU64::new(0)).collect(),
                guards: (0..size).map(|_| AtomicU32::new(0)).collect(),
                payloads: (0..size).map(|_| UnsafeCell::new(None)).collect(),
                tail: AtomicU64::new(0),
                subscribers: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                notifier: Notifier::new(wake),
            }),
        }
    }
}

impl<T> Shared<T> {
    /// Writes `value` at `position`, unless a later lap already took the slot.
    #[inline]
    fn write(&self, position: u64, subscribers: u64, value: T) {
        let index = (position & self.mask) as usize;
        let guard = &self.guards[index];
        while guard
            .compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        if self.stamps[index].load(Ordering::Relaxed) <= position {
            // SAFETY: we hold the writer guard, which excludes every reader.
            unsafe { *self.payloads[index].get() = Some(value) };
            self.pending[index].store(subscribers, Ordering::Relaxed);
            self.stamps[index].store(position + 1, Ordering::Release);
        }
        // Not a plain store of 0: a reader may have incremented the guard while we held it
        // and will decrement it as it backs off.
        guard.fetch_sub(WRITER, Ordering::Release);
    }

    fn shut_down(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.notifier.wake_everyone();
    }
}

impl<T: Clone + Send + Sync> BroadcastBus<T> for SoaBus<T> {
    type Receiver = SoaReceiver<T>;

    fn subscribe(&self) -> SoaReceiver<T> {
        let shared = &self.shared;
        let mut current = shared.subscribers.load(Ordering::Acquire);
        loop {
            assert!(
                current != u64::MAX,
                "a SoA bus serves at most 64 subscribers"
            );
            let bit = 1u64 << (!current).trailing_zeros();
            match shared.subscribers.compare_exchange_weak(
                current,
                current | bit,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return SoaReceiver {
                        shared: Arc::clone(shared),
                        bit,
                        next: shared.tail.load(Ordering::Acquire),
                    };
                }
                Err(now) => current = now,
            }
        }
    }

    #[inline]
    fn publish(&self, value: T) -> usize {
        let shared = &self.shared;
        let subscribers = shared.subscribers.load(Ordering::Acquire);
        if subscribers == 0 {
            return 0;
        }
        let position = shared.tail.fetch_add(1, Ordering::AcqRel);
        shared.write(position, subscribers, value);
        shared.notifier.published(true);
        subscribers.count_ones() as usize
    }

    fn publish_batch<I>(&self, values: I) -> usize
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator,
    {
        let shared = &self.shared;
        let subscribers = shared.subscribers.load(Ordering::Acquire);
        if subscribers == 0 {
            return 0;
        }
        let values = values.into_iter();
        let first = shared.tail.fetch_add(values.len() as u64, Ordering::AcqRel);
        let every = shared.notifier.mode() == WakeMode::Every;
        for (offset, value) in values.enumerate() {
            shared.write(first + offset as u64, subscribers, value);
            if every {
                shared.notifier.published(false);
            }
        }
        shared.notifier.published(true);
        subscribers.count_ones() as usize
    }

    fn close(&self) {
        self.shared.shut_down();
    }
}

impl<T> Drop for SoaBus<T> {
    fn drop(&mut self) {
        self.shared.shut_down();
    }
}

enum SlotRead<T> {
    Message(T),
    NotYet,
    Lapped,
    /// Published before we subscribed (our bit was not in the mask): skip it.
    NotAddressed,
}

impl<T: Clone> SoaReceiver<T> {
    #[inline]
    fn read_slot(&self) -> SlotRead<T> {
        let shared = &self.shared;
        let index = (self.next & shared.mask) as usize;
        let guard = &shared.guards[index];
        if guard.fetch_add(1, Ordering::Acquire) & WRITER != 0 {
            guard.fetch_sub(1, Ordering::Release);
            return SlotRead::NotYet;
        }
        let stamp = shared.stamps[index].load(Ordering::Acquire);
        let outcome = if stamp == self.next + 1 {
            let pending = &shared.pending[index];
            let mine = pending.load(Ordering::Acquire);
            if mine & self.bit == 0 {
                SlotRead::NotAddressed
            } else if mine == self.bit {
                pending.store(0, Ordering::Relaxed);
                // SAFETY: we hold a reader guard and ours is the only bit left, so no
                // other reader will touch this payload (see the module docs).
                let value = unsafe { (*shared.payloads[index].get()).take() };
                SlotRead::Message(value.expect("a pending slot holds a value"))
            } else {
                // SAFETY: reader guard held and our bit set: the payload is live and only
                // read by others until the last bit is cleared.
                let value = unsafe { (*shared.payloads[index].get()).clone() };
                if pending.fetch_and(!self.bit, Ordering::AcqRel) == self.bit {
                    // Everyone else cleared their bit after our look: we are last after
                    // all, and release the slot's payload.
                    // SAFETY: as for the take above.
                    drop(unsafe { (*shared.payloads[index].get()).take() });
                }
                SlotRead::Message(value.expect("a pending slot holds a value"))
            }
        } else if stamp > self.next + 1 {
            SlotRead::Lapped
        } else {
            SlotRead::NotYet
        };
        guard.fetch_sub(1, Ordering::Release);
        outcome
    }

    fn has_message(&self) -> bool {
        let index = (self.next & self.shared.mask) as usize;
        self.shared.stamps[index].load(Ordering::Acquire) > self.next
            || self.shared.closed.load(Ordering::SeqCst)
    }
}

impl<T: Clone> BusReceiver<T> for SoaReceiver<T> {
    #[inline]
    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        loop {
            match self.read_slot() {
                SlotRead::Message(value) => {
                    self.next += 1;
                    return Ok(value);
                }
                SlotRead::NotAddressed => self.next += 1,
                SlotRead::Lapped => {
                    let tail = self.shared.tail.load(Ordering::Acquire);
                    let oldest = tail.saturating_sub(self.shared.mask + 1);
                    let missed = oldest.saturating_sub(self.next);
                    self.next = oldest.max(self.next);
                    return Err(TryRecvError::Lagged(missed));
                }
                SlotRead::NotYet => {
                    let closed = self.shared.closed.load(Ordering::SeqCst);
                    if closed && self.shared.tail.load(Ordering::Acquire) == self.next {
                        return Err(TryRecvError::Closed);
                    }
                    return Err(TryRecvError::Empty);
                }
            }
        }
    }

    fn recv(&mut self) -> Result<T, RecvError> {
        loop {
            match self.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Lagged(n)) => return Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => {
                    let shared = Arc::clone(&self.shared);
                    shared.notifier.sleep_unless(|| self.has_message());
                }
            }
        }
    }
}

impl<T> Drop for SoaReceiver<T> {
    fn drop(&mut self) {
        self.shared
            .subscribers
            .fetch_and(!self.bit, Ordering::AcqRel);
    }
}
