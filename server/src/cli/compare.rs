//! `kymo compare BASE HEAD --repo R`: the compare table in the terminal, and an exit status
//! that fails a CI step when the head regressed.

use std::io::IsTerminal;

use anyhow::bail;
use clap::Args;
use kymo_core::protocol::query_value;
use serde_json::Value;

use super::{ServerArg, blocking, client};
use crate::pages::format::value;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline: a commit, branch or tag, `parent`, or `merge-base:BRANCH`.
    pub base: String,
    /// The commit to judge.
    pub head: String,
    #[arg(long)]
    pub repo: String,
    /// Show every row, not only the changes and the inconclusive rows.
    #[arg(long)]
    pub all: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArg,
}

pub async fn run(args: CompareArgs) -> anyhow::Result<()> {
    let path = format!(
        "/repos/{}/compare?base={}&head={}",
        query_value(&args.repo),
        query_value(&args.base),
        query_value(&args.head)
    );
    let server = args.server;
    let report: Value = blocking(move || client(&server).get(&path)).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report, args.all, std::io::stdout().is_terminal());
    }
    let regressed = report["regressed"].as_u64().unwrap_or(0);
    if regressed > 0 {
        bail!(
            "{regressed} regression(s) from {} to {}",
            args.base,
            args.head
        );
    }
    Ok(())
}

/// Whether a row is shown without `--all`: a change, or a row the data could not decide.
fn shown_by_default(kind: &str) -> bool {
    matches!(kind, "regression" | "improvement" | "inconclusive")
}

pub(super) fn print_table(report: &Value, all: bool, colour: bool) {
    let paint = |text: String, verdict: &str| match (colour, verdict) {
        (true, "regression") => format!("\x1b[31m{text}\x1b[0m"),
        (true, "improvement") => format!("\x1b[32m{text}\x1b[0m"),
        _ => text,
    };
    let empty = Vec::new();
    let rows = report["rows"].as_array().unwrap_or(&empty);
    println!(
        "{} → {} ({})",
        short(&report["base"]),
        short(&report["head"]),
        report["baseline"].as_str().unwrap_or("")
    );
    println!(
        "{:<48} {:<14} {:>16} {:>16} {:>9}  verdict",
        "benchmark", "metric", "base", "head", "change"
    );
    for row in rows {
        let v = &row["verdict"];
        let kind = v["kind"].as_str().unwrap_or("");
        if !all && !shown_by_default(kind) {
            continue;
        }
        let unit = row["unit"].as_str().unwrap_or("");
        let human = |x: &Value| x.as_f64().map_or("–".to_owned(), |x| value(x, unit));
        let note = v["note"].as_str().filter(|n| !n.is_empty());
        let line = format!(
            "{:<48} {:<14} {:>16} {:>16} {:>+8.1}%  {kind}{}",
            row["benchmark"].as_str().unwrap_or(""),
            row["metric"].as_str().unwrap_or(""),
            human(&v["baseline"]),
            human(&v["value"]),
            v["change_pct"].as_f64().unwrap_or(0.0),
            note.map(|n| format!(" ({n})")).unwrap_or_default(),
        );
        println!("{}", paint(line, kind));
    }
    let geomean = report["geomean_ratio"]
        .as_f64()
        .map(|g| format!("{:+.2} %", (g - 1.0) * 100.0))
        .unwrap_or_else(|| "–".into());
    println!(
        "{} regressed, {} improved, {} unchanged, {} inconclusive · geometric mean of \
         head/base (inverted where higher is better; above 0 is worse) {geomean}",
        report["regressed"], report["improved"], report["unchanged"], report["inconclusive"]
    );
}

fn short(sha: &Value) -> &str {
    let s = sha.as_str().unwrap_or("");
    &s[..s.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_undecided_rows_are_shown_without_all() {
        assert!(shown_by_default("regression"));
        assert!(shown_by_default("improvement"));
        assert!(shown_by_default("inconclusive"));
        assert!(!shown_by_default("no_change"));
        assert!(!shown_by_default(""));
    }
}
