//! bench-kernels: kymo's embedded benchmark workload.
//!
//! It owns native reproductions of five published benchmark suites — an mmap'd metrics
//! ring store (`ring`, with the `capture` simulation and the `vm_scale` micro-VMs), a
//! produce benchmark against a loopback log broker (`produce`), a fair multi-tenant
//! scheduler (`fair_queue`), a segment-log read path (`log_read`) and an in-process
//! broadcast bus (`bus`) — and the runner that prints their results as kymo JSON. Slow
//! variants of the kernels are chosen by a TOML file or flags (`variants`) so that a commit
//! can make a kernel really slower. It must not know about kymo's server, worker or
//! storage: its only contract with them is the kymo JSON document and [`run_cli`].

#![warn(missing_docs)]

pub mod bus;
pub mod capture;
mod cli;
pub mod error;
pub mod fair_queue;
pub mod instructions;
pub mod log_read;
pub mod measure;
pub mod produce;
pub mod report;
pub mod ring;
pub mod runner;
pub mod variants;
pub mod vm_scale;

pub use cli::{run_cli, run_cli_under};
pub use error::KernelError;
