//! The server's view of tracked repositories: a git mirror per repository, from which it
//! learns the tracked branch's first-parent history and resolves what users ask to run.

use kymo_core::db::{CommitRecord, RepositoryRow};
use kymo_core::model::CommitSha;
use kymo_worker::mirror::{CommitInfo, Mirror};

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

pub(crate) fn mirror_error(repo: &str, err: impl std::fmt::Display) -> AppError {
    AppError::BadRequest(format!("repository {repo:?}: {err}"))
}

/// Clones or fetches the repository's mirror and records the tracked branch's history.
pub async fn sync_history(state: &AppState, repo: &RepositoryRow) -> AppResult<()> {
    let dir = state.mirror_dir();
    let (name, url, branch) = (repo.name.clone(), repo.url.clone(), repo.branch.clone());
    let chain = tokio::task::spawn_blocking(move || -> AppResult<Vec<CommitInfo>> {
        let mirror =
            Mirror::open_or_clone(&dir, &name, &url).map_err(|e| mirror_error(&name, e))?;
        mirror.fetch().map_err(|e| mirror_error(&name, e))?;
        mirror
            .first_parent_history(&branch, HISTORY_LIMIT)
            .map_err(|e| mirror_error(&name, e))
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

/// Checks that a repository can be cloned and its branch read, before it is stored; returns
/// the branch: the one asked for, or the remote's default branch when none was.
pub async fn probe(
    state: &AppState,
    name: &str,
    url: &str,
    branch: Option<&str>,
) -> AppResult<String> {
    let dir = state.mirror_dir();
    let (name, url, branch) = (name.to_owned(), url.to_owned(), branch.map(str::to_owned));
    tokio::task::spawn_blocking(move || -> AppResult<String> {
        let mirror =
            Mirror::open_or_clone(&dir, &name, &url).map_err(|e| mirror_error(&name, e))?;
        let branch = match branch {
            Some(branch) => branch,
            None => mirror.default_branch().ok_or_else(|| {
                mirror_error(&name, "the remote names no default branch: pass --branch")
            })?,
        };
        mirror
            .resolve(&branch)
            .map_err(|e| mirror_error(&name, format!("branch {branch:?}: {e}")))?;
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
    let dir = state.mirror_dir();
    let name = repo.name.clone();
    let url = repo.url.clone();
    let wanted = commitish.unwrap_or(&repo.branch).to_owned();
    if wanted.is_empty() || wanted.len() > 256 || wanted.starts_with('-') {
        return Err(AppError::BadRequest(format!(
            "{wanted:?} is not a commit name"
        )));
    }
    let info = tokio::task::spawn_blocking(move || -> AppResult<CommitInfo> {
        let mirror =
            Mirror::open_or_clone(&dir, &name, &url).map_err(|e| mirror_error(&name, e))?;
        let sha = mirror
            .resolve(&wanted)
            .map_err(|e| mirror_error(&name, format!("{wanted:?}: {e}")))?;
        mirror.commit_info(&sha).map_err(|e| mirror_error(&name, e))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let record = to_record(info)?;
    let id = state.db.record_commit(repo.id, &record).await?;
    Ok((record.sha, id))
}

/// The merge base of `sha` and the head of `branch`: where a branch forked from the tracked one.
pub async fn merge_base(
    state: &AppState,
    repo: &RepositoryRow,
    sha: &str,
    branch: &str,
) -> AppResult<String> {
    sync_history(state, repo).await?;
    let dir = state.mirror_dir();
    let (name, url, sha, branch) = (
        repo.name.clone(),
        repo.url.clone(),
        sha.to_owned(),
        branch.to_owned(),
    );
    tokio::task::spawn_blocking(move || -> AppResult<String> {
        let mirror =
            Mirror::open_or_clone(&dir, &name, &url).map_err(|e| mirror_error(&name, e))?;
        let other = mirror
            .resolve(&branch)
            .map_err(|e| mirror_error(&name, format!("branch {branch:?}: {e}")))?;
        let git = git2::Repository::open_bare(mirror.path()).map_err(|e| mirror_error(&name, e))?;
        let parse = |s: &str| git2::Oid::from_str(s).map_err(|e| mirror_error(&name, e));
        let base = git
            .merge_base(parse(&sha)?, parse(&other)?)
            .map_err(|e| mirror_error(&name, format!("no merge base with {branch:?}: {e}")))?;
        Ok(base.to_string())
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?
}
