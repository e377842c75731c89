//! `kymo try NAME REF [--base REF]`: REF against its merge base with the tracked branch,
//! measured interleaved on one machine, judged as the compare page judges, from the terminal.
//! Exit status 1 when something regressed, 0 when not, 2 when the run (or the request) failed.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use clap::Args;
use kymo_core::protocol::{TryQueued, TryRequest, query_value};
use serde_json::Value;

use super::{ExitWith, ServerArg, blocking, client, compare, progress};

#[derive(Debug, Args)]
pub struct TryArgs {
    /// The repository.
    pub name: String,
    /// The branch, tag or sha to judge; the remote is fetched first.
    #[arg(value_name = "REF")]
    pub reference: String,
    /// The baseline [default: the merge base of REF with the tracked branch].
    #[arg(long)]
    pub base: Option<String>,
    /// Exactly this many alternations of base and head (1-40), judged once at the end. Without
    /// it (or with `--budget`) the rounds go on until every benchmark is decided, the budget is
    /// spent, or 40 (or this many) ran.
    #[arg(long)]
    pub rounds: Option<i64>,
    /// How long the rounds may take (`90s`, `10m`, `1h`) [default: the repository's, 10m].
    #[arg(long, value_name = "DURATION", value_parser = super::budget_seconds)]
    pub budget: Option<i64>,
    /// Show every row, not only the changes and the inconclusive rows.
    #[arg(long)]
    pub all: bool,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// Stop waiting after this many seconds (the run goes on; exit status 2).
    #[arg(long, default_value_t = 3600)]
    pub wait: u64,
    #[command(flatten)]
    pub server: ServerArg,
}

/// The exit status of a run that failed, was cancelled, or could not be asked for.
const FAILED: u8 = 2;

pub async fn run(args: TryArgs) -> anyhow::Result<()> {
    let outcome = try_run(args).await;
    outcome.map_err(|err| match err.downcast::<ExitWith>() {
        Ok(exit) => exit.into(),
        Err(other) => ExitWith::new(FAILED, format!("{other:#}")).into(),
    })
}

async fn try_run(args: TryArgs) -> anyhow::Result<()> {
    let repo = query_value(&args.name);
    let request = TryRequest {
        commit: args.reference.clone(),
        base: args.base.clone(),
        rounds: args.rounds,
        budget_seconds: args.budget,
    };
    let server = args.server.clone();
    let path = format!("/repos/{repo}/try");
    let waiting = progress::spinner(format!("fetching {} and queueing it", args.reference));
    let queued: anyhow::Result<TryQueued> =
        blocking(move || client(&server).post(&path, &request)).await;
    let queued = queued.inspect_err(|_| waiting.finish_and_clear())?;
    waiting.set_message(format!(
        "comparison {}: {} against {} ({})",
        queued.comparison,
        queued.head.short(),
        queued.base.short(),
        queued.baseline
    ));
    let view = wait_for(&args, &queued, &waiting).await;
    waiting.finish_and_clear();
    let view = view?;
    let comparison = &view["comparison"];
    let state = comparison["state"].as_str().unwrap_or("");
    if state != "succeeded" {
        let error = comparison["error"].as_str().unwrap_or("no reason given");
        return Err(ExitWith::new(
            FAILED,
            format!("comparison {} {state}: {error}", queued.comparison),
        )
        .into());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
    }
    let report = &view["report"];
    if !args.json {
        compare::print_table(report, args.all, std::io::stdout().is_terminal());
        let most = match comparison["budget_seconds"].as_i64() {
            Some(budget) => format!(
                " (adaptive: at most {} rounds within {budget} s, stopping once decided)",
                comparison["rounds"]
            ),
            None => String::new(),
        };
        println!(
            "measured interleaved (base, head, base, head, ...) over {} rounds on machine {}{most}",
            view["rounds_run"],
            comparison["machine"].as_str().unwrap_or("?")
        );
    }
    let regressed = report["regressed"].as_u64().unwrap_or(0);
    if regressed > 0 {
        return Err(ExitWith::new(
            1,
            format!(
                "{regressed} regression(s) from {} to {}",
                queued.base.short(),
                queued.head.short()
            ),
        )
        .into());
    }
    Ok(())
}

/// Polls the comparison until it has finished, showing what it is doing.
async fn wait_for(
    args: &TryArgs,
    queued: &TryQueued,
    line: &indicatif::ProgressBar,
) -> anyhow::Result<Value> {
    let path = format!(
        "/repos/{}/comparisons/{}",
        query_value(&args.name),
        queued.comparison
    );
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    let mut last = String::new();
    loop {
        let (server, asked) = (args.server.clone(), path.clone());
        let view: Value = blocking(move || client(&server).get(&asked)).await?;
        let comparison = &view["comparison"];
        let state = comparison["state"].as_str().unwrap_or("").to_owned();
        if matches!(state.as_str(), "succeeded" | "failed" | "cancelled") {
            return Ok(view);
        }
        let doing = comparison["phase"].as_str().unwrap_or(&state);
        let rounds = match comparison["budget_seconds"].as_i64() {
            Some(budget) => format!("at most {} rounds in {budget} s", comparison["rounds"]),
            None => format!("{} rounds", comparison["rounds"]),
        };
        let message = format!("comparison {} ({rounds}): {doing}", queued.comparison);
        if message != last {
            line.set_message(message.clone());
            last = message;
        }
        if Instant::now() > deadline {
            return Err(ExitWith::new(
                FAILED,
                format!(
                    "comparison {} is still {state} after {}s; see {path}",
                    queued.comparison, args.wait
                ),
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
