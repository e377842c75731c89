//! `kymo demo`: a whole product tour with no set-up. It writes a git repository whose commits
//! switch real kernel variants of bench-kernels (so some commits really are slower, and a later
//! one fixes one of them), benchmarks every commit with the embedded worker, and serves the
//! dashboard.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use kymo_core::db::{JobReason, LeaseSettings};

use self::story::{history, kymo_toml, variants_toml};
use crate::git;
use crate::serve::{ServeOptions, start};

mod confirm;
mod story;

/// Jobs the demo looks at: its history's, and the confirmations that follow.
const JOBS_LISTED: i64 = 500;

/// What `kymo demo` was asked to do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub listen: SocketAddr,
    pub data: PathBuf,
    pub serve: bool,
    /// Whether changes are measured again before they are reported (as `kymo serve` does):
    /// a confirmation re-runs only the flagged benchmarks, some seconds a change.
    pub confirm: bool,
}

/// Writes the demo repository; returns how many commits it has.
fn write_repository(dir: &Path, kymo: &Path) -> anyhow::Result<usize> {
    let repo =
        git2::Repository::init_opts(dir, git2::RepositoryInitOptions::new().initial_head("main"))?;
    let history = history();
    let mut parent: Option<git2::Oid> = None;
    // Fixed, increasing commit times keep the demo history reproducible.
    let start = 1_790_000_000;
    for (i, commit) in history.iter().enumerate() {
        std::fs::write(dir.join("variants.toml"), variants_toml(commit))?;
        std::fs::write(dir.join("kymo.toml"), kymo_toml(kymo))?;
        std::fs::write(
            dir.join("NOTES.md"),
            format!("# kymo demo\n\nstep {i}: {}\n", commit.message),
        )?;
        let mut index = repo.index()?;
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
        index.write()?;
        let tree = repo.find_tree(index.write_tree()?)?;
        let when = git2::Time::new(start + i as i64 * 3_600, 0);
        let sig = git2::Signature::new("Kymo Demo", "demo@kymo.invalid", &when)?;
        let parents: Vec<git2::Commit> = parent
            .map(|p| repo.find_commit(p))
            .transpose()?
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        parent = Some(repo.commit(Some("HEAD"), &sig, &sig, commit.message, &tree, &parents)?);
    }
    Ok(history.len())
}

/// Marks a directory as the demo's own, so that a later run may clear it.
const MARKER: &str = ".kymo-demo";

fn prepare_data_dir(data: &Path) -> anyhow::Result<()> {
    if data.exists() {
        let ours = data.join(MARKER).exists();
        let empty = std::fs::read_dir(data)?.next().is_none();
        if !ours && !empty {
            bail!(
                "{} exists and was not made by `kymo demo`; choose another --data directory",
                data.display()
            );
        }
        if ours {
            std::fs::remove_dir_all(data)
                .with_context(|| format!("cannot clear the old demo in {}", data.display()))?;
        }
    }
    std::fs::create_dir_all(data)?;
    std::fs::write(
        data.join(MARKER),
        "made by kymo demo; deleted by the next one\n",
    )?;
    Ok(())
}

/// Runs the demo.
pub async fn demo(options: DemoOptions) -> anyhow::Result<()> {
    let data = std::path::absolute(&options.data)?;
    prepare_data_dir(&data)?;
    let kymo = std::env::current_exe().context("cannot find the kymo executable")?;
    let repo_dir = data.join("demo-repo");
    std::fs::create_dir_all(&repo_dir)?;
    let commits = write_repository(&repo_dir, &kymo)?;

    let running = start(ServeOptions {
        db: data.join("kymo.db"),
        listen: options.listen,
        embedded_worker: true,
        leases: LeaseSettings::default(),
        data_dir: data.join("kymo-data"),
        worker_labels: Vec::new(),
        header_read_timeout: crate::serve::HEADER_READ_TIMEOUT,
        merge_when_idle: Some(crate::serve::MERGE_WHEN_IDLE),
        access: Default::default(),
        public_url: None,
        // The demo runs only the suites it wrote itself.
        allow_unconfined_suites: true,
        suite_maximums: Default::default(),
    })
    .await?;
    let state = running.state.clone();
    let repo = state
        .db
        .create_repository(
            "kernels",
            &repo_dir.display().to_string(),
            "main",
            Default::default(),
            state.now(),
        )
        .await?;
    state
        .db
        .set_confirm_changes(repo.id, options.confirm)
        .await?;
    git::sync_history(&state, &repo).await?;
    // Oldest first: the queue runs jobs in the order they were queued.
    let history = state.db.history(repo.id, commits as i64, 0).await?;
    for row in history.iter().rev() {
        state
            .db
            .enqueue_commit(
                repo.id,
                row.id,
                JobReason::Backfill,
                state.leases,
                state.now(),
            )
            .await?;
    }

    let bar = ProgressBar::new(commits as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} benchmarking {pos}/{len} commits [{bar:30}] {elapsed}",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    loop {
        let jobs = state.db.jobs(JOBS_LISTED).await?;
        let done = jobs
            .iter()
            .filter(|j| j.reason == JobReason::Backfill.as_str())
            .filter(|j| matches!(j.state.as_str(), "succeeded" | "failed"))
            .count();
        bar.set_position(done as u64);
        if done >= commits {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bar.finish_and_clear();
    // The last completion's analysis may still be running: settle it (and start the
    // confirmation of what it finds) before reporting.
    let created = crate::analysis::analyse_repository(&state, repo.id).await?;
    crate::analysis::follow_up(&state, repo.id, &created).await?;
    confirm::wait_for_confirmations(&state, repo.id).await?;
    let jobs = state.db.jobs(JOBS_LISTED).await?;
    let failed: Vec<_> = jobs.iter().filter(|j| j.state == "failed").collect();
    let confirmed = if options.confirm {
        " and confirmed their changes"
    } else {
        ""
    };
    println!(
        "benchmarked {commits} commits{confirmed} in {:.0}s ({} jobs failed)",
        started.elapsed().as_secs_f64(),
        failed.len()
    );
    for job in &failed {
        println!(
            "  job {} failed: {}",
            job.id,
            job.error.as_deref().unwrap_or("?")
        );
    }
    if options.confirm {
        confirm::print_confirmations(&state, &repo).await?;
    } else {
        println!("confirmation: off (without --no-confirm each change is measured again first)");
    }
    print_changes(&state, &repo, running.address).await?;
    print_story_tally(&state, &repo).await?;
    if options.serve {
        println!(
            "kymo is serving the demo at http://{}/repos/kernels (Ctrl-C stops it)",
            running.address
        );
        running.run_until_signal().await
    } else {
        running.stop().await
    }
}

/// Prints the change points the analysis found, grouped by the commit that caused them.
async fn print_changes(
    state: &crate::AppState,
    repo: &kymo_core::db::RepositoryRow,
    address: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let changes = confirm::standing_changes(state, repo).await?;
    let regressions = changes.iter().filter(|c| c.kind == "regression").count();
    println!(
        "found {regressions} regressions and {} improvements:",
        changes.len() - regressions
    );
    let mut commits: Vec<&str> = changes.iter().map(|c| c.sha.as_str()).collect();
    commits.dedup();
    for sha in commits {
        let here: Vec<_> = changes.iter().filter(|c| c.sha == sha).collect();
        println!("  {}  {}", &sha[..10], summary_line(&here[0].message));
        for c in here.iter().take(4) {
            let name = c.benchmark.split('{').next().unwrap_or_default();
            println!(
                "      {:+8.1} %  {:<11}  {name} {}",
                c.change_pct, c.kind, c.metric
            );
        }
        if here.len() > 4 {
            println!("      … and {} more", here.len() - 4);
        }
    }
    println!("details: http://{address}/repos/{}/regressions", repo.name);
    Ok(())
}

/// Checks the analysis against the story: every commit that changed a variant should be
/// found, and no other commit flagged.
async fn print_story_tally(
    state: &crate::AppState,
    repo: &kymo_core::db::RepositoryRow,
) -> anyhow::Result<()> {
    let changes = confirm::standing_changes(state, repo).await?;
    let flagged: std::collections::BTreeSet<&str> =
        changes.iter().map(|c| summary_line(&c.message)).collect();
    let story: Vec<&str> = history()
        .iter()
        .filter(|c| c.story)
        .map(|c| c.message)
        .collect();
    let found = story.iter().filter(|m| flagged.contains(*m)).count();
    let neutral: Vec<&&str> = flagged.iter().filter(|m| !story.contains(m)).collect();
    println!(
        "story commits found: {found} of {}; neutral commits flagged: {}",
        story.len(),
        neutral.len()
    );
    for message in story.iter().filter(|m| !flagged.contains(*m)) {
        println!("  missed: {message}");
    }
    for message in neutral {
        println!("  flagged without a change: {message}");
    }
    Ok(())
}

fn summary_line(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_the_demo_did_not_make_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious.txt"), "keep me").unwrap();
        let err = prepare_data_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not made by `kymo demo`"), "{err}");
        assert!(dir.path().join("precious.txt").exists());

        let ours = dir.path().join("demo");
        prepare_data_dir(&ours).unwrap();
        std::fs::write(ours.join("old.db"), "stale").unwrap();
        prepare_data_dir(&ours).unwrap();
        assert!(!ours.join("old.db").exists(), "a demo directory is cleared");
        assert!(ours.join(MARKER).exists());
    }
}
