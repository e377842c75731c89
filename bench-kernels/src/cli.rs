//! The command line of `kymo-kernels` (also `kymo kernels`): list, select and run
//! benchmarks, print kymo JSON or a table, and the standalone tools (the producer
//! benchmark and the VMM the vm-scale script launches).

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::instructions::SelfCommand;
use crate::runner::{self, BusWorkload, RunContext};
use crate::variants::{
    BusBackend, PublishMode, SchedulerKind, SealedReader, StoreKind, Variants, WakeMode,
};

/// Native reproductions of five published benchmark suites, printing kymo JSON.
#[derive(Debug, Parser)]
#[command(name = "kymo-kernels", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The producer benchmark against the loopback log broker (chronik-bench's options).
    Produce(crate::produce::ProduceArgs),
    /// One micro-VM with an embedded metrics store (what vm-scale launches).
    Vmm(crate::vm_scale::VmmArgs),
    /// N concurrent micro-VMs and their memory, as kymo JSON or a table (scripts/vm-scale.sh).
    VmScale(crate::vm_scale::ScaleArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Print the benchmark names and exit.
    #[arg(long)]
    list: bool,
    /// Run the reduced set at reduced sizes (the demo and CI).
    #[arg(long)]
    quick: bool,
    /// Run only benchmarks whose name contains this text (repeatable).
    #[arg(long, value_name = "TEXT")]
    filter: Vec<String>,
    /// Run only the benchmarks of exactly these names (repeatable; in the environment, one
    /// name per line: how a kymo comparison that needs only some benchmarks names them).
    #[arg(
        long,
        value_name = "NAME",
        env = "KYMO_ONLY_BENCHMARKS",
        value_delimiter = '\n'
    )]
    only: Vec<String>,
    /// Print kymo JSON on stdout (progress stays on stderr).
    #[arg(long)]
    json: bool,
    /// Also count each kernel's instructions under valgrind (callgrind), as the metric
    /// `instructions`.
    #[arg(long)]
    instructions: bool,
    /// Only count instructions: print no wall time, one count per benchmark (a suite that
    /// counts once beside a suite that times with repeats).
    #[arg(long, conflicts_with = "instructions")]
    instructions_only: bool,
    /// Be the count run that `--instructions` starts under callgrind: walk the selected
    /// kernels once through their counted regions and print the region tally.
    #[arg(long, hide = true)]
    counting: bool,
    /// A TOML file choosing kernel variants; flags below override it.
    #[arg(long, value_name = "FILE", env = "KYMO_KERNELS_VARIANTS")]
    variants: Option<PathBuf>,
    /// Bus backend.
    #[arg(long, value_enum)]
    bus_backend: Option<BusBackend>,
    /// When the bus wakes sleeping subscribers.
    #[arg(long, value_enum)]
    bus_wake: Option<WakeMode>,
    /// How the bursty bus benchmark publishes.
    #[arg(long, value_enum)]
    bus_publish: Option<PublishMode>,
    /// Reader for sealed log segments.
    #[arg(long, value_enum)]
    log_read_sealed_reader: Option<SealedReader>,
    /// Scheduler under test in the fair-queue scenarios.
    #[arg(long, value_enum)]
    fair_queue_scheduler: Option<SchedulerKind>,
    /// Metrics store write path.
    #[arg(long, value_enum)]
    ring_store: Option<StoreKind>,
    /// Bursty bus benchmark: messages per burst.
    #[arg(long, env = "KYMO_BUS_BURST", default_value_t = 256)]
    bus_burst: usize,
    /// Bursty bus benchmark: subscribers (1 to 32).
    #[arg(long, env = "KYMO_BUS_FANOUT", default_value_t = 4)]
    bus_fanout: usize,
    /// Bursty bus benchmark: ring capacity.
    #[arg(long, env = "KYMO_BUS_CAP", default_value_t = 2048)]
    bus_cap: usize,
}

impl RunArgs {
    fn selection(&self) -> runner::Selection {
        let named = |names: &[String]| -> Vec<String> {
            (names.iter())
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        };
        runner::Selection {
            filters: self.filter.clone(),
            only: named(&self.only),
        }
    }

    fn variants(&self) -> anyhow::Result<Variants> {
        let mut v = match &self.variants {
            Some(path) => Variants::load(path)?,
            None => Variants::default(),
        };
        if let Some(x) = self.bus_backend {
            v.bus.backend = x;
        }
        if let Some(x) = self.bus_wake {
            v.bus.wake = x;
        }
        if let Some(x) = self.bus_publish {
            v.bus.publish = x;
        }
        if let Some(x) = self.log_read_sealed_reader {
            v.log_read.sealed_reader = x;
        }
        if let Some(x) = self.fair_queue_scheduler {
            v.fair_queue.scheduler = x;
        }
        if let Some(x) = self.ring_store {
            v.ring.store = x;
        }
        Ok(v)
    }

    fn bus_workload(&self) -> anyhow::Result<BusWorkload> {
        anyhow::ensure!(
            (1..=crate::bus::MAX_SUBSCRIBERS as usize).contains(&self.bus_fanout),
            "bus fanout must be between 1 and {}, not {}",
            crate::bus::MAX_SUBSCRIBERS,
            self.bus_fanout
        );
        anyhow::ensure!(self.bus_burst >= 1, "bus burst must be at least 1");
        anyhow::ensure!(self.bus_cap >= 1, "bus capacity must be at least 1");
        Ok(BusWorkload {
            burst: self.bus_burst,
            fanout: self.bus_fanout,
            capacity: self.bus_cap,
        })
    }
}

/// Runs the command line `args` (without the program name), as `kymo-kernels` does.
pub fn run_cli(args: Vec<String>) -> anyhow::Result<()> {
    run_cli_under(&[], args)
}

/// Runs the command line `args` of a program that reaches this command line through the
/// subcommands `path` (the hidden `kymo kernels` passes `["kernels"]`): vm-scale launches its
/// VMMs through the same path.
pub fn run_cli_under(path: &[&str], args: Vec<String>) -> anyhow::Result<()> {
    let cli = Cli::try_parse_from(std::iter::once("kymo-kernels".to_string()).chain(args.clone()))
        .unwrap_or_else(|e| e.exit());
    match cli.command {
        Some(Command::Produce(args)) => crate::produce::run_standalone(&args),
        Some(Command::Vmm(args)) => crate::vm_scale::run_vmm(&args),
        Some(Command::VmScale(args)) => {
            let launcher = crate::vm_scale::VmmLauncher::current(path)?;
            crate::vm_scale::run_scale(&args, &launcher)
        }
        None => {
            let itself = SelfCommand {
                program: std::env::current_exe().context("cannot find the running executable")?,
                prefix: path.iter().map(ToString::to_string).collect(),
            };
            run_benchmarks(&cli.run, &itself, &args)
        }
    }
}

fn run_benchmarks(args: &RunArgs, itself: &SelfCommand, argv: &[String]) -> anyhow::Result<()> {
    let variants = args.variants()?;
    let bus = args.bus_workload()?;
    let mut stdout = std::io::stdout().lock();
    if args.list {
        for suite in runner::all_suites() {
            for name in runner::selected_names(suite.as_ref(), args.quick, &args.selection()) {
                writeln!(stdout, "{name}")?;
            }
        }
        return Ok(());
    }
    let scratch = tempfile::Builder::new()
        .prefix("kymo-kernels-")
        .tempdir()
        .context("creating a scratch directory")?;
    let context = RunContext {
        quick: args.quick,
        variants,
        bus,
        scratch: scratch.path().to_path_buf(),
    };
    if args.counting {
        crate::instructions::region::start_counting();
        let tallies = runner::tally_regions(&context, &args.selection())?;
        writeln!(stdout, "{}", serde_json::to_string(&tallies)?)?;
        return Ok(());
    }
    let report = if args.instructions_only {
        context.progress("counting instructions under callgrind");
        let report = crate::instructions::report_of(&crate::instructions::count(itself, argv)?);
        for result in &report.benchmarks {
            result.validate()?;
        }
        report
    } else {
        let mut report = runner::run_selected(&context, &args.selection())?;
        if args.instructions {
            context.progress("counting instructions under callgrind");
            let counts = crate::instructions::count(itself, argv)?;
            crate::instructions::attach(&mut report, &counts);
        }
        report
    };
    anyhow::ensure!(
        !report.benchmarks.is_empty(),
        "no benchmark matches the filters {:?} and names {:?} (see --list)",
        args.filter,
        args.only
    );
    if args.json {
        writeln!(stdout, "{}", report.to_json()?)?;
    } else {
        write!(stdout, "{}", report.to_text())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("kymo-kernels").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn flags_override_the_variants_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.toml");
        std::fs::write(
            &file,
            "[bus]\nbackend = \"classic\"\n[ring]\nstore = \"write\"\n",
        )
        .unwrap();
        let cli = parse(&["--variants", file.to_str().unwrap(), "--ring-store", "mmap"]);
        let v = cli.run.variants().unwrap();
        assert_eq!(v.bus.backend, BusBackend::Classic);
        assert_eq!(v.ring.store, StoreKind::Mmap);
    }

    #[test]
    fn a_bad_variants_file_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.toml");
        std::fs::write(&file, "[log_read]\nsealed_reader = \"carrier pigeon\"\n").unwrap();
        let cli = parse(&["--variants", file.to_str().unwrap()]);
        let err = cli.run.variants().unwrap_err().to_string();
        assert!(
            err.contains("v.toml") && err.contains("carrier pigeon"),
            "{err}"
        );
    }

    #[test]
    fn only_takes_names_from_flags_or_one_per_line() {
        let cli = parse(&["--only", "ring/write_path/record", "--only", " "]);
        assert_eq!(cli.run.selection().only, vec!["ring/write_path/record"]);
        let cli = parse(&["--only", "a\n\nb/c\n"]);
        assert_eq!(cli.run.selection().only, vec!["a", "b/c"]);
        assert!(parse(&[]).run.selection().only.is_empty());
    }

    #[test]
    fn fanout_beyond_the_bitmask_is_refused() {
        let cli = parse(&["--bus-fanout", "33"]);
        assert!(cli.run.bus_workload().is_err());
        let cli = parse(&["--bus-fanout", "32"]);
        assert_eq!(cli.run.bus_workload().unwrap().fanout, 32);
    }

    #[test]
    fn unknown_flag_values_are_refused() {
        let err = Cli::try_parse_from(["kymo-kernels", "--bus-backend", "turbo"]).unwrap_err();
        assert!(err.to_string().contains("turbo"));
    }
}
