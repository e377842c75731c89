//! The guest workload: four equal phases (CPU burst, idle, I/O, mixed), and the
//! plain-process fallback that runs them without virtualization.

use std::hint::black_box;
use std::io::Write as _;
use std::time::{Duration, Instant};

use super::recorder::{TickCounters, TickRecorder};
use crate::error::{IoContext, KernelError};

/// A phase of the guest workload; its number is what the guest reads from the VMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Burn CPU between exits.
    CpuBurst = 0,
    /// Halt until the next tick.
    Idle = 1,
    /// Port I/O, one exit per access.
    Io = 2,
    /// Some CPU, then one I/O.
    Mixed = 3,
    /// The workload is over.
    Stop = 4,
}

/// The phase at `elapsed` into a workload of `duration`.
pub fn phase_at(elapsed: Duration, duration: Duration) -> Phase {
    if elapsed >= duration {
        return Phase::Stop;
    }
    match (4 * elapsed.as_nanos() / duration.as_nanos().max(1)) as u32 {
        0 => Phase::CpuBurst,
        1 => Phase::Idle,
        2 => Phase::Io,
        _ => Phase::Mixed,
    }
}

fn spin(iterations: u32) -> u64 {
    (0..iterations).fold(0u64, |acc, i| {
        black_box(acc.wrapping_mul(31).wrapping_add(u64::from(i)))
    })
}

/// Runs the workload in this process: the same phases and the same per-tick recording
/// as the KVM guest, with a spin loop for CPU and small file writes for I/O. Returns the
/// number of workload steps (the analogue of guest exits).
pub fn run_in_process(
    duration: Duration,
    tick: Duration,
    recorder: &mut TickRecorder,
) -> Result<u64, KernelError> {
    let scratch = tempfile::tempfile().io_context("creating the fallback I/O file")?;
    let mut io = std::io::BufWriter::with_capacity(64, scratch);
    let started = Instant::now();
    let mut next_tick = started;
    let mut counters = TickCounters::default();
    loop {
        let now = Instant::now();
        if now >= next_tick {
            recorder.record_tick(&counters)?;
            next_tick += tick;
        }
        let phase = phase_at(now - started, duration);
        counters.phase = phase as u64;
        counters.exits_total += 1;
        let step = Instant::now();
        match phase {
            Phase::Stop => break,
            Phase::CpuBurst => {
                black_box(spin(65_535));
                counters.cpu_bursts += 1;
            }
            Phase::Idle => {
                counters.exits_hlt += 1;
                let idle = next_tick.saturating_duration_since(Instant::now());
                std::thread::sleep(idle);
                counters.idle_ns += idle.as_nanos() as u64;
            }
            Phase::Io => {
                for _ in 0..64 {
                    io.write_all(&[0u8; 64]).io_context("fallback I/O")?;
                    counters.io_ops += 1;
                    counters.exits_io_out += 1;
                }
            }
            Phase::Mixed => {
                black_box(spin(16_384));
                io.write_all(&[0u8; 64]).io_context("fallback I/O")?;
                counters.io_ops += 1;
                counters.exits_io_out += 1;
            }
        }
        counters.run_ns += step.elapsed().as_nanos() as u64;
    }
    recorder.record_tick(&counters)?;
    Ok(counters.exits_total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_equal_phases_then_stop() {
        let d = Duration::from_secs(8);
        let at = |s: f64| phase_at(Duration::from_secs_f64(s), d);
        assert_eq!(at(0.0), Phase::CpuBurst);
        assert_eq!(at(1.99), Phase::CpuBurst);
        assert_eq!(at(2.0), Phase::Idle);
        assert_eq!(at(4.5), Phase::Io);
        assert_eq!(at(7.9), Phase::Mixed);
        assert_eq!(at(8.0), Phase::Stop);
    }

    #[test]
    fn the_fallback_records_every_tick_of_every_phase() {
        let dir = tempfile::tempdir().unwrap();
        let mut recorder = TickRecorder::create(&dir.path().join("vm.store")).unwrap();
        let steps = run_in_process(
            Duration::from_millis(200),
            Duration::from_millis(20),
            &mut recorder,
        )
        .unwrap();
        assert!(steps > 4);
        // Ten ticks in 200 ms plus the final one, give or take scheduling.
        assert!((9..=13).contains(&recorder.ticks()), "{}", recorder.ticks());
    }
}
