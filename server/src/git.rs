//! The server's view of tracked repositories: a git mirror per repository, from which it
//! learns the tracked branch's first-parent history and resolves what users ask to run.

use kymo_core::credentials::{GitCredential, redact_secrets};
use kymo_core::db::CommitRow;
use kymo_core::db::{CommitRecord, DbError, RepositoryRow};
use kymo_core::model::CommitSha;
use kymo_worker::mirror::{CommitInfo, Mirror, mirror_dir_name};

use crate::error::{AppError, AppResult};
use crate::state::AppState;

/// How far back the first-parent history is read.
pub(crate) const HISTORY_LIMIT: usize = 100_000;

pub(crate) fn to_record(info: CommitInfo) -> AppResult<CommitRecord> {
    let parse = |s: &str| {
        CommitSha::parse(s).map_err(|e| AppError::Internal(anyhow::anyhow!("git gave {e}")))
    };
    Ok(CommitRecord {
        sha: parse(&info.sha)?,
        parents: info
            .parents
            .iter()
            .map(|p| parse(p))
            .collect::<AppResult<_>>()?,
        author: info.author,
        time: info.time,
        message: info.message,
    })
}

/// The repository's mirror on the server, opened (or cloned) with its credential.
pub(crate) struct Remote {
    dir: std::path::PathBuf,
    name: String,
    url: String,
    credential: Option<GitCredential>,
}

impl Remote {
    pub(crate) async fn of(state: &AppState, repo: &RepositoryRow) -> AppResult<Remote> {
        Ok(Remote {
            dir: state.mirror_dir(),
            name: repo.name.clone(),
            url: repo.url.clone(),
            credential: state.db.git_credential(repo.id).await?,
        })
    }

    /// The mirror, if one was made already: reads use it as it is, never cloning or fetching.
    fn open_existing(&self) -> AppResult<Option<Mirror>> {
        let dir = mirror_dir_name(&self.name).map_err(|e| self.error(e))?;
        if !self.dir.join("mirrors").join(dir).is_dir() {
            return Ok(None);
        }
        self.open().map(Some)
    }

    pub(crate) fn open(&self) -> AppResult<Mirror> {
        Mirror::open_or_clone_with(&self.dir, &self.name, &self.url, self.credential.as_ref())
            .map_err(|e| self.error(e))
    }

    /// A refusal that names the repository and holds no secret.
    pub(crate) fn error(&self, err: impl std::fmt::Display) -> AppError {
        let message = format!("repository {:?}: {err}", self.name);
        AppError::BadRequest(match &self.credential {
            Some(credential) => credential.scrub(&message),
            None => redact_secrets(&message).into_owned(),
        })
    }
}

/// Clones or fetches the repository's mirror and records the tracked branch's history.
pub async fn sync_history(state: &AppState, repo: &RepositoryRow) -> AppResult<()> {
    read_history(state, repo, true).await
}

/// Records the tracked branch's history from the mirror as it is, for a repository whose
/// mirror was fetched a moment ago ([`probe`] while it was being added).
pub async fn record_history(state: &AppState, repo: &RepositoryRow) -> AppResult<()> {
    read_history(state, repo, false).await
}

async fn read_history(state: &AppState, repo: &RepositoryRow, fetch: bool) -> AppResult<()> {
    let remote = Remote::of(state, repo).await?;
    let branch = repo.branch.clone();
    let chain = tokio::task::spawn_blocking(move || -> AppResult<Vec<CommitInfo>> {
        let mirror = remote.open()?;
        if fetch {
            mirror.fetch().map_err(|e| remote.error(e))?;
        }
        mirror
            .first_parent_history(&branch, HISTORY_LIMIT)
            .map_err(|e| remote.error(e))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let oldest_first = chain
        .into_iter()
        .rev()
        .map(to_record)
        .collect::<AppResult<Vec<_>>>()?;
    state.db.record_history(repo.id, &oldest_first).await?;
    Ok(())
}

/// Checks that a repository can be cloned (and fetched, with `credential`) and its branch
/// read, before it or its new credential is stored; returns the branch: the one asked for,
/// or the remote's default branch when none was.
pub async fn probe(
    state: &AppState,
    name: &str,
    url: &str,
    branch: Option<&str>,
    credential: Option<&GitCredential>,
) -> AppResult<String> {
    let remote = Remote {
        dir: state.mirror_dir(),
        name: name.to_owned(),
        url: url.to_owned(),
        credential: credential.cloned(),
    };
    let branch = branch.map(str::to_owned);
    tokio::task::spawn_blocking(move || -> AppResult<String> {
        let mirror = remote.open()?;
        // An existing mirror was not fetched by opening it: fetch, so that a new credential
        // is tried against the remote (and the remote's default branch is known).
        mirror.fetch().map_err(|e| remote.error(e))?;
        let branch = match branch {
            Some(branch) => branch,
            None => mirror
                .default_branch()
                .ok_or_else(|| remote.error("the remote names no default branch: pass --branch"))?,
        };
        mirror
            .resolve(&branch)
            .map_err(|e| remote.error(format!("branch {branch:?}: {e}")))?;
        Ok(branch)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?
}

/// Fetches, then resolves `commitish` (default: the tracked branch) to a recorded commit;
/// returns its sha and database id.
pub async fn resolve_commit(
    state: &AppState,
    repo: &RepositoryRow,
    commitish: Option<&str>,
) -> AppResult<(CommitSha, i64)> {
    sync_history(state, repo).await?;
    resolve_fetched(state, repo, commitish.unwrap_or(&repo.branch)).await
}

/// Resolves `commitish` in the mirror as it is (fetched a moment ago by the caller) and
/// records the commit; returns its sha and database id.
pub async fn resolve_fetched(
    state: &AppState,
    repo: &RepositoryRow,
    commitish: &str,
) -> AppResult<(CommitSha, i64)> {
    let remote = Remote::of(state, repo).await?;
    let wanted = commitish.to_owned();
    if wanted.is_empty() || wanted.len() > 256 || wanted.starts_with('-') {
        return Err(AppError::BadRequest(format!(
            "{wanted:?} is not a commit name"
        )));
    }
    let info = tokio::task::spawn_blocking(move || -> AppResult<CommitInfo> {
        let mirror = remote.open()?;
        let sha = mirror
            .resolve(&wanted)
            .map_err(|e| remote.error(format!("{wanted:?}: {e}")))?;
        mirror.commit_info(&sha).map_err(|e| remote.error(e))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let record = to_record(info)?;
    let id = state.db.record_commit(repo.id, &record).await?;
    Ok((record.sha, id))
}

/// Fetches a pull request's head ref (`refs/pull/N/head`, `refs/merge-requests/N/head`) into
/// the mirror: a fork's head is on no branch of the repository.
pub async fn fetch_pull_head(
    state: &AppState,
    repo: &RepositoryRow,
    reference: &str,
) -> AppResult<()> {
    let remote = Remote::of(state, repo).await?;
    let reference = reference.to_owned();
    tokio::task::spawn_blocking(move || -> AppResult<()> {
        let mirror = remote.open()?;
        mirror
            .fetch_pull_head(&reference)
            .map_err(|e| remote.error(format!("{reference}: {e}")))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?
}

/// A recorded commit named by `spec` (a sha or its prefix, or a branch or tag of the mirror
/// as it is), for reads: it never fetches or clones, so that anonymous requests for unknown
/// commits cost one database lookup and never reach the remote.
pub async fn recorded_commit(
    state: &AppState,
    repo: &RepositoryRow,
    spec: &str,
) -> AppResult<CommitRow> {
    match state.db.commit(repo.id, spec).await {
        Err(DbError::NotFound(_)) if is_ref_name(spec) => {
            let remote = Remote::of(state, repo).await?;
            let wanted = spec.to_owned();
            let sha = tokio::task::spawn_blocking(move || -> AppResult<Option<String>> {
                Ok(remote
                    .open_existing()?
                    .and_then(|mirror| mirror.resolve(&wanted).ok()))
            })
            .await
            .map_err(|e| AppError::Internal(e.into()))??;
            let sha =
                sha.ok_or_else(|| AppError::from(DbError::NotFound(format!("commit {spec:?}"))))?;
            Ok(state.db.commit(repo.id, &sha).await?)
        }
        other => Ok(other?),
    }
}

/// Whether `spec` could name a branch or tag (a sha's prefix is looked up in the database
/// only).
fn is_ref_name(spec: &str) -> bool {
    let hex = spec.len() >= 7 && spec.bytes().all(|b| b.is_ascii_hexdigit());
    !hex && !spec.is_empty()
        && spec.len() <= 256
        && !spec.starts_with('-')
        && !spec.chars().any(char::is_control)
}

/// The merge base of `sha` and the head of `branch` in the mirror as it is (a read: no
/// fetch): where a branch forked from the tracked one.
pub async fn merge_base(
    state: &AppState,
    repo: &RepositoryRow,
    sha: &str,
    branch: &str,
) -> AppResult<String> {
    let remote = Remote::of(state, repo).await?;
    let (sha, branch) = (sha.to_owned(), branch.to_owned());
    tokio::task::spawn_blocking(move || -> AppResult<String> {
        let mirror = remote
            .open_existing()?
            .ok_or_else(|| AppError::from(DbError::NotFound(format!("branch {branch:?}"))))?;
        let other = mirror
            .resolve(&branch)
            .map_err(|e| remote.error(format!("branch {branch:?}: {e}")))?;
        let git = git2::Repository::open_bare(mirror.path()).map_err(|e| remote.error(e))?;
        let parse = |s: &str| git2::Oid::from_str(s).map_err(|e| remote.error(e));
        let base = git
            .merge_base(parse(&sha)?, parse(&other)?)
            .map_err(|e| remote.error(format!("no merge base with {branch:?}: {e}")))?;
        Ok(base.to_string())
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?
}
