//! The JSON bodies exchanged over HTTP between the CLI, workers and the server.

use serde::{Deserialize, Serialize};

use crate::credentials::{CredentialSummary, GitCredential};
use crate::model::{CommitSha, Environment, MachineFingerprint, MachineSpecs};
use crate::results::SuiteResults;

/// `POST /api/v1/repos`
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRepository {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub branch: Option<String>,
    /// The shared secret of the repository's push webhook.
    #[serde(default)]
    pub webhook_secret: Option<String>,
    /// Poll the remote this often (seconds) for hosts that cannot send webhooks.
    #[serde(default)]
    pub poll_seconds: Option<i64>,
    /// Comma-separated labels a machine must carry to run this repository's jobs.
    #[serde(default)]
    pub machine_labels: Option<String>,
    /// A `kymo.toml` kept on the server: the suites of commits that carry none of their own.
    #[serde(default)]
    pub suites: Option<String>,
    /// Once cloned, queue the last N first-parent commits of the branch (`kymo run --last N`).
    #[serde(default)]
    pub backfill: Option<u32>,
    /// How to authenticate to a private remote (a password in `url` is moved here).
    #[serde(default)]
    pub credential: Option<GitCredential>,
    /// `false` cuts the network of every suite of the repository, whatever a commit's
    /// `kymo.toml` says; absent or `true`: each suite decides (`network` in kymo.toml).
    #[serde(default)]
    pub network: Option<bool>,
}

/// `PUT /api/v1/repos/{repo}/suites`: the `kymo.toml` kept on the server for the repository.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredSuites {
    /// The file's text; it is validated as a commit's own `kymo.toml` is.
    pub toml: String,
}

/// `POST /api/v1/repos/{repo}/backfill`: measure history. Exactly one of `last` and `from`;
/// the commits are the tracked branch's first-parent chain (of `to`, when given).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// The last N first-parent commits of the tracked branch (or of `to`).
    #[serde(default)]
    pub last: Option<u32>,
    /// The first-parent commits after this commit-ish, up to and including `to`.
    #[serde(default)]
    pub from: Option<String>,
    /// Where the range ends: a commit-ish; the tracked branch's head when absent.
    #[serde(default)]
    pub to: Option<String>,
    /// Keep every K-th commit of the range (the newest always), to thin a long history.
    #[serde(default)]
    pub every: Option<u32>,
}

/// The answer to a backfill: the commits it chose (newest first) and the jobs waiting for them.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BackfillQueued {
    pub commits: Vec<CommitSha>,
    /// Jobs queued now or already waiting for those commits.
    pub jobs: Vec<i64>,
    /// (commit, machine) pairs left alone because that machine has measured the commit already.
    pub skipped: usize,
    /// (commit, machine) pairs whose earlier jobs all failed, queued again (counted in `jobs`).
    #[serde(default)]
    pub requeued: usize,
}

/// `POST /api/v1/repos/{repo}/settings`: changes a repository's settings; what is absent
/// stays as it is.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RepositoryUpdate {
    /// A new credential for a private remote, checked by a fetch before it is stored.
    #[serde(default)]
    pub credential: Option<GitCredential>,
    /// Remove the stored credential.
    #[serde(default)]
    pub clear_credential: bool,
    /// `false` cuts the network of every suite, whatever a commit's `kymo.toml` says; `true`
    /// lets each suite decide again.
    #[serde(default)]
    pub network: Option<bool>,
    /// Forge logins whose pull requests from forks are measured (comma-separated; empty:
    /// none). Their code runs on the benchmark machines.
    #[serde(default)]
    pub fork_authors: Option<String>,
    /// `always` (a comment on every measured pull request) or `changes` (only where
    /// something changed).
    #[serde(default)]
    pub pull_comments: Option<String>,
    /// `true` (the default): a change is measured again before it is announced; `false`:
    /// announced as soon as it is found.
    #[serde(default)]
    pub confirm: Option<bool>,
    /// Seconds the rounds of a try run or pull request may take (10-86400): they stop
    /// sooner once every benchmark is decided.
    #[serde(default)]
    pub budget_seconds: Option<i64>,
}

/// A repository's settings as the API shows them: secrets are never part of it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RepositorySettingsView {
    pub name: String,
    /// The URL with any `user:token@` redacted.
    pub url: String,
    pub credential: Option<CredentialSummary>,
    /// `false` when every suite runs without the network; `true` when each suite decides.
    pub network: bool,
    /// Who may run code from forks, and when pull requests get a comment.
    pub pulls: crate::db::PullSettings,
    /// Whether changes are confirmed (measured again) before they are announced.
    pub confirm: bool,
    /// Seconds the rounds of a try run or pull request may take.
    pub budget_seconds: i64,
}

/// `POST /api/v1/repos/{repo}/runs`
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// A sha, branch or tag; the tracked branch's head when absent.
    #[serde(default)]
    pub commit: Option<String>,
}

/// The answer to a run request: the resolved commit and the jobs created for it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunQueued {
    pub commit: CommitSha,
    pub jobs: Vec<i64>,
}

/// The results of one suite of one run, as a worker or `kymo upload` sends them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuiteUpload {
    pub suite: String,
    pub results: SuiteResults,
}

/// `POST /api/v1/repos/{repo}/results`: results produced outside the queue (CI).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadRequest {
    /// A sha (full or short), branch or tag, resolved as `kymo run` resolves it.
    pub commit: String,
    /// Attribute the results to this registered machine instead of the uploader's.
    #[serde(default)]
    pub machine: Option<MachineFingerprint>,
    /// The uploading machine's specs; required when `machine` is absent.
    #[serde(default)]
    pub specs: Option<MachineSpecs>,
    #[serde(default)]
    pub environment: Environment,
    pub suites: Vec<SuiteUpload>,
}

/// The answer to an upload.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UploadAccepted {
    pub run: i64,
    pub machine: MachineFingerprint,
    pub measurements: usize,
}

/// `POST /api/v1/worker/claim`: a worker asks for work and says who it is.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    pub specs: MachineSpecs,
    pub environment: Environment,
    /// Labels the worker offers (`kymo worker --label`); repositories may require some.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// The answer to a claim: a job with its lease, or nothing to do.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimResponse {
    pub job: Option<ClaimedJob>,
}

/// A job handed to a worker. The lease must be renewed by heartbeat before it expires, or
/// the job returns to the queue and the worker's later completion is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimedJob {
    pub id: i64,
    pub lease_id: String,
    pub lease_seconds: i64,
    pub repository: String,
    pub url: String,
    pub commit: CommitSha,
    /// The repository's `kymo.toml` kept on the server, for a commit without its own.
    #[serde(default)]
    pub stored_suites: Option<String>,
    /// How to authenticate to a private remote; absent for public ones.
    #[serde(default)]
    pub credential: Option<GitCredential>,
    /// `false` when the repository cuts the network of all its suites: the worker runs every
    /// suite as if its `kymo.toml` said `network = false`.
    #[serde(default = "network_allowed")]
    pub network: bool,
    /// Present when the job compares `commit` (the head) with a base, interleaved: the
    /// worker answers with [`JobOutcome::Compared`].
    #[serde(default)]
    pub comparison: Option<ComparisonSpec>,
}

fn network_allowed() -> bool {
    true
}

/// A comparison job: measure `base` and the job's commit alternately, base first, on this one
/// machine: `rounds` times each, or, with a budget, until every benchmark is decided (see
/// [`crate::interleaved`]), the budget is spent, or `rounds` rounds ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ComparisonSpec {
    pub base: CommitSha,
    pub rounds: u32,
    /// Seconds the rounds may take (builds aside): present, the comparison is adaptive and
    /// `rounds` is its most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<u32>,
    /// Where to fetch the head from when no branch holds it (a pull request from a fork).
    #[serde(default)]
    pub head_ref: Option<String>,
    /// What to measure of each side; empty: every suite, all of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selection: Vec<SuiteSelection>,
}

/// One suite a comparison measures, and of it only `benchmarks` when there are any: the
/// worker names them to the suite's command in [`ONLY_BENCHMARKS_ENV`], and a command that
/// cannot run a subset runs everything (the verdict reads what it needs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuiteSelection {
    pub suite: String,
    /// Benchmark names (without parameters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub benchmarks: Vec<String>,
    /// The metrics whose verdicts decide its benchmarks (empty: every metric). An adaptive
    /// comparison stops measuring a benchmark once these are decided: a confirmation names
    /// the metric of its change, and the verdicts of the others need not hold it up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<String>,
    /// The changes a confirmation measures again: each benchmark × metric is judged against
    /// its claim (see [`crate::stats::sequential::SequentialPlan::refuting`]), so a noisy
    /// benchmark's rounds stop once they rule out the change claimed, not only ±2 %.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Claim>,
}

/// A change a confirmation measures again: what the history's analysis found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// The benchmark's key (name and parameters), as a verdict names it.
    pub benchmark: String,
    pub metric: String,
    /// The change found, in percent.
    pub change_pct: f64,
}

/// The environment variable that names the benchmarks a suite's command need run, one per
/// line, when a comparison measures only some (`kymo kernels` reads it; others may).
pub const ONLY_BENCHMARKS_ENV: &str = "KYMO_ONLY_BENCHMARKS";

/// The same benchmarks as one regular expression that matches exactly their names, for a
/// harness that filters by pattern: `cargo bench -- "$KYMO_BENCH_FILTER"` runs only them under
/// criterion (which matches its `group/function/value` ids), and everything when it is unset.
pub const BENCH_FILTER_ENV: &str = "KYMO_BENCH_FILTER";

/// The pattern of [`BENCH_FILTER_ENV`]: `^(name|name)$`, each name's regex syntax escaped (a
/// plain group, so that POSIX extended expressions read it as Rust's regex crate does).
pub fn bench_filter(names: &[String]) -> String {
    let escaped: Vec<String> = (names.iter())
        .map(|name| {
            name.chars()
                .flat_map(|c| {
                    let special = "\\.+*?()|[]{}^$#&-~".contains(c);
                    special.then_some('\\').into_iter().chain([c])
                })
                .collect()
        })
        .collect();
    format!("^({})$", escaped.join("|"))
}

impl SuiteSelection {
    /// Adds `other` to a selection: a suite selected twice runs the benchmarks of both, or
    /// all of it when either wanted all.
    pub fn widen(selection: &mut Vec<SuiteSelection>, other: &SuiteSelection) {
        let Some(own) = selection.iter_mut().find(|s| s.suite == other.suite) else {
            selection.push(other.clone());
            return;
        };
        widen_names(&mut own.benchmarks, &other.benchmarks);
        widen_names(&mut own.metrics, &other.metrics);
        for claim in &other.claims {
            let same = |c: &&mut Claim| c.benchmark == claim.benchmark && c.metric == claim.metric;
            match own.claims.iter_mut().find(same) {
                // Two changes of one series at one commit pair: the smaller is the one that
                // is harder to rule out.
                Some(own) if own.change_pct.abs() > claim.change_pct.abs() => *own = claim.clone(),
                Some(_) => {}
                None => own.claims.push(claim.clone()),
            }
        }
    }

    /// The change claimed of a benchmark × metric of `suite`, if a confirmation measures it.
    pub fn claim(
        selection: &[SuiteSelection],
        suite: &str,
        benchmark: &str,
        metric: &str,
    ) -> Option<f64> {
        (selection.iter().filter(|s| s.suite == suite))
            .flat_map(|s| &s.claims)
            .find(|c| c.benchmark == benchmark && c.metric == metric)
            .map(|c| c.change_pct)
    }

    /// Whether measuring `selection` measures everything `wanted` asks for (an empty
    /// selection measures everything), and waits for every metric it waits for.
    pub fn covers(selection: &[SuiteSelection], wanted: &SuiteSelection) -> bool {
        selection.is_empty()
            || selection.iter().any(|s| {
                s.suite == wanted.suite
                    && includes(&s.benchmarks, &wanted.benchmarks)
                    && includes(&s.metrics, &wanted.metrics)
            })
    }

    /// Whether `metric`'s verdict decides a benchmark of this selection.
    pub fn decides(&self, metric: &str) -> bool {
        self.metrics.is_empty() || self.metrics.iter().any(|m| m == metric)
    }
}

/// Adds `other`'s names to `own` (empty: all of them, which wins).
fn widen_names(own: &mut Vec<String>, other: &[String]) {
    if own.is_empty() || other.is_empty() {
        own.clear();
        return;
    }
    for name in other {
        if !own.contains(name) {
            own.push(name.clone());
        }
    }
}

/// Whether the names `have` include all of `want` (empty: all names).
fn includes(have: &[String], want: &[String]) -> bool {
    have.is_empty() || (!want.is_empty() && want.iter().all(|w| have.contains(w)))
}

/// One round of a comparison: every suite of the base, then every suite of the head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ComparedRound {
    pub base: Vec<SuiteUpload>,
    pub head: Vec<SuiteUpload>,
}

/// `POST /api/v1/repos/{repo}/try`: measure `commit` against its merge base with the tracked
/// branch (or against `base`), interleaved on one machine.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TryRequest {
    /// A branch, tag or sha of the remote, fetched first.
    pub commit: String,
    /// The baseline: a commit-ish; the merge base with the tracked branch when absent.
    #[serde(default)]
    pub base: Option<String>,
    /// Alternations of base and head (1-40). Given without a budget: exactly that many.
    /// Otherwise the comparison is adaptive: rounds until every benchmark is decided, the
    /// budget is spent, or this many (40 when absent) ran.
    #[serde(default)]
    pub rounds: Option<i64>,
    /// Seconds the rounds may take (10-86400); the repository's budget when absent.
    #[serde(default)]
    pub budget_seconds: Option<i64>,
}

/// The answer to a try request.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TryQueued {
    pub comparison: i64,
    pub job: i64,
    pub base: CommitSha,
    pub head: CommitSha,
    /// How the base was chosen.
    pub baseline: String,
}

/// `POST /api/v1/worker/jobs/{id}/heartbeat`
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    pub lease_id: String,
    /// What the job is doing now (fetching, building, running suite N of M), for the queue.
    #[serde(default)]
    pub phase: Option<String>,
}

/// Where the suites of a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConfigSource {
    /// The commit's own `kymo.toml`.
    Commit,
    /// The `kymo.toml` kept on the server for the repository.
    Server,
}

impl ConfigSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigSource::Commit => "commit",
            ConfigSource::Server => "server",
        }
    }
}

/// The configuration a run used: its source and the SHA-256 (hex) of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigUsed {
    pub source: ConfigSource,
    pub sha256: String,
}

/// `POST /api/v1/worker/jobs/{id}/complete`
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    pub lease_id: String,
    pub environment: Environment,
    pub outcome: JobOutcome,
}

/// How a job ended on the worker.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "status", rename_all = "lowercase", deny_unknown_fields)]
pub enum JobOutcome {
    Succeeded {
        suites: Vec<SuiteUpload>,
        log: String,
        /// Which `kymo.toml` ran (absent from older workers).
        #[serde(default)]
        config: Option<ConfigUsed>,
    },
    Failed {
        error: String,
        log_tail: String,
    },
    /// A comparison job's rounds, in the order they ran.
    Compared {
        rounds: Vec<ComparedRound>,
        log: String,
    },
}

/// Every API error body.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiErrorBody {
    pub error: String,
}

/// Percent-encodes a value for a URL's query string or path segment (`/` is kept, as the
/// benchmark names that use it are routed as paths).
pub fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The last `max` bytes of a log (or less, to start on a character boundary): what a job
/// keeps of its output.
pub fn log_tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::{SuiteSelection, bench_filter, log_tail};

    #[test]
    fn the_bench_filter_matches_exactly_the_names_with_regex_syntax_escaped() {
        let names = ["encode/16KiB".to_owned(), "a.b+(c)|d$".to_owned()];
        assert_eq!(
            bench_filter(&names),
            "^(encode/16KiB|a\\.b\\+\\(c\\)\\|d\\$)$"
        );
    }

    fn select(suite: &str, benchmarks: &[&str]) -> SuiteSelection {
        SuiteSelection {
            suite: suite.into(),
            benchmarks: benchmarks.iter().map(|b| b.to_string()).collect(),
            metrics: Vec::new(),
            claims: Vec::new(),
        }
    }

    fn deciding(mut selection: SuiteSelection, metrics: &[&str]) -> SuiteSelection {
        selection.metrics = metrics.iter().map(|m| m.to_string()).collect();
        selection
    }

    #[test]
    fn a_selection_waits_for_the_metrics_of_either_side() {
        let time = deciding(select("kernels", &["a"]), &["time"]);
        let mut selection = vec![time.clone()];
        assert!(SuiteSelection::covers(&selection, &time));
        assert!(selection[0].decides("time") && !selection[0].decides("latency"));
        let latency = deciding(select("kernels", &["a"]), &["latency"]);
        assert!(
            !SuiteSelection::covers(&selection, &latency),
            "it would stop before latency is decided"
        );
        assert!(!SuiteSelection::covers(
            &selection,
            &select("kernels", &["a"])
        ));
        SuiteSelection::widen(&mut selection, &latency);
        assert_eq!(selection[0].metrics, ["time", "latency"]);
        assert!(SuiteSelection::covers(&selection, &latency));
        SuiteSelection::widen(&mut selection, &select("kernels", &["b"]));
        assert_eq!(
            selection,
            [select("kernels", &["a", "b"])],
            "every metric wins"
        );
        assert!(selection[0].decides("latency") && selection[0].decides("throughput"));
    }

    #[test]
    fn a_selection_widens_to_what_either_side_wanted() {
        let mut selection = vec![select("kernels", &["a"])];
        SuiteSelection::widen(&mut selection, &select("kernels", &["b", "a"]));
        SuiteSelection::widen(&mut selection, &select("vm", &[]));
        assert_eq!(
            selection,
            vec![select("kernels", &["a", "b"]), select("vm", &[])]
        );
        SuiteSelection::widen(&mut selection, &select("kernels", &[]));
        assert_eq!(selection[0], select("kernels", &[]), "all of it wins");
        SuiteSelection::widen(&mut selection, &select("kernels", &["c"]));
        assert_eq!(selection[0], select("kernels", &[]));
    }

    #[test]
    fn a_selection_covers_only_what_it_measures() {
        let selection = vec![select("kernels", &["a", "b"]), select("vm", &[])];
        assert!(SuiteSelection::covers(
            &selection,
            &select("kernels", &["b"])
        ));
        assert!(SuiteSelection::covers(&selection, &select("vm", &["x"])));
        assert!(SuiteSelection::covers(&selection, &select("vm", &[])));
        assert!(!SuiteSelection::covers(
            &selection,
            &select("kernels", &["c"])
        ));
        assert!(!SuiteSelection::covers(&selection, &select("kernels", &[])));
        assert!(!SuiteSelection::covers(&selection, &select("other", &[])));
        assert!(
            SuiteSelection::covers(&[], &select("other", &[])),
            "empty: everything"
        );
    }

    #[test]
    fn a_log_tail_keeps_the_end_and_never_splits_a_character() {
        assert_eq!(log_tail("hello", 10), "hello");
        assert_eq!(log_tail("hello", 3), "llo");
        assert_eq!(log_tail("aé", 1), "");
        assert_eq!(log_tail("aéb", 2), "b");
    }
}
