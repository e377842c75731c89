//! The baseline: one first-in first-out queue for every tenant, bounded by `max_global`
//! only (a FIFO cannot tell tenants apart), priorities ignored.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Rejection, Task, TaskQueue, is_expired};

/// A bounded FIFO queue.
pub struct FifoQueue {
    queue: Mutex<VecDeque<Task>>,
    max_global: usize,
    expired: AtomicU64,
}

impl FifoQueue {
    /// A queue holding at most `max_global` tasks.
    pub fn new(max_global: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::with_capacity(max_global)),
            max_global,
            expired: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Task>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TaskQueue for FifoQueue {
    fn enqueue(&self, task: Task) -> Result<(), Rejection> {
        let mut queue = self.lock();
        if queue.len() >= self.max_global {
            return Err(Rejection::GlobalFull);
        }
        queue.push_back(task);
        Ok(())
    }

    fn dequeue(&self, _worker: usize, now_us: u64) -> Option<Task> {
        let mut queue = self.lock();
        while let Some(task) = queue.pop_front() {
            if is_expired(&task, now_us) {
                self.expired.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return Some(task);
        }
        None
    }

    fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fair_queue::Priority;

    fn task(id: u64, tenant: u32, deadline_us: Option<u64>) -> Task {
        Task {
            id,
            tenant,
            priority: Priority::Low,
            cost: 1,
            enqueued_at_us: 0,
            deadline_us,
        }
    }

    #[test]
    fn first_in_first_out_and_bounded() {
        let q = FifoQueue::new(2);
        q.enqueue(task(1, 0, None)).unwrap();
        q.enqueue(task(2, 1, None)).unwrap();
        assert_eq!(q.enqueue(task(3, 2, None)), Err(Rejection::GlobalFull));
        assert_eq!(q.dequeue(0, 0).unwrap().id, 1);
        assert_eq!(q.dequeue(0, 0).unwrap().id, 2);
        assert!(q.dequeue(0, 0).is_none());
    }

    #[test]
    fn expired_tasks_are_dropped_and_counted() {
        let q = FifoQueue::new(8);
        q.enqueue(task(1, 0, Some(10))).unwrap();
        q.enqueue(task(2, 0, Some(100))).unwrap();
        assert_eq!(q.dequeue(0, 50).unwrap().id, 2);
        assert_eq!(q.expired(), 1);
    }
}
