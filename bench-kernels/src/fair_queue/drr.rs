//! The fair scheduler: tenants spread over shards; in each shard one deficit-round-robin
//! ring per priority class. A tenant at the head of a ring receives `quantum` units of
//! credit per turn and is served while its next task's cost fits its credit, then goes to
//! the back; an emptied tenant leaves the ring and forfeits its credit (so idle tenants do
//! not bank service). Per-shard class counters outside the locks let a worker find the
//! highest class waiting anywhere without taking every lock.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::{Limits, Priority, Rejection, Task, TaskQueue, TenantId, is_expired};

/// The same hash keys in every process: with std's random keys the maps' probing (and so the
/// instructions a scheduling decision takes) differed from run to run, and an instruction count
/// must not.
type FixedHasher = BuildHasherDefault<DefaultHasher>;

#[derive(Debug, Default)]
struct TenantQueue {
    tasks: VecDeque<Task>,
    deficit: u32,
    in_turn: bool,
}

#[derive(Debug, Default)]
struct DrrRing {
    active: VecDeque<TenantId>,
    tenants: HashMap<TenantId, TenantQueue, FixedHasher>,
}

impl DrrRing {
    fn push(&mut self, task: Task) {
        let queue = self.tenants.entry(task.tenant).or_default();
        if queue.tasks.is_empty() {
            self.active.push_back(task.tenant);
        }
        queue.tasks.push_back(task);
    }

    /// The next task in deficit-round-robin order.
    fn pop(&mut self, quantum: u32) -> Option<Task> {
        while let Some(&tenant) = self.active.front() {
            let queue = self
                .tenants
                .get_mut(&tenant)
                .expect("an active tenant has a queue");
            if !queue.in_turn {
                queue.deficit += quantum;
                queue.in_turn = true;
            }
            let cost = queue
                .tasks
                .front()
                .expect("an active tenant has tasks")
                .cost;
            if cost <= queue.deficit {
                queue.deficit -= cost;
                let task = queue.tasks.pop_front();
                if queue.tasks.is_empty() {
                    queue.deficit = 0;
                    queue.in_turn = false;
                    self.active.pop_front();
                }
                return task;
            }
            queue.in_turn = false;
            self.active.rotate_left(1);
        }
        None
    }
}

#[derive(Debug, Default)]
struct Shard {
    classes: [DrrRing; 3],
    per_tenant: HashMap<TenantId, usize, FixedHasher>,
}

struct ShardSlot {
    shard: Mutex<Shard>,
    /// Tasks waiting per class, readable without the lock.
    waiting: [AtomicUsize; 3],
}

/// The sharded deficit-round-robin scheduler.
pub struct FairScheduler {
    shards: Box<[ShardSlot]>,
    quantum: u32,
    limits: Limits,
    global: AtomicUsize,
    expired: AtomicU64,
    cursor: AtomicUsize,
}

impl FairScheduler {
    /// A scheduler with `shards` shards (at least one), crediting `quantum` per turn.
    pub fn new(shards: usize, quantum: u32, limits: Limits) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| ShardSlot {
                    shard: Mutex::new(Shard::default()),
                    waiting: Default::default(),
                })
                .collect(),
            quantum: quantum.max(1),
            limits,
            global: AtomicUsize::new(0),
            expired: AtomicU64::new(0),
            cursor: AtomicUsize::new(0),
        }
    }

    fn shard_of(&self, tenant: TenantId) -> usize {
        // Fibonacci hashing spreads consecutive tenant ids over the shards.
        (u64::from(tenant).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % self.shards.len()
    }

    fn lock(&self, index: usize) -> MutexGuard<'_, Shard> {
        self.shards[index]
            .shard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the next live task of `class` from shard `index`, dropping expired ones.
    fn pop_from(&self, index: usize, class: usize, now_us: u64) -> Option<Task> {
        let slot = &self.shards[index];
        let mut shard = self.lock(index);
        while let Some(task) = shard.classes[class].pop(self.quantum) {
            slot.waiting[class].fetch_sub(1, Ordering::Relaxed);
            self.global.fetch_sub(1, Ordering::Relaxed);
            let count = shard
                .per_tenant
                .get_mut(&task.tenant)
                .expect("a queued task's tenant is counted");
            *count -= 1;
            if *count == 0 {
                shard.per_tenant.remove(&task.tenant);
            }
            if is_expired(&task, now_us) {
                self.expired.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            return Some(task);
        }
        None
    }
}

impl TaskQueue for FairScheduler {
    fn enqueue(&self, task: Task) -> Result<(), Rejection> {
        if self.global.fetch_add(1, Ordering::AcqRel) >= self.limits.max_global {
            self.global.fetch_sub(1, Ordering::AcqRel);
            return Err(Rejection::GlobalFull);
        }
        let index = self.shard_of(task.tenant);
        let mut shard = self.lock(index);
        let count = shard.per_tenant.entry(task.tenant).or_insert(0);
        if *count >= self.limits.max_per_tenant {
            if *count == 0 {
                shard.per_tenant.remove(&task.tenant);
            }
            drop(shard);
            self.global.fetch_sub(1, Ordering::AcqRel);
            return Err(Rejection::TenantFull);
        }
        *count += 1;
        let class = task.priority as usize;
        shard.classes[class].push(task);
        self.shards[index].waiting[class].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn dequeue(&self, _worker: usize, now_us: u64) -> Option<Task> {
        // Round robin over the shards that have work: the search resumes after the shard
        // served last, so every busy shard gets its turn whatever the gaps between them.
        let start = self.cursor.load(Ordering::Relaxed);
        for class in Priority::ALL.map(|p| p as usize) {
            for k in 0..self.shards.len() {
                let index = (start + k) % self.shards.len();
                if self.shards[index].waiting[class].load(Ordering::Relaxed) == 0 {
                    continue;
                }
                if let Some(task) = self.pop_from(index, class, now_us) {
                    self.cursor.store(index + 1, Ordering::Relaxed);
                    return Some(task);
                }
            }
        }
        None
    }

    fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    fn len(&self) -> usize {
        self.global.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: Limits = Limits {
        max_global: 10_000,
        max_per_tenant: 10_000,
    };

    fn task(id: u64, tenant: TenantId, priority: Priority, cost: u32) -> Task {
        Task {
            id,
            tenant,
            priority,
            cost,
            enqueued_at_us: 0,
            deadline_us: None,
        }
    }

    fn drain(s: &FairScheduler) -> Vec<Task> {
        std::iter::from_fn(|| s.dequeue(0, 0)).collect()
    }

    #[test]
    fn a_hot_tenant_cannot_starve_a_cold_one() {
        let s = FairScheduler::new(1, 2, ROOMY);
        for i in 0..100 {
            s.enqueue(task(i, 1, Priority::Normal, 1)).unwrap();
        }
        s.enqueue(task(1000, 2, Priority::Normal, 1)).unwrap();
        let order: Vec<TenantId> = drain(&s).iter().map(|t| t.tenant).collect();
        // Quantum 2: the hot tenant gets two, then the cold tenant is served.
        assert_eq!(&order[..3], &[1, 1, 2]);
        assert_eq!(order.len(), 101);
    }

    #[test]
    fn service_is_shared_in_proportion_to_quantum_not_to_arrivals() {
        let s = FairScheduler::new(4, 3, ROOMY);
        for i in 0..300 {
            s.enqueue(task(i, 1, Priority::Normal, 1)).unwrap();
            if i % 3 == 0 {
                s.enqueue(task(10_000 + i, 2, Priority::Normal, 1)).unwrap();
            }
        }
        let first: Vec<TenantId> = (0..120).map(|_| s.dequeue(0, 0).unwrap().tenant).collect();
        let cold = first.iter().filter(|&&t| t == 2).count();
        // Both backlogged: each gets half of the first 120 services.
        assert_eq!(cold, 60);
    }

    #[test]
    fn costs_are_charged_against_the_deficit() {
        let s = FairScheduler::new(1, 2, ROOMY);
        for i in 0..4 {
            s.enqueue(task(i, 1, Priority::Normal, 2)).unwrap();
            s.enqueue(task(100 + i, 2, Priority::Normal, 1)).unwrap();
        }
        let order: Vec<TenantId> = drain(&s).iter().map(|t| t.tenant).collect();
        assert_eq!(order, vec![1, 2, 2, 1, 2, 2, 1, 1]);
    }

    #[test]
    fn higher_classes_go_first_across_shards() {
        let s = FairScheduler::new(4, 2, ROOMY);
        s.enqueue(task(1, 1, Priority::Low, 1)).unwrap();
        s.enqueue(task(2, 2, Priority::Normal, 1)).unwrap();
        s.enqueue(task(3, 3, Priority::High, 1)).unwrap();
        let ids: Vec<u64> = drain(&s).iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![3, 2, 1]);
    }

    #[test]
    fn backpressure_rejects_per_tenant_then_globally() {
        let s = FairScheduler::new(
            2,
            2,
            Limits {
                max_global: 5,
                max_per_tenant: 3,
            },
        );
        for i in 0..3 {
            s.enqueue(task(i, 1, Priority::Normal, 1)).unwrap();
        }
        assert_eq!(
            s.enqueue(task(3, 1, Priority::Normal, 1)),
            Err(Rejection::TenantFull)
        );
        s.enqueue(task(4, 2, Priority::Normal, 1)).unwrap();
        s.enqueue(task(5, 3, Priority::Normal, 1)).unwrap();
        assert_eq!(
            s.enqueue(task(6, 4, Priority::Normal, 1)),
            Err(Rejection::GlobalFull)
        );
        assert_eq!(s.len(), 5);
        // Room again once tasks leave.
        s.dequeue(0, 0).unwrap();
        s.enqueue(task(7, 4, Priority::Normal, 1)).unwrap();
    }

    #[test]
    fn expired_tasks_are_dropped_counted_and_free_their_room() {
        let s = FairScheduler::new(
            1,
            2,
            Limits {
                max_global: 2,
                max_per_tenant: 2,
            },
        );
        let mut late = task(1, 1, Priority::Normal, 1);
        late.deadline_us = Some(10);
        s.enqueue(late).unwrap();
        s.enqueue(task(2, 1, Priority::Normal, 1)).unwrap();
        assert_eq!(s.dequeue(0, 11).unwrap().id, 2);
        assert_eq!(s.expired(), 1);
        assert!(s.is_empty());
        s.enqueue(task(3, 1, Priority::Normal, 1)).unwrap();
        s.enqueue(task(4, 1, Priority::Normal, 1)).unwrap();
    }
}
