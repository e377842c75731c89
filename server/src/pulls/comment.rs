//! The text of a pull request's one comment: what changed, with its evidence, each benchmark's
//! time beside its instruction counts, and what the unchanged rows could have seen. Pure.

use kymo_core::db::MeasuredBy;

use crate::compare::{CompareReport, CompareRow};
use crate::interleaved::ComparisonView;
use crate::pages::format::value;

/// Rows of changes a comment lists; the compare page has them all.
const MAX_ROWS: usize = 30;

/// The metric that counts work, shown beside a benchmark's time.
const WORK: &str = kymo_core::interleaved::WORK_METRIC;

/// A table cell of untrusted text (benchmark names come from benchmark output).
fn cell(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '|' => "\\|".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '`' | '*' | '_' | '[' | ']' | '\\' => format!("\\{c}"),
            c if c.is_control() => " ".to_owned(),
            c => c.to_string(),
        })
        .collect()
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// The comment's text for a finished comparison.
pub fn comment_text(view: &ComparisonView, link: &str) -> String {
    let c = &view.comparison;
    let short = |sha: &str| sha.chars().take(10).collect::<String>();
    let (true, Some(report)) = (c.state == "succeeded", view.report.as_ref()) else {
        return format!(
            "### kymo: the latest comparison {}\n\nHead `{}` against `{}`: {}\n\n[Details]({link})\n",
            c.state,
            short(&c.head),
            short(&c.base),
            cell(c.error.as_deref().unwrap_or("no reason given"))
        );
    };
    let mut out = format!(
        "### kymo: {} regressed, {} improved, {} unchanged, {} inconclusive{}\n\n",
        report.regressed,
        report.improved,
        report.unchanged,
        report.inconclusive,
        report
            .geomean_ratio
            .map(|g| format!(" · geometric mean {:+.2} %", (g - 1.0) * 100.0))
            .unwrap_or_default()
    );
    out.push_str(&how_measured(view));
    out.push_str(&changes_table(report));
    out.push_str(&power_summary(view, report));
    out.push_str(&format!("[Compare page]({link})\n"));
    out
}

/// How the comparison was measured: interleaved on a kymo machine (adaptive or not), or in
/// CI, with the caveat that CI runners are noisy.
fn how_measured(view: &ComparisonView) -> String {
    let c = &view.comparison;
    let short = |sha: &str| sha.chars().take(10).collect::<String>();
    let sides = format!(
        "Head `{}` against `{}` ({})",
        short(&c.head),
        short(&c.base),
        cell(&c.baseline)
    );
    if view.interleaved {
        let how = match c.budget_seconds {
            Some(budget) => format!(
                "over {} (adaptive: until every benchmark was decided, at most {} rounds \
                 within {budget} s)",
                plural(view.rounds_run, "round"),
                c.rounds
            ),
            None => format!("over {}", plural(view.rounds_run, "round")),
        };
        return format!(
            "{sides}, measured interleaved (base, head, base, head, …) {how} on one machine.\n\n"
        );
    }
    let base = if c.measured == MeasuredBy::SameJob.as_str() {
        "both sides in the same job"
    } else {
        "the head in this job, the base's results stored from runners of the same machine \
         fingerprint"
    };
    format!(
        "{sides}, measured in CI on runner `{}`: {base}.\n\n\
         > CI runners are noisy: a shared virtual machine's speed changes between jobs and \
         within one, so a change of a few percent here may be the runner. The verdict allows \
         for the noise this runner's stored history shows; a dedicated machine measuring both \
         sides interleaved (`kymo try`) decides.\n\n",
        cell(c.machine.as_deref().unwrap_or("?"))
    )
}

/// The rows that are not `no_change`, each beside its benchmark's instruction counts.
fn changes_table(report: &CompareReport) -> String {
    let changes: Vec<&CompareRow> = (report.rows.iter())
        .filter(|r| r.verdict.kind.as_str() != "no_change")
        .collect();
    if changes.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| benchmark | metric | base | head | change | interval | p-value | noise | could see | \
         work (instructions) | verdict |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in changes.iter().take(MAX_ROWS) {
        let v = &r.verdict;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:+.1} % | {:+.1} % … {:+.1} % | {} | {:.1} % | {} | {} | {} |\n",
            cell(&r.benchmark),
            cell(&r.metric),
            cell(&value(v.baseline, &r.unit)),
            cell(&value(v.value, &r.unit)),
            v.change_pct,
            v.ci_low_pct,
            v.ci_high_pct,
            v.p_value.map_or("–".to_owned(), |p| format!("{p:.2e}")),
            v.noise_pct,
            v.detectable_pct.map_or("–".to_owned(), |p| format!("≥ {p:.1} %")),
            work_beside(report, r),
            v.kind.as_str()
        ));
    }
    if changes.len() > MAX_ROWS {
        out.push_str(&format!("\n… and {} more.\n", changes.len() - MAX_ROWS));
    }
    out.push('\n');
    out
}

/// The instruction counts of a row's benchmark, for a row that is not itself counts.
fn work_beside(report: &CompareReport, row: &CompareRow) -> String {
    if row.metric == WORK {
        return "–".to_owned();
    }
    let counts = (report.rows.iter()).find(|r| r.metric == WORK && r.benchmark == row.benchmark);
    match counts.map(|r| &r.verdict) {
        None => "–".to_owned(),
        Some(v) if v.change_pct == 0.0 && v.noise_pct == 0.0 => "identical".to_owned(),
        Some(v) => format!("{:+.2} % ({})", v.change_pct, v.kind.as_str()),
    }
}

/// The noise, and what the unchanged rows could have seen: "unchanged" is only as strong as
/// the smallest change it would have found.
fn power_summary(view: &ComparisonView, report: &CompareReport) -> String {
    let mut out = String::new();
    let mut noise: Vec<f64> = report.rows.iter().map(|r| r.verdict.noise_pct).collect();
    noise.sort_by(f64::total_cmp);
    if let Some(median) = noise.get(noise.len() / 2) {
        let source = if view.interleaved {
            "measured from these rounds"
        } else {
            "from the history this runner's machine fingerprint has stored"
        };
        out.push_str(&format!(
            "Noise level: run-to-run spread {median:.1} % (median over {}), {source}.\n\n",
            plural(noise.len(), "row")
        ));
    }
    let mut seen: Vec<f64> = (report.rows.iter())
        .filter(|r| r.verdict.kind.as_str() == "no_change")
        .filter_map(|r| r.verdict.detectable_pct)
        .collect();
    seen.sort_by(f64::total_cmp);
    if let (Some(least), Some(most)) = (seen.first(), seen.last()) {
        out.push_str(&format!(
            "Unchanged: {} would have shown a change above {most:.1} % (the most sensitive \
             above {least:.1} %, median {:.1} %).\n\n",
            plural(seen.len(), "row"),
            seen[seen.len() / 2]
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use kymo_core::stats::VerdictKind;

    use super::*;
    use crate::pulls::feedback::tests::{row, view};

    #[test]
    fn the_comment_lists_the_changed_rows_with_their_evidence_and_links_the_page() {
        let slower = view(
            "succeeded",
            Some(vec![
                row("parse", 100.0, 130.0, VerdictKind::Regression),
                row("print", 100.0, 100.0, VerdictKind::NoChange),
            ]),
        );
        let text = comment_text(&slower, "https://kymo.example/repos/app/comparisons/4");
        assert!(
            text.starts_with("### kymo: 1 regressed, 0 improved, 1 unchanged, 0 inconclusive"),
            "{text}"
        );
        assert!(
            text.contains("| parse | time | 100 ns | 130 ns | +30.0 % |"),
            "{text}"
        );
        assert!(
            !text.contains("| print |"),
            "unchanged rows stay on the page: {text}"
        );
        assert!(
            text.contains("interleaved") && text.contains("3 rounds"),
            "{text}"
        );
        assert!(text.contains("Noise level"), "{text}");
        assert!(
            text.contains("(https://kymo.example/repos/app/comparisons/4)"),
            "{text}"
        );
        let failed = comment_text(&view("failed", None), "https://k/x");
        assert!(
            failed.contains("failed") && failed.contains("head: suite"),
            "{failed}"
        );
    }

    #[test]
    fn unchanged_rows_say_what_they_could_have_seen_and_counts_stand_beside_time() {
        let mut print = row("print", 100.0, 100.0, VerdictKind::NoChange);
        print.verdict.detectable_pct = Some(3.1);
        let mut parse = row("parse", 100.0, 101.0, VerdictKind::Inconclusive);
        parse.verdict.detectable_pct = Some(4.0);
        let mut counts = row("parse", 1e6, 1.01e6, VerdictKind::Regression);
        counts.metric = WORK.into();
        counts.verdict.change_pct = 1.0;
        let text = comment_text(&view("succeeded", Some(vec![print, parse, counts])), "l");
        assert!(
            text.contains("Unchanged: 1 row would have shown a change above 3.1 %"),
            "{text}"
        );
        let time = text
            .lines()
            .find(|l| l.starts_with("| parse | time"))
            .unwrap();
        assert!(
            time.contains("| ≥ 4.0 % | +1.00 % (regression) | inconclusive |"),
            "{time}"
        );
    }

    #[test]
    fn a_comparison_measured_in_ci_says_so_with_the_caveat_that_runners_are_noisy() {
        let mut slower = view(
            "succeeded",
            Some(vec![row("parse", 100.0, 130.0, VerdictKind::Regression)]),
        );
        slower.interleaved = false;
        slower.comparison.measured = "stored-base".into();
        let text = comment_text(&slower, "https://k/x");
        assert!(!text.contains("interleaved (base"), "{text}");
        assert!(text.contains("measured in CI on runner `m`"), "{text}");
        assert!(text.contains("> CI runners are noisy"), "{text}");
        assert!(text.contains("stored history"), "{text}");
        slower.comparison.measured = "same-job".into();
        assert!(comment_text(&slower, "https://k/x").contains("both sides in the same job"));
    }

    #[test]
    fn hostile_benchmark_names_cannot_break_the_table_or_inject_markup() {
        let hostile = view(
            "succeeded",
            Some(vec![row(
                "a|b<script>`x`[l](javascript:x)\nrow",
                100.0,
                130.0,
                VerdictKind::Regression,
            )]),
        );
        let text = comment_text(&hostile, "https://k/x");
        let line = text.lines().find(|l| l.contains("script")).unwrap();
        assert!(
            line.contains("a\\|b&lt;script&gt;\\`x\\`\\[l\\](javascript:x) row"),
            "{line}"
        );
        assert_eq!(line.matches(" | ").count(), 10, "{line}");
    }
}
