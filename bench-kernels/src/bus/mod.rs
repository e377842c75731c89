//! ron-kernel's in-process broadcast bus: every subscriber receives every message
//! published after it subscribed, in order, unless it falls a whole ring behind (then it
//! is told how many it lagged). Two backends share this interface: a classic bounded
//! ring ([`ClassicBus`]) and a structure-of-arrays ring ([`SoaBus`]); both take the wake
//! policy ([`WakeMode`]) at construction.

mod classic;
mod soa;
mod suite;
mod wake;

use std::sync::Arc;

pub use classic::ClassicBus;
pub use soa::{MAX_SUBSCRIBERS, SoaBus};
pub use suite::BusSuite;

pub use crate::variants::WakeMode;

/// Why `try_recv` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing new yet.
    Empty,
    /// The ring lapped this subscriber: it skipped this many messages and now continues
    /// from the oldest one still held.
    Lagged(u64),
    /// The bus was closed and everything was read.
    Closed,
}

/// Why a blocking `recv` returned no message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvError {
    /// As [`TryRecvError::Lagged`].
    Lagged(u64),
    /// As [`TryRecvError::Closed`].
    Closed,
}

/// A broadcast bus backend.
pub trait BroadcastBus<T>: Sync {
    /// A subscriber's handle.
    type Receiver: BusReceiver<T> + Send;

    /// A new subscriber that receives what is published from now on.
    fn subscribe(&self) -> Self::Receiver;

    /// Publishes one message; returns how many subscribers it is addressed to (0: dropped).
    fn publish(&self, value: T) -> usize;

    /// Publishes several messages with one reservation and, with edge wake-ups, one wake.
    fn publish_batch<I>(&self, values: I) -> usize
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: ExactSizeIterator;

    /// Closes the bus: receivers drain what is left, then get `Closed`.
    fn close(&self);
}

/// A subscriber.
pub trait BusReceiver<T> {
    /// The next message, without blocking.
    fn try_recv(&mut self) -> Result<T, TryRecvError>;

    /// Sleeps until a message may be waiting (a spurious wake-up is fine: `recv` retries).
    fn wait_for_message(&self);

    /// The next message, sleeping until one is published.
    fn recv(&mut self) -> Result<T, RecvError> {
        loop {
            match self.try_recv() {
                Ok(value) => return Ok(value),
                Err(TryRecvError::Lagged(n)) => return Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => self.wait_for_message(),
            }
        }
    }
}

/// What the benchmarks publish: a topic shared by reference count and a sequence number,
/// so that a clone costs what a real event's clone costs (an atomic increment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelEvent {
    /// The topic, shared by reference count.
    pub topic: Arc<str>,
    /// The publisher's sequence number.
    pub seq: u64,
}

/// The ring size actually used: the next power of two, so a position maps to a slot with
/// a mask.
pub(crate) fn ring_size(capacity: usize) -> usize {
    capacity.max(1).next_power_of_two()
}

#[cfg(test)]
mod contract_tests;
