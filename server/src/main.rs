//! The `kymo` binary: parses the command line and hands over to `kymo_server::cli`.

use std::process::ExitCode;

use clap::Parser;
use kymo_server::cli::Command;

fn main() -> ExitCode {
    let cli = kymo_server::cli::Cli::parse();
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Worker(_) | Command::Demo { .. }
    ) {
        // A command whose output is piped into `head` ends quietly when the reader goes away,
        // as Unix tools do, instead of panicking on the broken pipe. The long-running commands
        // keep Rust's default (ignored), or a closed socket would kill the server.
        // SAFETY: called before any thread is started; SIG_DFL is a valid disposition.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if let Command::Kernels { args } = cli.command {
        // The kernels need no runtime or logging: starting a multi-threaded runtime costs
        // little natively but seconds under valgrind, which the instruction-count run is.
        return match bench_kernels::run_cli_under(&["kernels"], args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    // The demo shows a progress bar and a summary; its service logs would drown them.
    let quiet = matches!(cli.command, Command::Demo { .. });
    kymo_server::telemetry::init(if quiet { "warn" } else { "info" });
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            if let Some(exit) = err.downcast_ref::<kymo_server::cli::ExitWith>() {
                eprintln!("{}", exit.message);
                return ExitCode::from(exit.code);
            }
            // A message, never a backtrace: RUST_BACKTRACE=1 is common among Rust developers,
            // and anyhow's Debug form prints one for every user error.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: kymo_server::cli::Cli) -> anyhow::Result<ExitCode> {
    // Twice as many runtime threads as cores: a page computed for the response cache holds
    // its thread for tens of milliseconds, and with one thread per core every request queued
    // behind it waited; with two, the system shares the core and the others go on.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2 * cores)
        .enable_all()
        .build()?
        .block_on(kymo_server::cli::run(cli))?;
    Ok(ExitCode::SUCCESS)
}
