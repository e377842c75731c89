//! The `kymo` binary: parses the command line and hands over to `kymo_server::cli`.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kymo_server::telemetry::init();
    kymo_server::cli::run(kymo_server::cli::Cli::parse()).await
}
