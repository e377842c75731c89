//! The `kymo` binary: parses the command line and hands over to `kymo_server::cli`.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = kymo_server::cli::Cli::parse();
    // The demo shows a progress bar and a summary; its service logs would drown them.
    let quiet = matches!(cli.command, kymo_server::cli::Command::Demo { .. });
    kymo_server::telemetry::init(if quiet { "warn" } else { "info" });
    kymo_server::cli::run(cli).await
}
