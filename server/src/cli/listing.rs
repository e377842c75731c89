//! The listing commands (`kymo repo list`, `kymo jobs`, `kymo machines`): a table for people,
//! `--json` for scripts (the API's JSON, unchanged).

use clap::Args;
use kymo_core::db::{JobRow, MachineRow, RepositorySummary};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{ServerArg, blocking, client};

/// Options every listing command takes.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub server: ServerArg,
}

/// Fetches `path` from the server and prints it as JSON, or as a table through `table`.
async fn list<T>(args: ListArgs, path: &'static str, table: fn(&[T])) -> anyhow::Result<()>
where
    T: DeserializeOwned + Serialize + Send + 'static,
{
    let server = args.server;
    let rows: Vec<T> = blocking(move || client(&server).get(path)).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        table(&rows);
    }
    Ok(())
}

pub async fn repositories(args: ListArgs) -> anyhow::Result<()> {
    list(args, "/repos", |repos: &[RepositorySummary]| {
        if repos.is_empty() {
            println!("no repositories; add one with `kymo repo add NAME PATH_OR_URL`");
            return;
        }
        println!(
            "{:<24} {:<12} {:>8} {:>10}  URL",
            "NAME", "BRANCH", "COMMITS", "BENCHMARKS"
        );
        for r in repos {
            println!(
                "{:<24} {:<12} {:>8} {:>10}  {}",
                r.name,
                r.branch,
                r.commits,
                r.benchmarks,
                kymo_core::credentials::redact_secrets(&r.url)
            );
        }
    })
    .await
}

pub async fn jobs(args: ListArgs) -> anyhow::Result<()> {
    list(args, "/jobs", |jobs: &[JobRow]| {
        if jobs.is_empty() {
            println!("no jobs; queue a commit with `kymo run NAME`");
            return;
        }
        println!(
            "{:>6} {:<10} {:<8} {:<20} {:<10} {:<16} {:>8}  DOING / OUTCOME",
            "ID", "STATE", "WHY", "REPOSITORY", "COMMIT", "MACHINE", "ATTEMPTS"
        );
        for j in jobs {
            // A running job says what it is doing; a failed one why, with the cause its
            // output gave.
            let doing = match (j.state.as_str(), &j.phase, &j.error) {
                ("running", Some(phase), _) => phase.clone(),
                (_, _, Some(error)) => {
                    let error = error.lines().next().unwrap_or("");
                    match &j.cause {
                        Some(cause) => format!("{error}: {cause}"),
                        None => error.to_owned(),
                    }
                }
                _ => String::new(),
            };
            println!(
                "{:>6} {:<10} {:<8} {:<20} {:<10} {:<16} {:>8}  {doing}",
                j.id,
                j.state,
                j.reason,
                j.repository,
                &j.sha[..j.sha.len().min(10)],
                j.machine.as_deref().unwrap_or("-"),
                j.attempts
            );
        }
    })
    .await
}

pub async fn machines(args: ListArgs) -> anyhow::Result<()> {
    list(args, "/machines", |machines: &[MachineRow]| {
        if machines.is_empty() {
            println!(
                "no machines; `kymo serve` runs a worker, or start one with `kymo worker --server URL --token TOKEN`"
            );
            return;
        }
        println!(
            "{:<16} {:<20} {:>5} {:>7}  {:<8} JOB",
            "FINGERPRINT", "NAME", "CORES", "MEMORY", "ARCH"
        );
        for m in machines {
            let job = m.current_job.map_or_else(|| "-".to_owned(), |j| j.to_string());
            println!(
                "{:<16} {:<20} {:>5} {:>5}Gi  {:<8} {job}",
                m.fingerprint, m.name, m.logical_cores, m.memory_gib, m.arch
            );
        }
    })
    .await
}
