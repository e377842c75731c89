//! Tokens: which one the CLI sends, and `kymo token create|list|revoke` on the server's machine
//! (they open its database directly, so they also work before any token exists).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{ArgGroup, Subcommand};
use kymo_core::clock::{Clock, SystemClock};
use kymo_core::db::{Db, TokenScope};

use super::ServerArg;
use crate::pages::format::utc;
use crate::serve::admin_token_path;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it once (it is stored hashed).
    #[command(group(ArgGroup::new("scope").required(true).args(["worker", "admin", "upload"])))]
    Create {
        /// A token for a worker machine with this name.
        #[arg(long)]
        worker: Option<String>,
        /// Labels the worker token may claim with (comma-separated): a worker declaring
        /// others is not given the jobs that need them.
        #[arg(long, requires = "worker", value_delimiter = ',')]
        labels: Vec<String>,
        /// A token that may change anything (the CLI, the dashboard's login).
        #[arg(long)]
        admin: Option<String>,
        /// A token that may only upload results (CI).
        #[arg(long)]
        upload: Option<String>,
        /// Limit the upload token to this repository: the CI secret of one project cannot
        /// upload to another.
        #[arg(long = "repo", requires = "upload", value_name = "REPOSITORY")]
        repository: Option<String>,
        /// The server's database file.
        #[arg(long, env = "KYMO_DB", default_value = "kymo.db")]
        db: PathBuf,
    },
    /// List tokens with their scope and last use.
    List {
        #[arg(long, env = "KYMO_DB", default_value = "kymo.db")]
        db: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token (and end the sessions it opened).
    Revoke {
        id: i64,
        #[arg(long, env = "KYMO_DB", default_value = "kymo.db")]
        db: PathBuf,
    },
}

/// The token to send to the server: the one given (`--token` or `KYMO_TOKEN`), or, for a
/// server on this machine, the admin token its `kymo serve` wrote beside the database
/// (`KYMO_DB`, default `kymo.db` in this directory), or the one of the server at that URL
/// that this user started, from any directory ([`crate::local_servers`]).
pub fn token_for(arg: &ServerArg) -> Option<String> {
    if let Some(token) = arg.token.as_ref().filter(|t| !t.trim().is_empty()) {
        return Some(token.clone());
    }
    let server = &arg.server;
    let local = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|prefix| server.starts_with(prefix));
    let db = std::env::var_os("KYMO_DB").map_or_else(|| PathBuf::from("kymo.db"), PathBuf::from);
    let beside_database = local
        .then(|| std::fs::read_to_string(admin_token_path(&db)).ok())
        .flatten()
        .map(|t| t.trim().to_owned());
    beside_database.or_else(|| {
        let file = crate::local_servers::servers_file()?;
        crate::local_servers::admin_token_for(&file, server)
    })
}

async fn open(db: &Path) -> anyhow::Result<Db> {
    Db::open(db)
        .await
        .with_context(|| format!("cannot open the database {}", db.display()))
}

pub async fn run(command: TokenCommand) -> anyhow::Result<()> {
    let now = SystemClock.now();
    match command {
        TokenCommand::Create {
            worker,
            labels,
            admin,
            upload,
            repository,
            db,
        } => {
            let (name, scope) = match (worker, admin, upload) {
                (Some(name), _, _) => (name, TokenScope::Worker),
                (_, Some(name), _) => (name, TokenScope::Admin),
                (_, _, Some(name)) => (name, TokenScope::Upload),
                _ => unreachable!("clap requires one scope"),
            };
            let db = open(&db).await?;
            let token = match (scope, &repository) {
                (TokenScope::Worker, _) => {
                    db.create_worker_token(&name, &labels.join(","), now)
                        .await?
                }
                (_, Some(repository)) => {
                    db.create_repository_upload_token(&name, repository, now)
                        .await?
                }
                _ => db.create_token(&name, scope, now).await?,
            };
            println!("{token}");
            let only = repository
                .map(|r| format!(", for repository {r:?} only"))
                .unwrap_or_default();
            eprintln!(
                "{} token for {name:?}{only}: shown once, stored hashed",
                scope.as_str()
            );
        }
        TokenCommand::List { db, json } => {
            let tokens = open(&db).await?.tokens().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&tokens)?);
                return Ok(());
            }
            println!(
                "{:>4}  {:<24} {:<7} {:<20} {:<20} {:<20} STATE",
                "ID", "NAME", "SCOPE", "LABELS / REPO", "CREATED", "LAST USED"
            );
            for t in tokens {
                let state = t
                    .revoked_at
                    .map_or("live".to_owned(), |at| format!("revoked {}", utc(at)));
                println!(
                    "{:>4}  {:<24} {:<7} {:<20} {:<20} {:<20} {state}",
                    t.id,
                    t.name,
                    t.scope,
                    match (&t.repository, t.labels.as_str()) {
                        (Some(repository), _) => repository.as_str(),
                        (None, "") => "-",
                        (None, labels) => labels,
                    },
                    utc(t.created_at),
                    t.last_used_at.map_or("never".to_owned(), utc),
                );
            }
        }
        TokenCommand::Revoke { id, db } => {
            open(&db).await?.revoke_token(id, now).await?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}
