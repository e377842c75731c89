//! Suite B of rondo's write-up: one micro-VM per process, embedding the metrics store
//! (16 series × 3 tiers) and recording every tick of a four-phase guest workload — CPU
//! burst, idle, I/O, mixed. `scripts/vm-scale.sh` launches N of these and samples their
//! memory. The guest is a real KVM guest (a few bytes of real-mode code driven by a
//! minimal VMM on kvm-ioctls) where `/dev/kvm` is usable, and the same workload run by
//! the process itself otherwise; the output says which mode ran.

mod guest;
#[cfg(target_arch = "x86_64")]
mod kvm;
#[cfg(not(target_arch = "x86_64"))]
mod kvm {
    //! No KVM guest on this architecture: the guest is x86 real-mode code.

    use std::time::Duration;

    use super::recorder::TickRecorder;
    use crate::error::KernelError;

    /// Never: there is no guest for this architecture.
    pub fn usable() -> bool {
        false
    }

    /// Refuses: there is no guest for this architecture.
    pub fn run_guest(
        _memory_bytes: usize,
        _duration: Duration,
        _tick: Duration,
        _recorder: &mut TickRecorder,
    ) -> Result<u64, KernelError> {
        Err(KernelError::Io {
            context: "the KVM guest is x86 code".to_string(),
            source: std::io::Error::from(std::io::ErrorKind::Unsupported),
        })
    }
}
mod procfs;
mod recorder;
mod scale;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::variants::SecondsTier;
pub use guest::{Phase, phase_at};
pub use recorder::{SERIES, TickCounters, TickRecorder, tiers_for};
pub use scale::{ScaleArgs, VmmLauncher, run_scale};

/// How the guest runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VmMode {
    /// KVM when `/dev/kvm` is usable, the plain process otherwise.
    Auto,
    /// A real KVM guest; fail if KVM is not usable.
    Kvm,
    /// The workload runs in this process (no virtualization).
    Process,
}

/// Options of one VMM instance.
#[derive(Debug, Args)]
pub struct VmmArgs {
    /// Where the guest runs.
    #[arg(long, value_enum, default_value = "auto")]
    mode: VmMode,
    /// Seconds of guest workload (four equal phases).
    #[arg(long, default_value_t = 15.0)]
    duration: f64,
    /// Milliseconds between two recorded ticks.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
    /// Guest memory in MiB (KVM mode; only the pages the guest touches are resident).
    #[arg(long, default_value_t = 128)]
    guest_mem_mib: usize,
    /// The metrics store file.
    #[arg(long)]
    store: PathBuf,
    /// How far back the store's one-second tier reaches.
    #[arg(long, value_enum, default_value = "hour")]
    seconds_tier: SecondsTier,
}

/// The line a VMM prints on stdout when it ends (and vm-scale reads back).
#[derive(Debug, Serialize, Deserialize)]
struct VmmReport {
    mode: String,
    ok: bool,
    /// The VMM's own peak resident memory (`VmHWM`), in bytes.
    peak_rss_bytes: u64,
    ticks: u64,
    series: usize,
    tiers: usize,
    store_bytes: usize,
    guest_exits: u64,
    wall_s: f64,
    error: Option<String>,
}

/// Runs one VMM to the end of its workload and prints its report line.
pub fn run_vmm(args: &VmmArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.duration > 0.0, "--duration must be positive");
    anyhow::ensure!(args.tick_ms > 0, "--tick-ms must be positive");
    let duration = Duration::from_secs_f64(args.duration);
    let tick = Duration::from_millis(args.tick_ms);
    let mut recorder = TickRecorder::create_with(&args.store, args.seconds_tier)
        .with_context(|| format!("creating the store {}", args.store.display()))?;
    let mode = resolve(args.mode);
    let started = std::time::Instant::now();
    let outcome = match mode {
        VmMode::Kvm => kvm::run_guest(args.guest_mem_mib << 20, duration, tick, &mut recorder),
        _ => guest::run_in_process(duration, tick, &mut recorder),
    };
    recorder.finish()?;
    let report = VmmReport {
        mode: mode_name(mode).to_string(),
        ok: outcome.is_ok(),
        peak_rss_bytes: procfs::own_peak_resident_bytes(),
        ticks: recorder.ticks(),
        series: SERIES.len(),
        tiers: recorder.tiers(),
        store_bytes: recorder.store_bytes(),
        guest_exits: outcome.as_ref().copied().unwrap_or(0),
        wall_s: started.elapsed().as_secs_f64(),
        error: outcome.as_ref().err().map(ToString::to_string),
    };
    println!("{}", serde_json::to_string(&report)?);
    outcome?;
    Ok(())
}

/// The mode `requested` comes to on this machine: `auto` is KVM where it is usable.
fn resolve(requested: VmMode) -> VmMode {
    match requested {
        VmMode::Auto if kvm::usable() => VmMode::Kvm,
        VmMode::Auto => {
            eprintln!("vm-scale: /dev/kvm is not usable here; running the plain-process fallback");
            VmMode::Process
        }
        explicit => explicit,
    }
}

/// How a mode is named in reports and in the `mode` parameter.
fn mode_name(mode: VmMode) -> &'static str {
    match mode {
        VmMode::Kvm => "kvm",
        VmMode::Process => "process",
        VmMode::Auto => "auto",
    }
}
