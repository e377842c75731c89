//! firq's multi-tenant scheduler: deficit round robin across tenants with a quantum,
//! strict priorities (high, normal, low), deadlines after which a task is dropped as
//! expired, backpressure that rejects at `max_global` and `max_per_tenant`, and shards
//! that each own a subset of the tenants. A plain FIFO queue is the baseline; the suite
//! runs the write-up's five scenarios on both.

mod drr;
mod fifo;
mod scenarios;
mod simulation;
mod suite;

pub use drr::FairScheduler;
pub use fifo::FifoQueue;
pub use scenarios::{Scenario, ScenarioName};
pub use simulation::{SimulationOutcome, simulate};
pub use suite::{FairQueueSuite, measured_throughput, simulate_once};

/// A tenant's identity.
pub type TenantId = u32;

/// A task's class; a higher class is always served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Served before everything else.
    High = 0,
    /// The default class.
    Normal = 1,
    /// Served when nothing else waits.
    Low = 2,
}

impl Priority {
    /// All classes, in service order.
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];
}

/// A unit of work submitted by a tenant. Times are in microseconds of a clock the caller
/// owns (a virtual one in the scenarios), so results do not depend on the machine's speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Unique within a scenario, in arrival order.
    pub id: u64,
    /// Who submitted it.
    pub tenant: TenantId,
    /// Its class.
    pub priority: Priority,
    /// Deficit units this task consumes (and, in the scenarios, milliseconds of service).
    pub cost: u32,
    /// When it arrived.
    pub enqueued_at_us: u64,
    /// After this instant the task is worthless and dropped as expired.
    pub deadline_us: Option<u64>,
}

/// Why a task was refused at the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The whole queue holds `max_global` tasks.
    GlobalFull,
    /// This tenant already holds `max_per_tenant` tasks.
    TenantFull,
}

/// Backpressure limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Tasks the whole queue holds at most.
    pub max_global: usize,
    /// Tasks one tenant holds at most.
    pub max_per_tenant: usize,
}

/// What both the fair scheduler and the FIFO baseline offer the workers.
pub trait TaskQueue: Sync {
    /// Accepts `task` or rejects it under backpressure.
    fn enqueue(&self, task: Task) -> Result<(), Rejection>;

    /// The next task for `worker` at `now_us`, dropping (and counting) expired tasks on
    /// the way.
    fn dequeue(&self, worker: usize, now_us: u64) -> Option<Task>;

    /// Tasks dropped because their deadline had passed.
    fn expired(&self) -> u64;

    /// Tasks waiting.
    fn len(&self) -> usize;

    /// Whether no task waits.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn is_expired(task: &Task, now_us: u64) -> bool {
    task.deadline_us.is_some_and(|deadline| now_us > deadline)
}
