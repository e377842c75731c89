//! The `kymo` command line: one config struct (clap derive, with environment fallbacks) and
//! the commands that talk to a server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use kymo_core::credentials::redact_secrets;
use kymo_core::db::{JobRow, LeaseSettings, RepositoryRow};
use kymo_core::format::{FormatName, parse_criterion_dir, parse_output};
use kymo_core::model::{CommitSha, MachineFingerprint};
use kymo_core::protocol::{
    NewRepository, RepositorySettingsView, RepositoryUpdate, RunQueued, RunRequest, SuiteUpload,
    UploadAccepted, UploadRequest,
};
use kymo_worker::client::ServerClient;
use kymo_worker::fingerprint::{detect_environment, detect_specs};

use crate::serve::{ServeOptions, serve};

mod alerts;
mod compare;
mod credentials;
mod listing;
mod progress;
mod tokens;

pub use tokens::TokenCommand;

/// kymo: continuous benchmarking for git repositories.
#[derive(Debug, Parser)]
#[command(name = "kymo", version, about)]
pub struct Cli {
    /// A token for the server (`kymo token create`); on the server's machine, the admin token
    /// `kymo serve` writes beside its database is used when none is given.
    #[arg(long, global = true, env = "KYMO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: API, dashboard and (unless --no-worker) a worker on this machine.
    Serve(ServeArgs),
    /// Run a worker for a server on another machine.
    Worker(WorkerArgs),
    /// Add or list tracked repositories.
    #[command(subcommand)]
    Repo(RepoCommand),
    /// Queue a commit (default: the tracked branch's head) for every machine.
    Run {
        /// The repository's name.
        name: String,
        /// A sha, branch or tag.
        commitish: Option<String>,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Cancel a waiting or running job.
    Cancel {
        job: i64,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Queue a finished (failed, cancelled or succeeded) job's commit again on its machine.
    Retry {
        job: i64,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Upload results produced elsewhere (CI).
    Upload(UploadArgs),
    /// Benchmark a generated history of kymo's own kernels and serve the dashboard.
    Demo {
        /// Address to serve the dashboard on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Directory for the demo repository and database (cleared and rewritten).
        #[arg(long, default_value = "kymo-demo")]
        data: PathBuf,
        /// Print the summary and exit instead of serving.
        #[arg(long)]
        no_serve: bool,
    },
    /// Run bench-kernels, kymo's own workload (what the demo's suites call).
    #[command(hide = true, disable_help_flag = true)]
    Kernels {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compare two commits; exits with status 1 when the head regressed (a CI gate).
    Compare(compare::CompareArgs),
    /// Exit 0 when the server answers its health check (for container health checks).
    Health {
        #[command(flatten)]
        server: ServerArg,
    },
    /// A repository's alert channels: a message for every new regression.
    #[command(subcommand)]
    Alert(alerts::AlertCommand),
    /// Where a repository's commit statuses are posted (GitHub or Gitea).
    #[command(subcommand)]
    Status(alerts::StatusCommand),
    /// Manage API tokens (on the server's machine, against its database).
    #[command(subcommand)]
    Token(TokenCommand),
    /// List the job queue, newest first.
    Jobs(listing::ListArgs),
    /// List the registered machines.
    Machines(listing::ListArgs),
    /// Print a shell completion script (e.g. `kymo completions bash > /etc/bash_completion.d/kymo`).
    Completions { shell: clap_complete::Shell },
}

#[derive(Debug, Args)]
pub struct ServerArg {
    /// The kymo server.
    #[arg(long, env = "KYMO_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The SQLite database file.
    #[arg(long, env = "KYMO_DB", default_value = "kymo.db")]
    pub db: PathBuf,
    /// Address to listen on (port 0 picks a free port; the first line printed names it).
    #[arg(long, env = "KYMO_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Do not run a worker inside the server.
    #[arg(long)]
    pub no_worker: bool,
    /// Where mirrors and work trees live [default: `kymo-data` beside the database].
    #[arg(long, env = "KYMO_DATA")]
    pub data: Option<PathBuf>,
    /// The URL people reach this server at, for links in alerts and commit statuses
    /// [default: http:// and the listen address].
    #[arg(long, env = "KYMO_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Seconds a job's lease lasts without a heartbeat.
    #[arg(long, env = "KYMO_LEASE_SECONDS", default_value_t = 60, hide = true)]
    pub lease_seconds: i64,
    /// Reading needs a token or a login too (changing anything always does).
    #[arg(long, env = "KYMO_PRIVATE")]
    pub private: bool,
    /// Mark session cookies Secure: set it when users reach kymo over TLS (a proxy).
    #[arg(long, env = "KYMO_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// Labels the embedded worker offers (comma-separated).
    #[arg(long = "label", value_delimiter = ',')]
    pub labels: Vec<String>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub server: ServerArg,
    /// Where mirrors, work trees and build directories live.
    #[arg(long, env = "KYMO_CACHE", default_value = "kymo-worker")]
    pub cache_dir: PathBuf,
    /// Labels this machine offers (comma-separated); repositories may require some.
    #[arg(long = "label", env = "KYMO_LABELS", value_delimiter = ',')]
    pub labels: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// Track a repository: NAME and a local path or git URL.
    Add {
        name: String,
        url_or_path: String,
        #[arg(long, default_value = "main")]
        branch: String,
        /// Shared secret of the push webhook (`/api/v1/webhooks/{github,gitlab,gitea}?repo=NAME`).
        #[arg(long, env = "KYMO_WEBHOOK_SECRET")]
        webhook_secret: Option<String>,
        /// Poll the remote this often, in seconds, for hosts that cannot send webhooks.
        #[arg(long, value_name = "SECONDS")]
        poll: Option<i64>,
        /// Run this repository's jobs only on machines with these labels (comma-separated).
        #[arg(long, value_name = "LABELS")]
        machines: Option<String>,
        #[command(flatten)]
        credentials: credentials::CredentialArgs,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Change a tracked repository's settings (with no flags: show them).
    Set {
        name: String,
        #[command(flatten)]
        credentials: credentials::CredentialArgs,
        /// Remove the repository's credential.
        #[arg(long, conflicts_with_all = ["https_user", "ssh_key"])]
        clear_credentials: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// List tracked repositories.
    List(listing::ListArgs),
}

#[derive(Debug, Args)]
pub struct UploadArgs {
    #[command(flatten)]
    pub server: ServerArg,
    #[arg(long)]
    pub repo: String,
    #[arg(long)]
    pub commit: String,
    /// The results' format: kymo, criterion, bmf, hyperfine, google-benchmark, go-bench,
    /// libtest or pytest-benchmark.
    #[arg(long, default_value = "kymo")]
    pub format: String,
    /// Attribute the results to this registered machine instead of this one.
    #[arg(long)]
    pub machine: Option<String>,
    /// A results file, or a directory of them (one suite per file); for criterion, its
    /// output directory (`target/criterion`).
    pub path: PathBuf,
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    tokens::use_token(cli.token);
    match cli.command {
        Command::Serve(args) => {
            let data_dir = args.data.clone().unwrap_or_else(|| {
                let parent = args.db.parent().filter(|p| !p.as_os_str().is_empty());
                parent.unwrap_or(Path::new(".")).join("kymo-data")
            });
            serve(ServeOptions {
                db: args.db,
                listen: args.listen,
                embedded_worker: !args.no_worker,
                leases: LeaseSettings {
                    lease_seconds: args.lease_seconds.clamp(1, 3600),
                    ..LeaseSettings::default()
                },
                data_dir,
                worker_labels: args.labels,
                access: crate::auth::AccessSettings {
                    private: args.private,
                    secure_cookies: args.secure_cookies,
                },
                public_url: args.public_url,
            })
            .await
        }
        Command::Worker(args) => {
            let token = tokens::token_for(&args.server.server).context(
                "a worker needs a token: pass --token (from `kymo token create --worker NAME` on the server's machine)",
            )?;
            let config = kymo_worker::WorkerConfig {
                server: args.server.server,
                token,
                cache_dir: args.cache_dir,
                poll_interval: std::time::Duration::from_secs(2),
                limits: Default::default(),
                labels: args.labels,
            };
            blocking(move || {
                let worker = kymo_worker::Worker::new(config);
                println!("kymo worker for machine {}", worker.specs().fingerprint());
                let stop = std::sync::atomic::AtomicBool::new(false);
                worker.run_until(&stop);
                Ok(())
            })
            .await
        }
        Command::Repo(RepoCommand::Add {
            name,
            url_or_path,
            branch,
            webhook_secret,
            poll,
            machines,
            credentials,
            server,
        }) => {
            let url = absolute_if_local(&url_or_path)?;
            let body = NewRepository {
                name,
                url,
                branch: Some(branch),
                webhook_secret,
                poll_seconds: poll,
                machine_labels: machines,
                credential: credentials.credential()?,
            };
            let shown = redact_secrets(&body.url).into_owned();
            let waiting = progress::spinner(format!("cloning {shown} and reading its history"));
            let answer = blocking(move || client(&server).post("/repos", &body)).await;
            waiting.finish_and_clear();
            let repo: RepositoryRow = answer?;
            println!(
                "added {} ({} on branch {})",
                repo.name,
                redact_secrets(&repo.url),
                repo.branch
            );
            Ok(())
        }
        Command::Repo(RepoCommand::Set {
            name,
            credentials,
            clear_credentials,
            server,
        }) => {
            let body = RepositoryUpdate {
                credential: credentials.credential()?,
                clear_credential: clear_credentials,
            };
            let path = format!("/repos/{name}/settings");
            let view: RepositorySettingsView = blocking(move || {
                let client = client(&server);
                if body.credential.is_none() && !body.clear_credential {
                    client.get(&path)
                } else {
                    client.post(&path, &body)
                }
            })
            .await?;
            let credential = view
                .credential
                .map_or("none".into(), |c| match c.kind.as_str() {
                    "https" => format!("HTTPS token of user {}", c.username.unwrap_or_default()),
                    _ => format!("SSH key {}", c.key_path.unwrap_or_default()),
                });
            println!(
                "{} ({})\ncredential: {credential}",
                view.name,
                redact_secrets(&view.url)
            );
            Ok(())
        }
        Command::Repo(RepoCommand::List(args)) => listing::repositories(args).await,
        Command::Jobs(args) => listing::jobs(args).await,
        Command::Machines(args) => listing::machines(args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "kymo", &mut std::io::stdout());
            Ok(())
        }
        Command::Run {
            name,
            commitish,
            server,
        } => {
            let path = format!("/repos/{name}/runs");
            let body = RunRequest { commit: commitish };
            let queued: RunQueued = blocking(move || client(&server).post(&path, &body)).await?;
            println!("queued {} as job(s) {:?}", queued.commit, queued.jobs);
            Ok(())
        }
        Command::Cancel { job, server } => {
            let job: JobRow = blocking(move || {
                client(&server).post(&format!("/jobs/{job}/cancel"), &serde_json::json!({}))
            })
            .await?;
            println!("job {} is {}", job.id, job.state);
            Ok(())
        }
        Command::Retry { job, server } => {
            let new: JobRow = blocking(move || {
                client(&server).post(&format!("/jobs/{job}/retry"), &serde_json::json!({}))
            })
            .await?;
            println!("job {job} queued again as job {}", new.id);
            Ok(())
        }
        Command::Upload(args) => upload(args).await,
        Command::Demo {
            listen,
            data,
            no_serve,
        } => {
            crate::demo::demo(crate::demo::DemoOptions {
                listen,
                data,
                serve: !no_serve,
            })
            .await
        }
        Command::Compare(args) => compare::run(args).await,
        Command::Alert(command) => alerts::alert(command).await,
        Command::Status(command) => alerts::status(command).await,
        Command::Kernels { args } => blocking(move || bench_kernels::run_cli(args)).await,
        Command::Health { server } => {
            blocking(move || client(&server).wait_healthy(std::time::Duration::from_secs(2))).await
        }
        Command::Token(command) => tokens::run(command).await,
    }
}

pub(crate) fn client(server: &ServerArg) -> ServerClient {
    ServerClient::new(&server.server, tokens::token_for(&server.server))
}

/// Runs blocking client work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await?
}

/// A path that exists on this machine becomes absolute, so that the server finds it from its
/// own working directory; anything else is taken as a URL.
fn absolute_if_local(url_or_path: &str) -> anyhow::Result<String> {
    let path = Path::new(url_or_path);
    if !url_or_path.contains("://") && path.exists() {
        let absolute = path
            .canonicalize()
            .with_context(|| format!("cannot resolve {url_or_path}"))?;
        return Ok(absolute.display().to_string());
    }
    Ok(url_or_path.to_owned())
}

async fn upload(args: UploadArgs) -> anyhow::Result<()> {
    let Some(format) = FormatName::parse(&args.format) else {
        let known: Vec<&str> = FormatName::ALL.iter().map(|f| f.as_str()).collect();
        bail!(
            "unknown format {:?}; use one of {}",
            args.format,
            known.join(", ")
        );
    };
    let commit = CommitSha::parse(&args.commit)?;
    let machine = args
        .machine
        .as_deref()
        .map(MachineFingerprint::parse)
        .transpose()?;
    let suites = if format == FormatName::Criterion {
        // criterion writes a directory (`target/criterion`): one suite.
        let results =
            parse_criterion_dir(&args.path).with_context(|| format!("{}", args.path.display()))?;
        vec![SuiteUpload {
            suite: "criterion".into(),
            results,
        }]
    } else {
        let files = result_files(&args.path, format)?;
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
        suites
    };
    let request = UploadRequest {
        commit,
        specs: machine.is_none().then(detect_specs),
        machine,
        environment: detect_environment(),
        suites,
    };
    let path = format!("/repos/{}/results", args.repo);
    let waiting = progress::spinner(format!("uploading {} suite(s)", request.suites.len()));
    let answer = blocking(move || client(&args.server).post(&path, &request)).await;
    waiting.finish_and_clear();
    let accepted: UploadAccepted = answer?;
    println!(
        "stored {} measurements as run {} of machine {}",
        accepted.measurements, accepted.run, accepted.machine
    );
    Ok(())
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
