//! The structure-of-arrays broadcast ring: stamps, slot states and payloads live in three
//! parallel arrays, and the hot paths use as few locked instructions as we could manage.
//!
//! A slot's state is one word: the bitmask of subscribers that have not read the message
//! (low 32 bits), the number of readers cloning it (bits 32..48), and two flags, `WRITING`
//! and `TAKING`, each held exclusively.
//!
//! - publish: reserve a position (`fetch_add`), claim the slot (a compare-exchange that
//!   needs no reader inside and no flag), store payload and stamp, then release the slot by
//!   storing the new mask;
//! - receive, when our bit is the only one left: claim `TAKING` with one compare-exchange,
//!   take the payload out of the slot (no clone), store an empty state;
//! - receive otherwise: enter as a reader (compare-exchange on the count), clone the
//!   payload once, then leave and clear our bit in one `fetch_sub`.
//!
//! So a payload is cloned once per reader except the last, and with a single subscriber
//! never. Safety argument: the payload is written only under `WRITING`, moved out only
//! under `TAKING`, and cloned only by counted readers; each of the three excludes the
//! others, and counts only change while no flag is set. A reader re-checks the stamp after
//! claiming, so a slot reused by a later lap is never mistaken for the one it wanted.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::wake::Notifier;
use super::{BroadcastBus, BusReceiver, TryRecvError, ring_size};
use crate::variants::WakeMode;

/// Subscribers a SoA bus serves: one bit each in the low half of a slot's state.
pub const MAX_SUBSCRIBERS: u32 = 32;
const MASK: u64 = (1 << MAX_SUBSCRIBERS) - 1;
const READER: u64 = 1 << 32;
const READERS: u64 = 0xFFFF << 32;
const TAKING: u64 = 1 << 61;
const WRITING: u64 = 1 << 62;

struct Shared<T> {
    mask: u64,
    /// Position + 1 of the message in each slot; 0 for never written.
    stamps: Box<[AtomicU64]>,
    /// Per slot: pending subscribers, readers inside, `WRITING`, `TAKING`.
    states: Box<[AtomicU64]>,
    payloads: Box<[UnsafeCell<Option<T>>]>,
    tail: AtomicU64,
    subscribers: AtomicU64,
    closed: AtomicBool,
    notifier: Notifier,
}

// SAFETY: payloads are only reached under the slot states described in the module docs;
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
    /// to [`MAX_SUBSCRIBERS`] subscribers.
    pub fn new(capacity: usize, wake: WakeMode) -> Self {
        let size = ring_size(capacity);
        Self {
            shared: Arc::new(Shared {
                mask: size as u64 - 1,
                stamps: (0..size).map(|_| AtomicU64::new(0)).collect(),
                states: (0..size).map(|_| AtomicU64::new(0)).collect(),
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
        let state = &self.states[index];
        let mut spins = 0u32;
        let before = loop {
            let current = state.load(Ordering::Relaxed);
            if current & (READERS | TAKING | WRITING) == 0
                && state
                    .compare_exchange_weak(current, WRITING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                break current;
            }
            // A reader inside the slot may have been preempted: on an oversubscribed machine
            // spinning on would only delay it, so give up the core after a short spin.
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        };
        if self.stamps[index].load(Ordering::Relaxed) <= position {
            // SAFETY: `WRITING` excludes every reader and taker.
            unsafe { *self.payloads[index].get() = Some(value) };
            self.stamps[index].store(position + 1, Ordering::Release);
            state.store(subscribers, Ordering::Release);
        } else {
            state.store(before, Ordering::Release);
        }
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
                current != MASK,
                "a SoA bus serves at most {MAX_SUBSCRIBERS} subscribers"
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
    /// Lost a race for the slot's state: look again.
    Retry,
}

impl<T: Clone> SoaReceiver<T> {
    #[inline]
    fn read_slot(&self) -> SlotRead<T> {
        let shared = &self.shared;
        let index = (self.next & shared.mask) as usize;
        let state = &shared.states[index];
        let current = state.load(Ordering::Acquire);
        if current & WRITING != 0 {
            return SlotRead::NotYet;
        }
        let stamp = shared.stamps[index].load(Ordering::Acquire);
        if stamp < self.next + 1 {
            return SlotRead::NotYet;
        }
        if stamp > self.next + 1 {
            return SlotRead::Lapped;
        }
        if current & self.bit == 0 {
            // `current` may predate the stamp we just read (the slot was being rewritten
            // for this very position). Having seen the new stamp, a second look at the state
            // sees at least the publisher's claim, so an unchanged state means the message
            // really was published before we subscribed.
            if state.load(Ordering::Acquire) != current {
                return SlotRead::Retry;
            }
            return SlotRead::NotAddressed;
        }
        if current & TAKING != 0 {
            return SlotRead::Retry;
        }
        if current & MASK == self.bit && current & READERS == 0 {
            if state
                .compare_exchange(current, TAKING, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                return SlotRead::Retry;
            }
            if shared.stamps[index].load(Ordering::Acquire) != self.next + 1 {
                // A later lap reused the slot between our look and our claim.
                state.store(current, Ordering::Release);
                return SlotRead::Lapped;
            }
            // SAFETY: `TAKING` excludes the publisher and every other reader.
            let value = unsafe { (*shared.payloads[index].get()).take() };
            state.store(0, Ordering::Release);
            return SlotRead::Message(value.expect("a pending slot holds a value"));
        }
        if state
            .compare_exchange(
                current,
                current + READER,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return SlotRead::Retry;
        }
        if shared.stamps[index].load(Ordering::Acquire) != self.next + 1 {
            state.fetch_sub(READER, Ordering::Release);
            return SlotRead::Lapped;
        }
        // SAFETY: counted as a reader with our bit set: no writer or taker can enter
        // until we leave, and others only clone.
        let value = unsafe { (*shared.payloads[index].get()).clone() };
        state.fetch_sub(READER | self.bit, Ordering::Release);
        SlotRead::Message(value.expect("a pending slot holds a value"))
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
                SlotRead::Retry => std::hint::spin_loop(),
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

    fn wait_for_message(&self) {
        self.shared.notifier.sleep_unless(|| self.has_message());
    }
}

impl<T> Drop for SoaReceiver<T> {
    fn drop(&mut self) {
        self.shared
            .subscribers
            .fetch_and(!self.bit, Ordering::AcqRel);
    }
}
