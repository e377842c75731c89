//! The `kymo` command line: one config struct (clap derive, with environment fallbacks) and
//! the commands that talk to a server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kymo_core::db::{JobRow, LeaseSettings};
use kymo_worker::client::ServerClient;

use crate::serve::{ServeOptions, serve};

mod alerts;
mod ci_env;
mod compare;
mod credentials;
mod listing;
mod progress;
mod repos;
mod tokens;
mod try_run;
mod upload;

pub use tokens::TokenCommand;

/// kymo: continuous benchmarking for git repositories.
#[derive(Debug, Parser)]
#[command(name = "kymo", version, about)]
pub struct Cli {
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
    Repo(repos::RepoCommand),
    /// Queue a commit (default: the tracked branch's head), or a stretch of history
    /// (`--last N`, `A..B`, thinned with `--every K`), for every machine.
    Run(repos::RunArgs),
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
    Upload(upload::UploadArgs),
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
        /// Report every change as soon as the analysis finds it, without measuring it again
        /// (interleaved with its baseline) first as `kymo serve` does by default.
        #[arg(long)]
        no_confirm: bool,
    },
    /// Run bench-kernels, kymo's own workload (what the demo's suites call).
    #[command(hide = true, disable_help_flag = true)]
    Kernels {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compare two commits; exits with status 1 when the head regressed (a CI gate).
    Compare(compare::CompareArgs),
    /// Measure REF against its merge base with the tracked branch, interleaved on one
    /// machine; exits 1 when something regressed, 0 when not, 2 when the run failed.
    Try(try_run::TryArgs),
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

#[derive(Debug, Clone, Args)]
pub struct ServerArg {
    /// The kymo server.
    #[arg(long, env = "KYMO_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// A token for the server (`kymo token create`); on the server's machine, the admin token
    /// `kymo serve` writes beside its database is used when none is given.
    #[arg(long, env = "KYMO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
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
    /// Seconds a client may take to send a request's header, or stay idle between requests.
    #[arg(
        long,
        env = "KYMO_HEADER_READ_TIMEOUT",
        default_value_t = 10,
        hide = true
    )]
    pub header_read_timeout: u64,
    /// Seconds without a write after which staged measurements are merged into the clustered
    /// table (0: only when enough are staged). Readers read both either way.
    #[arg(
        long,
        env = "KYMO_MERGE_IDLE_SECONDS",
        default_value_t = 30,
        hide = true
    )]
    pub merge_idle_seconds: u64,
    /// Seconds a job's lease lasts without a heartbeat.
    #[arg(long, env = "KYMO_LEASE_SECONDS", default_value_t = 60, hide = true)]
    pub lease_seconds: i64,
    /// Reading needs a token or a login too (changing anything always does).
    #[arg(long, env = "KYMO_PRIVATE")]
    pub private: bool,
    /// Mark session cookies Secure: set it when users reach kymo over TLS (a proxy).
    #[arg(long, env = "KYMO_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// Labels the embedded worker offers (comma-separated); its token is granted them.
    #[arg(long = "label", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// The address of a reverse proxy in front of kymo: for requests from it, lock-outs count
    /// the client its `X-Forwarded-For` names instead of the proxy.
    #[arg(long, env = "KYMO_TRUSTED_PROXY")]
    pub trusted_proxy: Option<std::net::IpAddr>,
    #[command(flatten)]
    pub suites: SuiteBoundaryArgs,
}

#[derive(Debug, Args)]
pub struct SuiteBoundaryArgs {
    /// Run benchmark suites even where the kernel cannot keep them out of kymo's database and
    /// tokens (no Landlock) or give them their own PID namespace: anyone who can push to a
    /// tracked branch could then act as admin.
    #[arg(long, env = "KYMO_ALLOW_UNCONFINED_SUITES")]
    pub allow_unconfined_suites: bool,
    /// The most memory any suite gets (`512MiB`, `8GiB`), whatever its kymo.toml asks;
    /// default: three quarters of this machine's memory.
    #[arg(long, env = "KYMO_MAX_SUITE_MEMORY", value_parser = parse_size)]
    pub max_suite_memory: Option<u64>,
    /// The most disk space a suite's command may add; default: nine tenths of the space free
    /// where suites write, when the worker starts.
    #[arg(long, env = "KYMO_MAX_SUITE_DISK", value_parser = parse_size)]
    pub max_suite_disk: Option<u64>,
    /// The most processes and threads a suite may have at once; default: an eighth of this
    /// machine's process table, from 256 to 8192.
    #[arg(long, env = "KYMO_MAX_SUITE_PROCESSES", value_parser = clap::value_parser!(u32).range(1..=32_768))]
    pub max_suite_processes: Option<u32>,
}

impl SuiteBoundaryArgs {
    /// The ceilings the admin set (the machine's own where not).
    pub fn maximums(&self) -> kymo_worker::sandbox::maximums::MaximumSettings {
        kymo_worker::sandbox::maximums::MaximumSettings {
            memory: self.max_suite_memory,
            disk: self.max_suite_disk,
            processes: self.max_suite_processes,
        }
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
    kymo_worker::sandbox::settings::parse_size(text)
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
    #[command(flatten)]
    pub suites: SuiteBoundaryArgs,
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    // Read KYMO_GIT_TIMEOUT now: a worker's sandbox blanks the KYMO_* environment at its start.
    kymo_worker::credentials::git_timeout();
    match cli.command {
        Command::Serve(args) => {
            // Paths are made absolute once, here: the worker and git resolve them from other
            // directories (a relative data directory was applied twice inside a work tree).
            let db = absolute(&args.db)?;
            let data_dir = match &args.data {
                Some(data) => absolute(data)?,
                None => db.parent().unwrap_or(Path::new("/")).join("kymo-data"),
            };
            serve(ServeOptions {
                db,
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
                    trusted_proxy: args.trusted_proxy,
                },
                public_url: args.public_url,
                allow_unconfined_suites: args.suites.allow_unconfined_suites,
                suite_maximums: args.suites.maximums(),
                header_read_timeout: std::time::Duration::from_secs(
                    args.header_read_timeout.clamp(1, 3600),
                ),
                merge_when_idle: (args.merge_idle_seconds > 0)
                    .then(|| std::time::Duration::from_secs(args.merge_idle_seconds.min(86_400))),
            })
            .await
        }
        Command::Worker(args) => {
            let token = tokens::token_for(&args.server).context(
                "a worker needs a token: pass --token (from `kymo token create --worker NAME` on the server's machine)",
            )?;
            let config = kymo_worker::WorkerConfig {
                server: args.server.server,
                token,
                cache_dir: absolute(&args.cache_dir)?,
                poll_interval: std::time::Duration::from_secs(2),
                limits: Default::default(),
                labels: args.labels,
                sandbox: kymo_worker::sandbox::SandboxConfig {
                    protected: Vec::new(),
                    allow_unconfined: args.suites.allow_unconfined_suites,
                    maximums: args.suites.maximums(),
                },
            };
            blocking(move || {
                let worker = kymo_worker::Worker::new(config);
                println!("kymo worker for machine {}", worker.specs().fingerprint());
                println!("{}", worker.sandbox().describe());
                worker
                    .sandbox()
                    .check_runnable()
                    .map_err(anyhow::Error::msg)?;
                let stop = std::sync::atomic::AtomicBool::new(false);
                worker.run_until(&stop);
                Ok(())
            })
            .await
        }
        Command::Repo(command) => repos::repo(command).await,
        Command::Jobs(args) => listing::jobs(args).await,
        Command::Machines(args) => listing::machines(args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "kymo", &mut std::io::stdout());
            Ok(())
        }
        Command::Run(args) => repos::run(args).await,
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
        Command::Upload(args) => upload::run(args).await,
        Command::Demo {
            listen,
            data,
            no_serve,
            no_confirm,
        } => {
            crate::demo::demo(crate::demo::DemoOptions {
                // Without a dashboard to serve, any free port does: a running `kymo serve`
                // on the default one must not stop the demo.
                listen: if no_serve {
                    SocketAddr::from(([127, 0, 0, 1], 0))
                } else {
                    listen
                },
                data: absolute(&data)?,
                serve: !no_serve,
                confirm: !no_confirm,
            })
            .await
        }
        Command::Compare(args) => compare::run(args).await,
        Command::Try(args) => try_run::run(args).await,
        Command::Alert(command) => alerts::alert(command).await,
        Command::Status(command) => alerts::status(command).await,
        Command::Kernels { args } => {
            blocking(move || bench_kernels::run_cli_under(&["kernels"], args)).await
        }
        Command::Health { server } => {
            blocking(move || client(&server).wait_healthy(std::time::Duration::from_secs(2))).await
        }
        Command::Token(command) => tokens::run(command).await,
    }
}

/// An error that asks for a particular exit status (`kymo try`'s 1 and 2), with its message.
#[derive(Debug)]
pub struct ExitWith {
    pub code: u8,
    pub message: String,
}

impl ExitWith {
    pub fn new(code: u8, message: String) -> Self {
        Self { code, message }
    }
}

impl std::fmt::Display for ExitWith {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitWith {}

/// A comparison budget as given on the command line (`600`, `90s`, `10m`, `1h`), in seconds.
pub(crate) fn budget_seconds(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let duration = match text.parse::<u64>() {
        Ok(seconds) => std::time::Duration::from_secs(seconds),
        Err(_) => kymo_worker::config::parse_duration(text)?,
    };
    let seconds = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX);
    kymo_core::db::checked_budget(seconds).map_err(|e| e.to_string())
}

pub(crate) fn client(server: &ServerArg) -> ServerClient {
    ServerClient::new(&server.server, tokens::token_for(server))
}

/// `path` made absolute against the current directory (without resolving links).
pub(crate) fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// Runs blocking client work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work).await?
}
