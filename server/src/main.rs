//! The `kymo` binary: parses the command line and hands over to `kymo_server::cli`.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = kymo_server::cli::Cli::parse();
    // The demo shows a progress bar and a summary; its service logs would drown them.
    let quiet = matches!(cli.command, kymo_server::cli::Command::Demo { .. });
    kymo_server::telemetry::init(if quiet { "warn" } else { "info" });
    // Twice as many runtime threads as cores: a page computed for the response cache holds
    // its thread for tens of milliseconds, and with one thread per core every request queued
    // behind it waited; with two, the system shares the core and the others go on.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2 * cores)
        .enable_all()
        .build()?
        .block_on(kymo_server::cli::run(cli))
}
