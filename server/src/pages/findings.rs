//! The repository page's open regressions, one row per benchmark and commit: a commit that
//! slows a benchmark usually moves most of its metrics (time, latency percentiles, throughput),
//! and a reader wants that as one finding with its worst change first, not as seven rows.

use kymo_core::db::RegressionRow;

use super::format::{change_size, summary};

/// Findings listed before the summary; the rest are one link away.
pub const FINDINGS_SHOWN: usize = 10;
/// Metrics named in a finding's row; the others are counted.
const METRICS_SHOWN: usize = 3;

/// One metric's open regression inside a finding.
pub struct MetricChangeView {
    pub id: i64,
    pub metric: String,
    pub change: String,
}

/// The open regressions of one benchmark at one commit, worst change first.
pub struct OpenFindingView {
    pub benchmark: String,
    pub sha: String,
    pub short: String,
    pub subject: String,
    pub changes: Vec<MetricChangeView>,
    /// Open regressions of this finding that are not named in its row.
    pub more: usize,
    /// Rows the commit's cell spans: the shown findings at this commit for its first finding,
    /// 0 for the others (the commit is named once).
    pub commit_rows: usize,
}

impl OpenFindingView {
    /// The page of the finding's worst change.
    pub fn worst_id(&self) -> i64 {
        self.changes.first().map_or(0, |c| c.id)
    }
}

/// What the open regressions add up to: the findings in the order the rows came (newest commit
/// first), how many commits they sit at, and how many regressions there are in all.
pub struct OpenFindings {
    pub shown: Vec<OpenFindingView>,
    pub findings: usize,
    pub commits: usize,
    pub regressions: usize,
}

/// Groups open regressions by commit and benchmark (the machine is part of the key, so two
/// machines that both saw a change are two findings), keeping the first `FINDINGS_SHOWN`.
pub fn group_open_regressions(rows: &[RegressionRow]) -> OpenFindings {
    let mut groups: Vec<(&str, &str, &str, Vec<&RegressionRow>)> = Vec::new();
    for row in rows {
        let key = (
            row.sha.as_str(),
            row.benchmark.as_str(),
            row.machine.as_str(),
        );
        match groups.iter_mut().find(|(s, b, m, _)| (*s, *b, *m) == key) {
            Some((.., members)) => members.push(row),
            None => groups.push((key.0, key.1, key.2, vec![row])),
        }
    }
    let mut commits: Vec<&str> = groups.iter().map(|(sha, ..)| *sha).collect();
    commits.sort_unstable();
    commits.dedup();
    let findings = groups.len();
    let mut shown = groups
        .into_iter()
        .take(FINDINGS_SHOWN)
        .map(|(_, _, _, mut members)| {
            members.sort_by(|a, b| change_size(b.change_pct).total_cmp(&change_size(a.change_pct)));
            let first = members[0];
            OpenFindingView {
                benchmark: first.benchmark.clone(),
                sha: first.sha.clone(),
                short: first.sha.get(..10).unwrap_or(&first.sha).to_owned(),
                subject: summary(&first.message),
                more: members.len().saturating_sub(METRICS_SHOWN),
                commit_rows: 0,
                changes: members
                    .iter()
                    .take(METRICS_SHOWN)
                    .map(|r| MetricChangeView {
                        id: r.id,
                        metric: r.metric.clone(),
                        change: format!("{:+.1} %", r.change_pct),
                    })
                    .collect(),
            }
        })
        .collect::<Vec<OpenFindingView>>();
    let mut start = 0;
    while start < shown.len() {
        let sha = &shown[start].sha;
        let rows = shown[start..].iter().take_while(|f| &f.sha == sha).count();
        shown[start].commit_rows = rows;
        start += rows;
    }
    OpenFindings {
        shown,
        findings,
        commits: commits.len(),
        regressions: rows.len(),
    }
}

/// Changes listed under "Recent changes".
pub const RECENT_CHANGES_SHOWN: usize = 10;

/// A change point of the repository's recent history, either way.
pub struct RecentChangeView {
    pub id: i64,
    pub sha: String,
    pub short: String,
    pub benchmark: String,
    pub metric: String,
    pub change: String,
    /// `worse` for a regression, `better` for an improvement.
    pub class: &'static str,
    /// Its triage state, and its confirmation's when one was asked for.
    pub status: String,
}

/// The newest change points in both directions (`rows` as the store lists them, newest commit
/// first), leaving out those triaged as false positives and those a re-measurement refuted:
/// what the repository's performance did lately, improvements included.
pub fn recent_changes(rows: &[RegressionRow]) -> Vec<RecentChangeView> {
    rows.iter()
        .filter(|r| r.state != "false_positive" && r.confirmation.as_deref() != Some("refuted"))
        .take(RECENT_CHANGES_SHOWN)
        .map(|r| RecentChangeView {
            id: r.id,
            short: r.sha.get(..10).unwrap_or(&r.sha).to_owned(),
            sha: r.sha.clone(),
            benchmark: r.benchmark.clone(),
            metric: r.metric.clone(),
            change: format!("{:+.1} %", r.change_pct),
            class: if r.kind == "regression" {
                "worse"
            } else {
                "better"
            },
            status: match &r.confirmation {
                Some(confirmation) => format!("{}, {confirmation}", r.state),
                None => r.state.clone(),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, sha: &str, benchmark: &str, metric: &str, change_pct: f64) -> RegressionRow {
        RegressionRow {
            id,
            repository: "r".into(),
            series_id: id,
            benchmark: benchmark.into(),
            metric: metric.into(),
            unit: "ns".into(),
            direction: "lower".into(),
            machine: "m".into(),
            sha: sha.into(),
            message: format!("change {sha}\n\nbody"),
            position: None,
            previous_sha: None,
            kind: "regression".into(),
            baseline: 1.0,
            value: 1.0 + change_pct / 100.0,
            change_pct,
            ci_low_pct: change_pct,
            ci_high_pct: change_pct,
            p_value: 0.0,
            noise_pct: 1.0,
            segment_before: 5,
            segment_after: 5,
            span: 1,
            method: "test".into(),
            active: true,
            state: "open".into(),
            state_by: None,
            state_at: None,
            note: String::new(),
            detected_at: 0,
            confirmation: None,
        }
    }

    #[test]
    fn the_metrics_of_one_benchmark_at_one_commit_are_one_finding_worst_first() {
        let rows = [
            row(1, "bbbbbbbbbbbb", "ring", "time", 233.0),
            row(2, "bbbbbbbbbbbb", "ring", "throughput", -99.3),
            row(3, "bbbbbbbbbbbb", "ring", "latency", 40.0),
            row(4, "bbbbbbbbbbbb", "ring", "latency_p99", 12.0),
            row(5, "bbbbbbbbbbbb", "bus", "time", 20.0),
            row(6, "aaaaaaaaaaaa", "ring", "time", 15.0),
        ];
        let found = group_open_regressions(&rows);
        assert_eq!(
            (found.findings, found.commits, found.regressions),
            (3, 2, 6)
        );
        let ring = &found.shown[0];
        assert_eq!(
            (ring.benchmark.as_str(), ring.short.as_str()),
            ("ring", "bbbbbbbbbb")
        );
        assert_eq!(ring.subject, "change bbbbbbbbbbbb");
        let named: Vec<&str> = ring.changes.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(
            named,
            ["throughput", "time", "latency"],
            "a 140x fall first"
        );
        assert_eq!((ring.more, ring.worst_id()), (1, 2));
        assert_eq!(found.shown[1].benchmark, "bus");
        assert_eq!(found.shown[2].sha, "aaaaaaaaaaaa", "the older commit last");
        let spans: Vec<usize> = found.shown.iter().map(|f| f.commit_rows).collect();
        assert_eq!(
            spans,
            [2, 0, 1],
            "each commit is named once, beside its findings"
        );
    }

    #[test]
    fn only_the_first_findings_are_shown_but_all_are_counted() {
        let rows: Vec<RegressionRow> = (0..25)
            .map(|i| row(i, &format!("{i:012}"), "b", "time", 10.0))
            .collect();
        let found = group_open_regressions(&rows);
        assert_eq!(found.shown.len(), FINDINGS_SHOWN);
        assert_eq!((found.findings, found.commits), (25, 25));
        assert!(group_open_regressions(&[]).shown.is_empty());
    }

    #[test]
    fn recent_changes_go_both_ways_without_dismissed_or_refuted_ones() {
        let mut rows = vec![
            row(1, "cccccccccccc", "ring", "time", -80.0),
            row(2, "cccccccccccc", "bus", "time", 12.0),
            row(3, "bbbbbbbbbbbb", "ring", "time", 30.0),
            row(4, "aaaaaaaaaaaa", "ring", "time", 25.0),
        ];
        rows[0].kind = "improvement".into();
        rows[0].confirmation = Some("confirmed".into());
        rows[2].state = "false_positive".into();
        rows[3].confirmation = Some("refuted".into());
        let recent = recent_changes(&rows);
        let shown: Vec<(i64, &str, &str)> = recent
            .iter()
            .map(|c| (c.id, c.class, c.status.as_str()))
            .collect();
        assert_eq!(
            shown,
            [(1, "better", "open, confirmed"), (2, "worse", "open")]
        );
        assert_eq!(recent[0].change, "-80.0 %");
    }
}
