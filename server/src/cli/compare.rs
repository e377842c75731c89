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
        "{:<48} {:<14} {:>16} {:>16} {:>9} {:>10}  verdict",
        "benchmark", "metric", "base", "head", "change", "could see"
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
            "{:<48} {:<14} {:>16} {:>16} {:>+8.1}% {:>10}  {kind}{}",
            row["benchmark"].as_str().unwrap_or(""),
            row["metric"].as_str().unwrap_or(""),
            human(&v["baseline"]),
            human(&v["value"]),
            v["change_pct"].as_f64().unwrap_or(0.0),
            could_see(v),
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
    if let Some(power) = unchanged_power(rows) {
        println!("{power}");
    }
}

/// The power of a row: the smallest change it would have found, or a dash.
fn could_see(verdict: &Value) -> String {
    verdict["detectable_pct"]
        .as_f64()
        .map_or("–".to_owned(), |p| format!("≥{p:.1}%"))
}

/// What the unchanged rows could have seen, in one line: "unchanged" is only as strong as it.
fn unchanged_power(rows: &[Value]) -> Option<String> {
    let mut seen: Vec<f64> = (rows.iter())
        .filter(|r| r["verdict"]["kind"] == "no_change")
        .filter_map(|r| r["verdict"]["detectable_pct"].as_f64())
        .collect();
    seen.sort_by(f64::total_cmp);
    let (least, most) = (seen.first()?, seen.last()?);
    Some(format!(
        "unchanged: each of the {} unchanged rows would have shown a change above {most:.1} % \
         (the most sensitive, above {least:.1} %; median {:.1} %)",
        seen.len(),
        seen[seen.len() / 2]
    ))
}

fn short(sha: &Value) -> &str {
    let s = sha.as_str().unwrap_or("");
    &s[..s.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_rows_state_what_they_could_have_seen() {
        let row = |kind: &str, power: Option<f64>| serde_json::json!({"verdict": {"kind": kind, "detectable_pct": power}});
        let rows = [
            row("no_change", Some(3.1)),
            row("no_change", Some(1.2)),
            row("no_change", Some(2.0)),
            row("regression", Some(9.0)),
            row("no_change", None),
        ];
        let line = unchanged_power(&rows).unwrap();
        assert!(line.contains("3 unchanged rows"), "{line}");
        assert!(
            line.contains("above 3.1 %") && line.contains("above 1.2 %"),
            "{line}"
        );
        assert_eq!(unchanged_power(&rows[3..]), None);
        assert_eq!(could_see(&rows[0]["verdict"]), "≥3.1%");
        assert_eq!(could_see(&rows[4]["verdict"]), "–");
    }

    #[test]
    fn changes_and_undecided_rows_are_shown_without_all() {
        assert!(shown_by_default("regression"));
        assert!(shown_by_default("improvement"));
        assert!(shown_by_default("inconclusive"));
        assert!(!shown_by_default("no_change"));
        assert!(!shown_by_default(""));
    }
}
