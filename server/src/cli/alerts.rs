//! `kymo alert` and `kymo status`: a repository's alert channels and commit-status target,
//! through the server's API.

use clap::Subcommand;

use super::{ServerArg, blocking, client};
use crate::alerts::{AlertChannelView, NewAlertChannel, StatusTargetRequest, StatusTargetView};

#[derive(Debug, Subcommand)]
pub enum AlertCommand {
    /// Send a message to URL whenever REPO gets a new regression.
    Add {
        repo: String,
        /// The channel's incoming-webhook URL (http or https).
        #[arg(long)]
        url: String,
        /// The body to send: json (documented in docs/ALERTS.md), slack or discord.
        #[arg(long, default_value = "json")]
        kind: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// List a repository's alert channels (URLs shown without their secret part).
    List {
        repo: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Remove a channel by its id.
    Remove {
        repo: String,
        id: i64,
        #[command(flatten)]
        server: ServerArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum StatusCommand {
    /// Post REPO's commit statuses to GitHub (or GitHub Enterprise) or Gitea (or Forgejo).
    Set {
        repo: String,
        /// github, gitea (also Forgejo) or gitlab.
        #[arg(long)]
        kind: String,
        /// The forge's API root [default for github: https://api.github.com, for gitlab:
        /// https://gitlab.com/api/v4; required for gitea, e.g. https://gitea.example/api/v1].
        #[arg(long)]
        api_url: Option<String>,
        /// The repository on the forge, as owner/name (GitLab: group/.../project).
        #[arg(long)]
        slug: String,
        /// The forge's API token allowed to write commit statuses (kymo's own token is
        /// `--token`).
        #[arg(long, env = "KYMO_STATUS_TOKEN", hide_env_values = true)]
        forge_token: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Show where REPO's commit statuses go (the token only as a hint).
    Show {
        repo: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Stop posting REPO's commit statuses.
    Remove {
        repo: String,
        #[command(flatten)]
        server: ServerArg,
    },
}

pub async fn alert(command: AlertCommand) -> anyhow::Result<()> {
    match command {
        AlertCommand::Add {
            repo,
            url,
            kind,
            server,
        } => {
            let path = format!("/repos/{repo}/alerts");
            let body = NewAlertChannel {
                url,
                kind: Some(kind),
            };
            let channel: AlertChannelView =
                blocking(move || client(&server).post(&path, &body)).await?;
            println!(
                "added {} channel {} ({})",
                channel.kind, channel.id, channel.url
            );
        }
        AlertCommand::List { repo, json, server } => {
            let path = format!("/repos/{repo}/alerts");
            let channels: Vec<AlertChannelView> =
                blocking(move || client(&server).get(&path)).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&channels)?);
            } else if channels.is_empty() {
                println!("no alert channels; add one with `kymo alert add {repo} --url URL`");
            } else {
                println!("{:>4}  {:<8} URL", "ID", "KIND");
                for c in channels {
                    println!("{:>4}  {:<8} {}", c.id, c.kind, c.url);
                }
            }
        }
        AlertCommand::Remove { repo, id, server } => {
            let path = format!("/repos/{repo}/alerts/{id}");
            blocking(move || client(&server).delete(&path)).await?;
            println!("removed alert channel {id}");
        }
    }
    Ok(())
}

pub async fn status(command: StatusCommand) -> anyhow::Result<()> {
    match command {
        StatusCommand::Set {
            repo,
            kind,
            api_url,
            slug,
            forge_token,
            server,
        } => {
            let path = format!("/repos/{repo}/commit-status");
            let body = StatusTargetRequest {
                kind,
                api_url,
                slug,
                token: forge_token,
            };
            let target: StatusTargetView =
                blocking(move || client(&server).put(&path, &body)).await?;
            print_target(&repo, &target);
        }
        StatusCommand::Show { repo, server } => {
            let path = format!("/repos/{repo}/commit-status");
            let target: StatusTargetView = blocking(move || client(&server).get(&path)).await?;
            print_target(&repo, &target);
        }
        StatusCommand::Remove { repo, server } => {
            let path = format!("/repos/{repo}/commit-status");
            blocking(move || client(&server).delete(&path)).await?;
            println!("{repo} no longer posts commit statuses");
        }
    }
    Ok(())
}

fn print_target(repo: &str, target: &StatusTargetView) {
    println!(
        "{repo} posts commit statuses to {} on {} at {} (token {})",
        target.slug, target.kind, target.api_url, target.token_hint
    );
}
