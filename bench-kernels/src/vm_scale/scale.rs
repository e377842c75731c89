//! `vm-scale`: rondo's benchmark B. For each VM count it launches that many VMMs (this very
//! program's `vmm` subcommand, one process each) with a staggered start, samples their
//! resident memory while they run, and reports per count: VMs that succeeded, peak total
//! RSS, each VM's own peak RSS, its store's size (apparent and on disk), processes other
//! than the VMMs, and wall time — as kymo JSON (one benchmark per count) or as a table.

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;

use super::{VmMode, VmmReport, mode_name, procfs, resolve};
use crate::report::{BenchmarkResult, Direction, Metric, Report};
use crate::variants::{SecondsTier, Variants};

/// Most VMs one count may launch: past this a typo (`--vms 10000`) would exhaust the machine.
pub const MAX_VMS: usize = 1_000;
/// Longest workload one VM may be given, in seconds.
pub const MAX_DURATION_S: f64 = 3_600.0;

/// Options of `vm-scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// VM counts, one benchmark each: `--vms "4 8 16"` or `--vms 4 --vms 8`.
    #[arg(long, value_delimiter = ' ', num_args = 1.., default_values_t = [4, 8, 16])]
    vms: Vec<usize>,
    /// The write-up's counts: 10, 50 and 100 VMs.
    #[arg(long, conflicts_with = "vms")]
    full: bool,
    /// Seconds of guest workload per VM (four equal phases).
    #[arg(long, default_value_t = 15.0)]
    duration: f64,
    /// Milliseconds between two ticks a VM records.
    #[arg(long, default_value_t = 1000)]
    tick_ms: u64,
    /// Where the guests run; `auto` is KVM where `/dev/kvm` is usable.
    #[arg(long, value_enum, default_value = "auto")]
    mode: VmMode,
    /// Milliseconds between two launches (five times more after every tenth VM).
    #[arg(long, default_value_t = 100)]
    stagger_ms: u64,
    /// Milliseconds between two samples of the VMs' resident memory.
    #[arg(long, default_value_t = 1000)]
    sample_ms: u64,
    /// Guest memory of each VM in MiB (KVM mode).
    #[arg(long, default_value_t = 128)]
    guest_mem_mib: usize,
    /// A variants file; its `[vm_scale]` section sets the store's one-second tier.
    #[arg(long, value_name = "FILE", env = "KYMO_KERNELS_VARIANTS")]
    variants: Option<PathBuf>,
    /// The store's one-second tier (overrides the variants file).
    #[arg(long, value_enum)]
    seconds_tier: Option<SecondsTier>,
    /// Print kymo JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

impl ScaleArgs {
    fn counts(&self) -> anyhow::Result<Vec<usize>> {
        let counts = if self.full {
            vec![10, 50, 100]
        } else {
            self.vms.clone()
        };
        anyhow::ensure!(!counts.is_empty(), "--vms needs at least one count");
        if let Some(bad) = counts.iter().find(|n| !(1..=MAX_VMS).contains(n)) {
            anyhow::bail!("--vms {bad} is out of range: use 1 to {MAX_VMS} VMs");
        }
        Ok(counts)
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.duration > 0.0 && self.duration <= MAX_DURATION_S,
            "--duration {} is out of range: use more than 0 and at most {MAX_DURATION_S} seconds",
            self.duration
        );
        anyhow::ensure!(
            (1..=60_000).contains(&self.tick_ms),
            "--tick-ms must be 1 to 60000"
        );
        anyhow::ensure!(
            (1..=60_000).contains(&self.sample_ms),
            "--sample-ms must be 1 to 60000"
        );
        anyhow::ensure!(
            self.stagger_ms <= 60_000,
            "--stagger-ms must be at most 60000"
        );
        anyhow::ensure!(
            (1..=65_536).contains(&self.guest_mem_mib),
            "--guest-mem-mib must be 1 to 65536"
        );
        Ok(())
    }

    fn seconds_tier(&self) -> anyhow::Result<SecondsTier> {
        if let Some(tier) = self.seconds_tier {
            return Ok(tier);
        }
        Ok(match &self.variants {
            Some(path) => Variants::load(path)?.vm_scale.seconds_tier,
            None => SecondsTier::default(),
        })
    }
}

/// How to start this program's `vmm` subcommand: the running executable and the
/// subcommands that lead to this command line (`kymo kernels vm-scale` needs `kernels`).
#[derive(Debug, Clone)]
pub struct VmmLauncher {
    program: PathBuf,
    prefix: Vec<String>,
}

impl VmmLauncher {
    /// The running executable, reached through `prefix`.
    pub fn current(prefix: &[&str]) -> anyhow::Result<Self> {
        Ok(Self {
            program: std::env::current_exe().context("cannot find the running executable")?,
            prefix: prefix.iter().map(ToString::to_string).collect(),
        })
    }
}

/// What one VM count measured.
#[derive(Debug, Clone)]
struct ScaleOutcome {
    vms: usize,
    mode: VmMode,
    succeeded: usize,
    peak_total_rss: u64,
    rss_per_vm: Vec<f64>,
    store_per_vm: Vec<f64>,
    store_disk_per_vm: Vec<f64>,
    extra_processes: usize,
    wall: Duration,
    first_error: Option<String>,
}

/// Runs `vm-scale` and prints its report.
pub fn run_scale(args: &ScaleArgs, launcher: &VmmLauncher) -> anyhow::Result<()> {
    args.check()?;
    let counts = args.counts()?;
    let seconds_tier = args.seconds_tier()?;
    let mode = resolve(args.mode);
    let mut outcomes = Vec::new();
    for vms in counts {
        eprintln!("vm-scale: {vms} VMs ({})", mode_name(mode));
        let outcome = run_count(args, launcher, mode, seconds_tier, vms)?;
        if let Some(error) = &outcome.first_error {
            eprintln!(
                "vm-scale: {} of {vms} VMs failed; first error: {error}",
                vms - outcome.succeeded
            );
        }
        anyhow::ensure!(
            outcome.succeeded > 0,
            "vm-scale: none of the {vms} VMs succeeded: {}",
            outcome.first_error.as_deref().unwrap_or("no report")
        );
        outcomes.push(outcome);
    }
    let report = Report {
        benchmarks: outcomes
            .iter()
            .map(|o| to_benchmark(o, args, seconds_tier))
            .collect(),
    };
    if args.json {
        println!("{}", report.to_json()?);
    } else {
        print!("{}", to_table(&outcomes));
    }
    Ok(())
}

/// One VMM being run: its process and where its report and store go.
struct Vm {
    child: Child,
    report: PathBuf,
    errors: PathBuf,
    store: PathBuf,
    done: bool,
}

/// The peaks seen while sampling.
#[derive(Default)]
struct Peaks {
    total_rss: u64,
    extra_processes: usize,
    last: Option<Instant>,
}

impl Peaks {
    /// Samples now if `every` has passed since the last sample.
    fn sample_if_due(&mut self, vms: &mut [Vm], every: Duration) {
        if self.last.is_some_and(|last| last.elapsed() < every) {
            return;
        }
        self.last = Some(Instant::now());
        reap(vms);
        let alive: Vec<u32> = vms
            .iter()
            .filter(|v| !v.done)
            .map(|v| v.child.id())
            .collect();
        let total: u64 = alive.iter().map(|&pid| procfs::resident_bytes(pid)).sum();
        self.total_rss = self.total_rss.max(total);
        let vmms: HashSet<u32> = vms.iter().map(|v| v.child.id()).collect();
        let extra = procfs::descendants(std::process::id())
            .into_iter()
            .filter(|pid| !vmms.contains(pid))
            .count();
        self.extra_processes = self.extra_processes.max(extra);
    }
}

/// Reaps the VMs that have exited, so that a sample never reads a reused pid.
fn reap(vms: &mut [Vm]) {
    for vm in vms.iter_mut().filter(|v| !v.done) {
        vm.done = matches!(vm.child.try_wait(), Ok(Some(_)) | Err(_));
    }
}

fn run_count(
    args: &ScaleArgs,
    launcher: &VmmLauncher,
    mode: VmMode,
    seconds_tier: SecondsTier,
    count: usize,
) -> anyhow::Result<ScaleOutcome> {
    let work = tempfile::Builder::new()
        .prefix("kymo-vm-scale-")
        .tempdir()
        .context("creating a scratch directory")?;
    let every = Duration::from_millis(args.sample_ms);
    let started = Instant::now();
    let mut vms: Vec<Vm> = Vec::with_capacity(count);
    let mut peaks = Peaks::default();
    let launched = (|| -> anyhow::Result<()> {
        for i in 1..=count {
            vms.push(launch(args, launcher, mode, seconds_tier, work.path(), i)?);
            let mut pause = Duration::from_millis(args.stagger_ms);
            if i % 10 == 0 {
                pause *= 6;
            }
            wait_sampling(&mut vms, &mut peaks, every, pause);
        }
        Ok(())
    })();
    if let Err(e) = launched {
        for vm in &mut vms {
            let _ = vm.child.kill();
            let _ = vm.child.wait();
        }
        return Err(e);
    }
    while vms.iter().any(|v| !v.done) {
        wait_sampling(
            &mut vms,
            &mut peaks,
            every,
            every.min(Duration::from_millis(20)),
        );
        reap(&mut vms);
    }
    let wall = started.elapsed();
    let mut outcome = ScaleOutcome {
        vms: count,
        mode,
        succeeded: 0,
        peak_total_rss: peaks.total_rss,
        rss_per_vm: Vec::new(),
        store_per_vm: Vec::new(),
        store_disk_per_vm: Vec::new(),
        extra_processes: peaks.extra_processes,
        wall,
        first_error: None,
    };
    for vm in &vms {
        match read_report(vm) {
            Ok(report) => {
                let store = std::fs::metadata(&vm.store)
                    .with_context(|| format!("{} is gone", vm.store.display()))?;
                outcome.succeeded += 1;
                outcome.rss_per_vm.push(report.peak_rss_bytes as f64);
                outcome.store_per_vm.push(store.len() as f64);
                outcome
                    .store_disk_per_vm
                    .push((store.blocks() * 512) as f64);
            }
            Err(e) => {
                outcome.first_error.get_or_insert(e);
            }
        }
    }
    Ok(outcome)
}

/// Waits `pause`, sampling on schedule meanwhile.
fn wait_sampling(vms: &mut [Vm], peaks: &mut Peaks, every: Duration, pause: Duration) {
    let until = Instant::now() + pause;
    loop {
        peaks.sample_if_due(vms, every);
        let now = Instant::now();
        if now >= until {
            return;
        }
        let next = peaks.last.map_or(now, |last| last + every);
        std::thread::sleep(next.clamp(now, until) - now);
    }
}

fn launch(
    args: &ScaleArgs,
    launcher: &VmmLauncher,
    mode: VmMode,
    seconds_tier: SecondsTier,
    work: &Path,
    i: usize,
) -> anyhow::Result<Vm> {
    let report = work.join(format!("vm{i}.json"));
    let errors = work.join(format!("vm{i}.err"));
    let store = work.join(format!("vm{i}.store"));
    let child = Command::new(&launcher.program)
        .args(&launcher.prefix)
        .arg("vmm")
        .args(["--mode", mode_name(mode)])
        .args(["--duration", &args.duration.to_string()])
        .args(["--tick-ms", &args.tick_ms.to_string()])
        .args(["--guest-mem-mib", &args.guest_mem_mib.to_string()])
        .args(["--seconds-tier", seconds_tier.as_str()])
        .arg("--store")
        .arg(&store)
        .stdin(Stdio::null())
        .stdout(File::create(&report).context("creating a VM's report file")?)
        .stderr(File::create(&errors).context("creating a VM's error file")?)
        .spawn()
        .with_context(|| format!("launching VM {i} ({})", launcher.program.display()))?;
    Ok(Vm {
        child,
        report,
        errors,
        store,
        done: false,
    })
}

/// A VM's report when it succeeded; otherwise what went wrong, in a line.
fn read_report(vm: &Vm) -> Result<VmmReport, String> {
    let text = std::fs::read_to_string(&vm.report).unwrap_or_default();
    let parsed = text
        .lines()
        .last()
        .and_then(|line| serde_json::from_str::<VmmReport>(line).ok());
    match parsed {
        Some(report) if report.ok => Ok(report),
        Some(report) => Err(report.error.unwrap_or_else(|| "failed".into())),
        None => {
            let errors = std::fs::read_to_string(&vm.errors).unwrap_or_default();
            let line = errors.lines().rev().find(|l| !l.trim().is_empty());
            Err(line
                .unwrap_or("no report and no error output")
                .chars()
                .take(300)
                .collect())
        }
    }
}

fn to_benchmark(o: &ScaleOutcome, args: &ScaleArgs, seconds_tier: SecondsTier) -> BenchmarkResult {
    let bytes = |name: &str, samples: &[f64]| {
        Metric::samples(name, "B", Direction::Lower, samples.to_vec())
    };
    BenchmarkResult::new(format!("vm_scale/vms_{}", o.vms))
        .param("mode", mode_name(o.mode))
        .param("duration_s", args.duration)
        .param("tick_ms", args.tick_ms)
        .variant("seconds_tier", seconds_tier)
        .metric(Metric::value(
            "peak_rss_total",
            "B",
            Direction::Lower,
            o.peak_total_rss as f64,
        ))
        .metric(bytes("rss_per_vm", &o.rss_per_vm))
        .metric(bytes("store_per_vm", &o.store_per_vm))
        .metric(bytes("store_disk_per_vm", &o.store_disk_per_vm))
        .metric(Metric::value(
            "vms_succeeded",
            "VMs",
            Direction::Higher,
            o.succeeded as f64,
        ))
        .metric(Metric::value(
            "extra_processes",
            "processes",
            Direction::Lower,
            o.extra_processes as f64,
        ))
        .metric(Metric::value(
            "wall_time",
            "s",
            Direction::Lower,
            o.wall.as_secs_f64(),
        ))
}

/// The table a person reads: one line per VM count.
fn to_table(outcomes: &[ScaleOutcome]) -> String {
    let mib = |b: f64| b / 1_048_576.0;
    let kib = |b: f64| b / 1024.0;
    let median = crate::measure::median;
    let mut out = format!(
        "{:<5} {:<9} {:<13} {:<12} {:<16} {:<16} {:<7} {:<8} {}\n",
        "VMs",
        "Success",
        "Peak RSS",
        "RSS/VM",
        "Store/VM",
        "Store disk/VM",
        "Extra",
        "Wall",
        "Mode"
    );
    for o in outcomes {
        out.push_str(&format!(
            "{:<5} {:<9} {:<13} {:<12} {:<16} {:<16} {:<7} {:<8} {}\n",
            o.vms,
            format!("{}/{}", o.succeeded, o.vms),
            format!("{:.0} MiB", mib(o.peak_total_rss as f64)),
            format!("{:.1} MiB", mib(median(&o.rss_per_vm))),
            format!("{:.0} KiB", kib(median(&o.store_per_vm))),
            format!("{:.0} KiB", kib(median(&o.store_disk_per_vm))),
            o.extra_processes,
            format!("{:.1} s", o.wall.as_secs_f64()),
            mode_name(o.mode)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ScaleArgs,
    }

    fn parse(args: &[&str]) -> Result<ScaleArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("vm-scale").chain(args.iter().copied()))
            .map(|cli| cli.args)
    }

    #[test]
    fn counts_come_space_separated_repeated_or_full() {
        assert_eq!(parse(&[]).unwrap().counts().unwrap(), vec![4, 8, 16]);
        assert_eq!(
            parse(&["--vms", "2 3"]).unwrap().counts().unwrap(),
            vec![2, 3]
        );
        assert_eq!(
            parse(&["--vms", "2", "--vms", "5"])
                .unwrap()
                .counts()
                .unwrap(),
            vec![2, 5]
        );
        assert_eq!(
            parse(&["--full"]).unwrap().counts().unwrap(),
            vec![10, 50, 100]
        );
        assert!(parse(&["--full", "--vms", "2"]).is_err());
    }

    #[test]
    fn hostile_sizes_are_refused_before_anything_runs() {
        for bad in [
            &["--vms", "0"][..],
            &["--vms", "1001"],
            &["--vms", "-3"],
            &["--vms", "two"],
            &["--vms", "99999999999999999999999"],
        ] {
            let refused = parse(bad).map_or(true, |a| a.counts().is_err());
            assert!(refused, "{bad:?} was accepted");
        }
        for bad in [
            &["--duration", "0"][..],
            &["--duration", "-1"],
            &["--duration", "NaN"],
            &["--duration", "inf"],
            &["--duration", "3601"],
            &["--tick-ms", "0"],
            &["--sample-ms", "0"],
            &["--stagger-ms", "60001"],
            &["--guest-mem-mib", "0"],
        ] {
            let refused = parse(bad).map_or(true, |a| a.check().is_err());
            assert!(refused, "{bad:?} was accepted");
        }
        parse(&["--duration", "0.5", "--tick-ms", "20"])
            .unwrap()
            .check()
            .unwrap();
    }

    #[test]
    fn the_tier_comes_from_the_flag_then_the_variants_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.toml");
        std::fs::write(&file, "[vm_scale]\nseconds_tier = \"day\"\n").unwrap();
        let path = file.to_str().unwrap();
        let from_file = parse(&["--variants", path]).unwrap();
        assert_eq!(from_file.seconds_tier().unwrap(), SecondsTier::Day);
        let flag = parse(&["--variants", path, "--seconds-tier", "hour"]).unwrap();
        assert_eq!(flag.seconds_tier().unwrap(), SecondsTier::Hour);
        std::fs::write(&file, "[vm_scale]\nseconds_tier = \"week\"\n").unwrap();
        let err = from_file.seconds_tier().unwrap_err().to_string();
        assert!(err.contains("week"), "{err}");
    }

    fn outcome() -> ScaleOutcome {
        ScaleOutcome {
            vms: 3,
            mode: VmMode::Process,
            succeeded: 3,
            peak_total_rss: 12 << 20,
            rss_per_vm: vec![4_100_000.0, 4_200_000.0, 4_000_000.0],
            store_per_vm: vec![1_141_760.0; 3],
            store_disk_per_vm: vec![135_168.0; 3],
            extra_processes: 0,
            wall: Duration::from_millis(1_700),
            first_error: None,
        }
    }

    #[test]
    fn one_benchmark_per_count_with_the_mode_in_its_identity() {
        let args = parse(&["--duration", "1.5", "--tick-ms", "20"]).unwrap();
        let bench = to_benchmark(&outcome(), &args, SecondsTier::Day);
        bench.validate().unwrap();
        assert_eq!(bench.name, "vm_scale/vms_3");
        assert_eq!(bench.params["mode"], "process");
        assert_eq!(bench.params["duration_s"], "1.5");
        assert_eq!(bench.variant["seconds_tier"], "day");
        let metric = |name: &str| bench.metrics.iter().find(|m| m.name == name).unwrap();
        assert_eq!(metric("rss_per_vm").unit, "B");
        assert_eq!(metric("rss_per_vm").samples.as_ref().unwrap().len(), 3);
        assert_eq!(metric("vms_succeeded").direction, Direction::Higher);
        assert_eq!(metric("wall_time").value, Some(1.7));
        let table = to_table(&[outcome()]);
        assert!(table.contains("3/3") && table.contains("12 MiB"), "{table}");
        assert!(
            table.contains("1115 KiB") && table.contains("132 KiB"),
            "{table}"
        );
    }
}
