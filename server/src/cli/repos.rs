//! `kymo repo add|set|list` and `kymo run`: tracking a repository, the suites kept for it on
//! the server, and queueing commits, one or a whole stretch of history.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use kymo_core::credentials::redact_secrets;
use kymo_core::db::RepositoryRow;
use kymo_core::protocol::{
    BackfillQueued, BackfillRequest, NewRepository, RepositorySettingsView, RepositoryUpdate,
    RunQueued, RunRequest, StoredSuites,
};

use super::credentials::CredentialArgs;
use super::{ServerArg, blocking, client, listing, progress};

#[derive(Debug, Subcommand)]
pub enum RepoCommand {
    /// Track a repository: NAME and a local path or git URL.
    Add {
        name: String,
        url_or_path: String,
        /// The branch to follow [default: the remote's default branch].
        #[arg(long)]
        branch: Option<String>,
        /// Shared secret of the push webhook (`/api/v1/webhooks/{github,gitlab,gitea}?repo=NAME`).
        #[arg(long, env = "KYMO_WEBHOOK_SECRET")]
        webhook_secret: Option<String>,
        /// Poll the remote this often, in seconds, for hosts that cannot send webhooks.
        #[arg(long, value_name = "SECONDS")]
        poll: Option<i64>,
        /// Run this repository's jobs only on machines with these labels (comma-separated).
        #[arg(long, value_name = "LABELS")]
        machines: Option<String>,
        /// A kymo.toml kept on the server: the suites of commits that carry none of their own.
        #[arg(long, value_name = "FILE")]
        suites: Option<PathBuf>,
        /// Queue the last N first-parent commits of the branch at once.
        #[arg(long, value_name = "N")]
        backfill: Option<u32>,
        /// `off`: every suite runs without the network, whatever a commit's kymo.toml says.
        #[arg(long, value_enum, value_name = "on|off")]
        network: Option<Switch>,
        #[command(flatten)]
        credentials: CredentialArgs,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Change a tracked repository's settings (with no flags: show them).
    Set {
        name: String,
        #[command(flatten)]
        credentials: CredentialArgs,
        /// Remove the repository's credential.
        #[arg(long, conflicts_with_all = ["https_user", "ssh_key"])]
        clear_credentials: bool,
        /// Keep this kymo.toml on the server for commits without their own (validated first).
        #[arg(long, value_name = "FILE", conflicts_with = "no_suites")]
        suites: Option<PathBuf>,
        /// Forget the suites kept on the server.
        #[arg(long)]
        no_suites: bool,
        /// `off`: every suite runs without the network, whatever a commit's kymo.toml says;
        /// `on`: each suite decides (`network` in kymo.toml).
        #[arg(long, value_enum, value_name = "on|off")]
        network: Option<Switch>,
        /// Forge logins whose pull requests from forks are measured, comma-separated (''
        /// for none): their code runs on the benchmark machines.
        #[arg(long, value_name = "LOGINS")]
        fork_authors: Option<String>,
        /// Comment on every measured pull request (always), or only where something
        /// changed (changes).
        #[arg(long, value_name = "always|changes")]
        pull_comments: Option<String>,
        /// `on` (the default): a change is measured again, interleaved with its baseline on
        /// the machine that found it, before it is announced; `off`: announced when found.
        #[arg(long, value_enum, value_name = "on|off")]
        confirm: Option<Switch>,
        /// How long the rounds of a try run or pull request may take (`90s`, `10m`, `1h`):
        /// they stop sooner once every benchmark is decided [default: 10m].
        #[arg(long, value_name = "DURATION", value_parser = super::budget_seconds)]
        budget: Option<i64>,
        #[command(flatten)]
        server: ServerArg,
    },
    /// List tracked repositories.
    List(listing::ListArgs),
}

/// A repository setting that is on or off (`--network`: each suite decides, or no suite
/// gets the network; `--confirm`: changes are measured again before they are announced, or
/// not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    fn on(self) -> bool {
        self == Self::On
    }
}

/// `kymo run`: one commit, or a stretch of history.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The repository's name.
    pub name: String,
    /// A sha, branch or tag (default: the branch head), or a range `A..B`: the first-parent
    /// commits after A up to and including B (B defaults to the branch head).
    pub commitish: Option<String>,
    /// Queue the last N first-parent commits of the branch (or of COMMITISH).
    #[arg(long, value_name = "N")]
    pub last: Option<u32>,
    /// Keep every K-th commit of a range or of --last (the newest always).
    #[arg(long, value_name = "K")]
    pub every: Option<u32>,
    #[command(flatten)]
    pub server: ServerArg,
}

pub async fn repo(command: RepoCommand) -> anyhow::Result<()> {
    match command {
        RepoCommand::Add {
            name,
            url_or_path,
            branch,
            webhook_secret,
            poll,
            machines,
            suites,
            backfill,
            network,
            credentials,
            server,
        } => {
            let url = absolute_if_local(&url_or_path)?;
            let body = NewRepository {
                name,
                url,
                branch,
                webhook_secret,
                poll_seconds: poll,
                machine_labels: machines,
                suites: suites.as_deref().map(read_suites).transpose()?,
                backfill,
                credential: credentials.credential()?,
                network: network.map(Switch::on),
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
            if network == Some(Switch::Off) {
                println!("its suites run without the network, whatever its kymo.toml says");
            }
            if let Some(n) = backfill {
                println!(
                    "queued its last {n} commits; follow them with `kymo jobs` or on the queue page"
                );
            }
            Ok(())
        }
        RepoCommand::Set {
            name,
            suites,
            no_suites,
            network,
            credentials,
            clear_credentials,
            fork_authors,
            pull_comments,
            confirm,
            budget,
            server,
        } => {
            let update = RepositoryUpdate {
                credential: credentials.credential()?,
                clear_credential: clear_credentials,
                network: network.map(Switch::on),
                fork_authors,
                pull_comments,
                confirm: confirm.map(Switch::on),
                budget_seconds: budget,
            };
            let changes_settings = update.credential.is_some()
                || update.clear_credential
                || update.network.is_some()
                || update.fork_authors.is_some()
                || update.pull_comments.is_some()
                || update.confirm.is_some()
                || update.budget_seconds.is_some();
            let changes_suites = suites.is_some() || no_suites;
            let path = format!("/repos/{name}/suites");
            if let Some(file) = suites {
                let body = StoredSuites {
                    toml: read_suites(&file)?,
                };
                let server = server.clone();
                let _: StoredSuites = blocking(move || client(&server).put(&path, &body)).await?;
                println!(
                    "{name} keeps {} on the server: commits without a kymo.toml run it",
                    file.display()
                );
            } else if no_suites {
                let server = server.clone();
                blocking(move || client(&server).delete(&path)).await?;
                println!("{name} keeps no suites on the server");
            }
            if changes_settings || !changes_suites {
                show_settings(&name, update, changes_settings, server).await?;
            }
            Ok(())
        }
        RepoCommand::List(args) => listing::repositories(args).await,
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let range = args.commitish.as_deref().and_then(|c| c.split_once(".."));
    if args.last.is_none() && range.is_none() {
        if args.every.is_some() {
            bail!("--every thins a range: give --last N or A..B as well");
        }
        let path = format!("/repos/{}/runs", args.name);
        let body = RunRequest {
            commit: args.commitish,
        };
        let server = args.server;
        let queued: RunQueued = blocking(move || client(&server).post(&path, &body)).await?;
        println!("queued {} as job(s) {:?}", queued.commit, queued.jobs);
        return Ok(());
    }
    let body = match range {
        Some(_) if args.last.is_some() => bail!("give --last N or A..B, not both"),
        Some((from, to)) => BackfillRequest {
            from: Some(from.to_owned()),
            to: Some(to.to_owned()).filter(|t| !t.is_empty()),
            every: args.every,
            ..Default::default()
        },
        None => BackfillRequest {
            last: args.last,
            to: args.commitish,
            every: args.every,
            ..Default::default()
        },
    };
    let path = format!("/repos/{}/backfill", args.name);
    let server = args.server;
    let queued: BackfillQueued = blocking(move || client(&server).post(&path, &body)).await?;
    println!("{}", backfill_summary(&queued));
    Ok(())
}

/// What a backfill did, in one line: a commit that failed before is measured again, and says so.
fn backfill_summary(queued: &BackfillQueued) -> String {
    let again = match queued.requeued {
        0 => String::new(),
        n => format!(" ({n} of them failed before and are measured again)"),
    };
    format!(
        "{} commit(s) chosen, {} job(s) waiting for them{again}, {} already measured",
        queued.commits.len(),
        queued.jobs.len(),
        queued.skipped
    )
}

/// Changes the repository's credential and network (when `change`), then prints its settings.
async fn show_settings(
    name: &str,
    update: RepositoryUpdate,
    change: bool,
    server: ServerArg,
) -> anyhow::Result<()> {
    let path = format!("/repos/{name}/settings");
    let view: RepositorySettingsView = blocking(move || {
        let client = client(&server);
        if change {
            client.post(&path, &update)
        } else {
            client.get(&path)
        }
    })
    .await?;
    let credential = view
        .credential
        .map_or("none".into(), |c| match c.kind.as_str() {
            "https" => format!("HTTPS token of user {}", c.username.unwrap_or_default()),
            _ => format!("SSH key {}", c.key_path.unwrap_or_default()),
        });
    let network = if view.network {
        "each suite decides (network in kymo.toml)"
    } else {
        "off for every suite, whatever kymo.toml says"
    };
    let forks = match view.pulls.fork_authors.as_str() {
        "" => "nobody".to_owned(),
        authors => authors.to_owned(),
    };
    let confirm = if view.confirm {
        "on (changes are measured again before they are announced)"
    } else {
        "off (changes are announced when found)"
    };
    println!(
        "{} ({})\ncredential: {credential}\nnetwork: {network}\npull requests from forks run for: {forks}\npull request comments: {}\nconfirmation: {confirm}\ncomparison budget: {} s of rounds (try runs and pull requests stop sooner once decided)",
        view.name,
        redact_secrets(&view.url),
        view.pulls.pull_comments,
        view.budget_seconds
    );
    Ok(())
}

/// Reads a kymo.toml to keep on the server; the server validates it.
fn read_suites(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
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
