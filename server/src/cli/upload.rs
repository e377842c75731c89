//! `kymo upload`: results produced elsewhere (CI) sent to the server: a commit's results into
//! its history, or, with `--pull-request`, a pull request's head compared with its base and
//! published on the request, never stored in the branch's history.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use kymo_core::format::{FormatName, parse_criterion_dir, parse_output};
use kymo_core::model::{CommitSha, MachineFingerprint};
use kymo_core::protocol::{SuiteUpload, UploadAccepted, UploadRequest, query_value};
use kymo_core::pull_upload::{PullUploadAccepted, PullUploadRequest};
use kymo_worker::fingerprint::{detect_environment, detect_specs};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ci_env::{CiPull, detect};
use super::{ServerArg, blocking, client, progress};

#[derive(Debug, Args)]
pub struct UploadArgs {
    #[command(flatten)]
    pub server: ServerArg,
    #[arg(long)]
    pub repo: String,
    /// The commit the results belong to: a sha (full or short), branch or tag. With
    /// `--pull-request`, its head [default: from the CI's environment, else this clone's HEAD].
    #[arg(long)]
    pub commit: Option<String>,
    /// The results' format: kymo, criterion, bmf, hyperfine, google-benchmark, go-bench,
    /// libtest, pytest-benchmark or gungraun.
    #[arg(long, default_value = "kymo")]
    pub format: String,
    /// Attribute the results to this registered machine instead of this one.
    #[arg(long)]
    pub machine: Option<String>,
    /// The results are a pull (merge) request's head, `N` or `auto` (from the CI's
    /// environment): they are compared with the base's and the verdict is posted on the
    /// request (a commit status and one comment); nothing enters the branch's history.
    #[arg(long, value_name = "N|auto")]
    pub pull_request: Option<String>,
    /// The branch the pull request merges into [default: from the CI's environment, else
    /// the tracked branch].
    #[arg(long, requires = "pull_request")]
    pub base_branch: Option<String>,
    /// The merge base of the head with the base branch [default: from the CI's environment,
    /// else computed in this clone, else the base branch's head].
    #[arg(long, requires = "pull_request")]
    pub merge_base: Option<String>,
    /// The base's results, measured by this job on this runner (same format as the head's);
    /// without it, the base's results stored from this machine fingerprint are used.
    #[arg(long, requires = "pull_request")]
    pub base_results: Option<PathBuf>,
    /// Where the pull request lives: github, gitlab or gitea [default: from the CI's
    /// environment, else the repository's commit-status forge].
    #[arg(long, requires = "pull_request")]
    pub forge: Option<String>,
    /// The pull request's title [default: from the CI's environment].
    #[arg(long, requires = "pull_request")]
    pub title: Option<String>,
    /// A results file, or a directory of them (one suite per file); for criterion, its
    /// output directory (`target/criterion`).
    pub path: PathBuf,
}

pub async fn run(args: UploadArgs) -> anyhow::Result<()> {
    let format = format_named(&args.format)?;
    let machine = args
        .machine
        .as_deref()
        .map(MachineFingerprint::parse)
        .transpose()?;
    let suites = read_suites(&args.path, format)?;
    if args.pull_request.is_some() {
        return pull_request(args, format, machine, suites).await;
    }
    let Some(commit) = args.commit.clone() else {
        bail!(
            "name the commit the results belong to with --commit (or upload a pull request's head with --pull-request N)"
        );
    };
    let request = UploadRequest {
        commit,
        specs: machine.is_none().then(detect_specs),
        machine,
        environment: detect_environment(),
        suites,
    };
    let path = format!("/repos/{}/results", args.repo);
    let accepted: UploadAccepted = send(&args.server, path, &request).await?;
    println!(
        "stored {} measurements as run {} of machine {}",
        accepted.measurements, accepted.run, accepted.machine
    );
    Ok(())
}

/// Uploads a pull request's head (and its base's results, with `--base-results`), prints
/// where the verdict is and, when the server lets this token read it, the compare table.
async fn pull_request(
    args: UploadArgs,
    format: FormatName,
    machine: Option<MachineFingerprint>,
    suites: Vec<SuiteUpload>,
) -> anyhow::Result<()> {
    let ci = detect(&|name| std::env::var(name).ok());
    let number = pull_number(args.pull_request.as_deref().unwrap_or("auto"), &ci)?;
    let clone = git2::Repository::discover(".").ok();
    let head = match args.commit.as_deref().or(ci.head.as_deref()) {
        Some(spec) => full_sha(spec, clone.as_ref())?,
        None => full_sha("HEAD", clone.as_ref())
            .context("no head commit: pass --commit SHA (the pull request's head)")?,
    };
    let base_branch = args.base_branch.clone().or(ci.base_branch.clone());
    let merge_base = match args.merge_base.as_deref().or(ci.merge_base.as_deref()) {
        Some(spec) => Some(full_sha(spec, clone.as_ref())?),
        None => clone
            .as_ref()
            .zip(base_branch.as_deref())
            .and_then(|(clone, branch)| local_merge_base(clone, &head, branch)),
    };
    let base_suites = match &args.base_results {
        Some(path) => Some(read_suites(path, format)?),
        None => None,
    };
    let request = PullUploadRequest {
        provider: args.forge.clone().or(ci.forge.map(str::to_owned)),
        head,
        base_branch,
        merge_base,
        title: args.title.clone().or(ci.title.clone()),
        author: ci.author.clone(),
        specs: machine.is_none().then(detect_specs),
        machine,
        environment: detect_environment(),
        suites,
        base_suites,
    };
    let path = format!("/repos/{}/pulls/{number}/results", query_value(&args.repo));
    let accepted: PullUploadAccepted = send(&args.server, path, &request).await?;
    println!(
        "pull request #{}: {} compared with {} ({}) on machine {}\n{}",
        accepted.pull_request,
        request.head.short(),
        accepted.base.short(),
        accepted.baseline,
        accepted.machine,
        accepted.url
    );
    let view_path = format!(
        "/repos/{}/comparisons/{}",
        query_value(&args.repo),
        accepted.comparison
    );
    let server = args.server.clone();
    // The table is a courtesy: a private server may not let an upload token read it.
    if let Ok(view) = blocking(move || client(&server).get::<serde_json::Value>(&view_path)).await {
        super::compare::print_table(&view["report"], false, std::io::stdout().is_terminal());
    }
    Ok(())
}

/// The pull request's number: the one given, or the CI's with `auto`.
fn pull_number(given: &str, ci: &CiPull) -> anyhow::Result<i64> {
    if given != "auto" {
        return given
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("--pull-request {given:?}: give its number, or auto"));
    }
    ci.number.with_context(|| match ci.ci {
        Some(ci) => format!(
            "{ci} names no pull request here (is the job run for one?): pass --pull-request N"
        ),
        None => "no CI environment names a pull request: pass --pull-request N".to_owned(),
    })
}

/// `spec` as a full sha: as given when it is one, else resolved in the local clone.
fn full_sha(spec: &str, clone: Option<&git2::Repository>) -> anyhow::Result<CommitSha> {
    if let Ok(sha) = CommitSha::parse(spec) {
        return Ok(sha);
    }
    let clone = clone.with_context(|| {
        format!("{spec:?} is not a full sha, and this directory is no git clone to resolve it in")
    })?;
    let commit = (clone.revparse_single(spec))
        .and_then(|object| object.peel_to_commit())
        .with_context(|| format!("{spec:?} names no commit of this clone"))?;
    Ok(CommitSha::parse(&commit.id().to_string())?)
}

/// The merge base of `head` with the base branch as this clone knows it (`origin/BRANCH`, or
/// `BRANCH`), when the clone has both (a shallow CI checkout may not).
fn local_merge_base(clone: &git2::Repository, head: &CommitSha, branch: &str) -> Option<CommitSha> {
    let head = git2::Oid::from_str(head.as_str()).ok()?;
    let base = [
        format!("refs/remotes/origin/{branch}"),
        format!("refs/heads/{branch}"),
    ]
    .iter()
    .find_map(|name| clone.refname_to_id(name).ok())?;
    let merge_base = clone.merge_base(head, base).ok()?;
    CommitSha::parse(&merge_base.to_string()).ok()
}

fn format_named(name: &str) -> anyhow::Result<FormatName> {
    FormatName::parse(name).with_context(|| {
        let known: Vec<&str> = FormatName::ALL.iter().map(|f| f.as_str()).collect();
        format!("unknown format {name:?}; use one of {}", known.join(", "))
    })
}

/// The suites in `path`: criterion's output directory (one suite), or each results file.
fn read_suites(path: &Path, format: FormatName) -> anyhow::Result<Vec<SuiteUpload>> {
    if format == FormatName::Criterion {
        // criterion writes a directory (`target/criterion`): one suite.
        let results = parse_criterion_dir(path).with_context(|| format!("{}", path.display()))?;
        return Ok(vec![SuiteUpload {
            suite: "criterion".into(),
            results,
        }]);
    }
    let files = result_files(path, format)?;
    let bar = progress::bar(files.len() as u64, "parsing");
    let mut suites = Vec::new();
    for file in bar.wrap_iter(files.into_iter()) {
        let bytes =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let results =
            parse_output(format, &bytes).with_context(|| format!("{}", file.display()))?;
        let suite = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "upload".into());
        suites.push(SuiteUpload { suite, results });
    }
    bar.finish_and_clear();
    Ok(suites)
}

/// Posts an upload; the same results uploaded again (a retry after a timeout, a re-run CI
/// step) are stored once: the key is their digest.
async fn send<B, T>(server: &ServerArg, path: String, body: &B) -> anyhow::Result<T>
where
    B: Serialize,
    T: DeserializeOwned + Send + 'static,
{
    let bytes = serde_json::to_vec(body)?;
    let key = format!(
        "upload-{}",
        kymo_core::webhook::sign_hmac_sha256("", &bytes)
    );
    let body: serde_json::Value = serde_json::from_slice(&bytes)?;
    let waiting = progress::spinner("uploading".to_owned());
    let server = server.clone();
    let answer = blocking(move || {
        let client = client(&server);
        match client.post_with_key(&path, &body, Some(&key)) {
            // The server gave up waiting, perhaps after storing the results: ask again.
            Err(err) if refused_with(&err, 408) => client.post_with_key(&path, &body, Some(&key)),
            other => other,
        }
    })
    .await;
    waiting.finish_and_clear();
    answer
}

/// Whether `err` is the server's refusal with `status`.
fn refused_with(err: &anyhow::Error, status: u16) -> bool {
    err.downcast_ref::<kymo_worker::client::Refused>()
        .is_some_and(|refused| refused.status == status)
}

/// The files to upload: `path` itself, or the files of the directory it names (`.json`
/// files for JSON formats, every file for the text formats).
fn result_files(path: &Path, format: FormatName) -> anyhow::Result<Vec<PathBuf>> {
    let text_format = matches!(format, FormatName::GoBench | FormatName::Libtest);
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && (text_format || p.extension().is_some_and(|x| x == "json")))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{} holds no result files", path.display());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_number_is_the_one_given_or_the_cis() {
        let ci = CiPull {
            ci: Some("GitHub Actions"),
            number: Some(7),
            ..CiPull::default()
        };
        assert_eq!(pull_number("12", &ci).unwrap(), 12);
        assert_eq!(pull_number("auto", &ci).unwrap(), 7);
        for bad in ["0", "-1", "seven", ""] {
            assert!(pull_number(bad, &ci).is_err(), "{bad}");
        }
        let none = pull_number("auto", &CiPull::default())
            .unwrap_err()
            .to_string();
        assert!(none.contains("--pull-request N"), "{none}");
    }

    #[test]
    fn a_short_head_is_resolved_in_the_clone_and_a_full_one_needs_none() {
        let full = "a".repeat(40);
        assert_eq!(full_sha(&full, None).unwrap().as_str(), full);
        assert!(full_sha("HEAD", None).is_err());
    }

    /// Commits an empty tree on `parents` (no reference moves); returns its id.
    fn commit(repo: &git2::Repository, parents: &[git2::Oid], message: &str) -> git2::Oid {
        let tree = repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        let sig = git2::Signature::now("Ada", "ada@example.com").unwrap();
        let parents: Vec<git2::Commit> = parents
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(None, &sig, &sig, message, &tree, &parents)
            .unwrap()
    }

    #[test]
    fn the_merge_base_is_found_in_a_clone_that_has_the_base_branch() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        let root = commit(&repo, &[], "root");
        let fork_point = commit(&repo, &[root], "fork point");
        let main_moved_on = commit(&repo, &[fork_point], "main moved on");
        let head = commit(&repo, &[fork_point], "the pull request");
        repo.reference("refs/remotes/origin/main", main_moved_on, true, "")
            .unwrap();
        repo.reference("refs/heads/topic", head, true, "").unwrap();
        repo.set_head("refs/heads/topic").unwrap();
        let head_sha = full_sha("HEAD", Some(&repo)).unwrap();
        assert_eq!(head_sha.as_str(), head.to_string());
        let short = &head.to_string()[..8];
        assert_eq!(full_sha(short, Some(&repo)).unwrap(), head_sha);
        assert_eq!(
            local_merge_base(&repo, &head_sha, "main").unwrap().as_str(),
            fork_point.to_string()
        );
        assert_eq!(local_merge_base(&repo, &head_sha, "develop"), None);
        assert!(full_sha("no-such-ref", Some(&repo)).is_err());
    }
}
