//! Git mirrors of the tracked repositories and the work trees that jobs build in.
//!
//! One bare mirror per repository lives under `<cache_dir>/mirrors/`; it holds every branch
//! and tag of the remote, force-updated on each fetch, so force-pushes and deleted branches
//! are followed. A job materialises one commit's tree into a work tree of its own.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use git2::{AutotagOption, FetchOptions, FetchPrune, ObjectType, Oid, Repository};
use kymo_core::credentials::{GitCredential, redact_secrets};

use crate::credentials::{git_timeout, remote_callbacks};

const FETCH_REFSPECS: [&str; 2] = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];
const REMOTE: &str = "origin";
/// Longest mirror directory name we create, well under any filesystem's limit.
const MAX_DIR_NAME: usize = 200;

/// Why a mirror operation failed. Messages name the repository, commit or path concerned.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("repository name {name:?} cannot name a mirror: {reason}")]
    InvalidName { name: String, reason: &'static str },
    /// `message` is libgit2's, with any credentials in it redacted.
    #[error("{action}: {message}")]
    Git {
        action: String,
        code: git2::ErrorCode,
        message: String,
    },
    #[error("{action}: {source}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{commitish:?} names no commit in the mirror of {url}")]
    UnknownRevision { commitish: String, url: String },
    #[error(
        "commit {sha} is not in the mirror of {url}: it was never pushed there, or was force-pushed away"
    )]
    MissingCommit { sha: String, url: String },
    #[error("{action}: the remote did not answer within {seconds} s")]
    Timeout { action: String, seconds: u64 },
    #[error("the repository {url} does not exist: it was moved or deleted")]
    RemoteGone { url: String },
    #[error("{sha:?} is not a full 40-hex-digit commit sha")]
    InvalidSha { sha: String },
    #[error("{path} at commit {sha} is {size} bytes; the limit is {max}")]
    FileTooLarge {
        sha: String,
        path: String,
        size: usize,
        max: usize,
    },
    #[error("{path} at commit {sha} is not a regular file")]
    NotAFile { sha: String, path: String },
}

fn git(action: impl Into<String>) -> impl FnOnce(git2::Error) -> MirrorError {
    let action = action.into();
    move |source| MirrorError::Git {
        action,
        code: source.code(),
        message: redact_secrets(source.message()).into_owned(),
    }
}

fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> MirrorError {
    let action = action.into();
    move |source| MirrorError::Io { action, source }
}

/// A commit as kymo records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// 40 lowercase hex digits.
    pub sha: String,
    /// Parent shas, first parent first.
    pub parents: Vec<String>,
    /// `Name <email>` of the author.
    pub author: String,
    /// Committer time in unix seconds: when the commit was made in the history it is in
    /// (a rebase keeps the author time but not this one).
    pub time: i64,
    /// The full message.
    pub message: String,
}

/// A bare mirror of one remote repository.
pub struct Mirror {
    repo: Repository,
    path: PathBuf,
    /// The remote's URL with any credentials redacted: what messages show.
    url: String,
    credential: Option<GitCredential>,
    lock: Arc<Mutex<()>>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("path", &self.path)
            .field("url", &self.url)
            .finish()
    }
}

/// Maps a repository name to a directory name that cannot leave `mirrors/`: ASCII letters,
/// digits, `_` and `-` are kept, as is `.` anywhere but first; every other byte becomes
/// `%XX`. The mapping is injective, so distinct names never share a mirror.
pub fn mirror_dir_name(repo_name: &str) -> Result<String, MirrorError> {
    let invalid = |reason| MirrorError::InvalidName {
        name: repo_name.chars().take(80).collect(),
        reason,
    };
    if repo_name.is_empty() {
        return Err(invalid("it is empty"));
    }
    let mut out = String::with_capacity(repo_name.len() + 4);
    for (i, b) in repo_name.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".git");
    if out.len() > MAX_DIR_NAME {
        return Err(invalid("it is too long"));
    }
    Ok(out)
}

impl Mirror {
    /// Opens the mirror of `repo_name` under `cache_dir`, or clones `url` (a local path, a
    /// `file://` URL, or whatever transports this build of libgit2 supports) into a new one.
    /// An existing mirror is not fetched; its remote is pointed at `url` if that changed.
    pub fn open_or_clone(
        cache_dir: &Path,
        repo_name: &str,
        url: &str,
    ) -> Result<Mirror, MirrorError> {
        Self::open_or_clone_with(cache_dir, repo_name, url, None)
    }

    /// [`Mirror::open_or_clone`] for a private remote: clones and fetches authenticate with
    /// `credential`, which is kept in memory only (never in the mirror's config).
    pub fn open_or_clone_with(
        cache_dir: &Path,
        repo_name: &str,
        url: &str,
        credential: Option<&GitCredential>,
    ) -> Result<Mirror, MirrorError> {
        let shown = redact_secrets(url).into_owned();
        let mirrors = cache_dir.join("mirrors");
        let path = mirrors.join(mirror_dir_name(repo_name)?);
        let lock = mirror_lock(&path);
        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let repo = match Repository::open_bare(&path) {
            Ok(repo) => {
                let current = repo
                    .find_remote(REMOTE)
                    .ok()
                    .and_then(|r| r.url().ok().map(str::to_owned));
                if current.as_deref() != Some(url) {
                    repo.remote_set_url(REMOTE, url).map_err(git(format!(
                        "pointing the mirror of {repo_name} at {shown}"
                    )))?;
                }
                repo
            }
            Err(_) => Self::clone_fresh(&mirrors, &path, url, credential)?,
        };
        drop(guard);
        Ok(Mirror {
            repo,
            path,
            url: shown,
            credential: credential.cloned(),
            lock,
        })
    }

    /// Clones beside the final place and renames, so that an interrupted clone never leaves
    /// a half-filled mirror where the next job would open it.
    fn clone_fresh(
        mirrors: &Path,
        path: &Path,
        url: &str,
        credential: Option<&GitCredential>,
    ) -> Result<Repository, MirrorError> {
        let partials = mirrors.join(PARTIAL_DIR);
        fs::create_dir_all(&partials).map_err(io(format!("creating {}", partials.display())))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        remove_abandoned_clones(&partials, &name);
        let partial = partials.join(format!("{name}.{}", std::process::id()));
        remove_if_present(&partial)?;
        // Only a mirror that cannot be opened gets here: a leftover of a broken disk or an
        // older layout, not a clone in progress (those live under PARTIAL_DIR).
        remove_if_present(path)?;
        let result = Self::clone_into(&partial, url, credential).and_then(|()| {
            fs::rename(&partial, path)
                .map_err(io(format!("moving the clone to {}", path.display())))
        });
        if let Err(error) = result {
            let _ = fs::remove_dir_all(&partial);
            return Err(error);
        }
        Repository::open_bare(path).map_err(git(format!("opening {}", path.display())))
    }

    fn clone_into(
        path: &Path,
        url: &str,
        credential: Option<&GitCredential>,
    ) -> Result<(), MirrorError> {
        let repo =
            Repository::init_bare(path).map_err(git(format!("creating {}", path.display())))?;
        repo.remote_with_fetch(REMOTE, url, FETCH_REFSPECS[0])
            .map_err(git(format!("adding remote {}", redact_secrets(url))))?;
        fetch_all(&repo, url, credential)
    }

    /// Where the mirror lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fetches every branch and tag, force-updating moved refs and pruning deleted ones.
    pub fn fetch(&self) -> Result<(), MirrorError> {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        fetch_all(&self.repo, &self.url, self.credential.as_ref())
    }

    /// Fetches one pull or merge request's head (`refs/pull/N/head` on GitHub and Gitea,
    /// `refs/merge-requests/N/head` on GitLab), which lives outside the branches a fetch
    /// takes when the request comes from a fork.
    pub fn fetch_pull_head(&self, reference: &str) -> Result<(), MirrorError> {
        let number = (reference.strip_prefix("refs/pull/"))
            .or_else(|| reference.strip_prefix("refs/merge-requests/"))
            .and_then(|rest| rest.strip_suffix("/head"))
            .filter(|n| !n.is_empty() && n.len() <= 12 && n.bytes().all(|b| b.is_ascii_digit()));
        if number.is_none() {
            return Err(MirrorError::UnknownRevision {
                commitish: reference.chars().take(80).collect(),
                url: self.url.clone(),
            });
        }
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let refspec = format!("+{reference}:{reference}");
        fetch_refspecs(&self.repo, &self.url, self.credential.as_ref(), &[&refspec])
    }

    /// The commit that a branch, tag, sha or other revision expression names.
    pub fn resolve(&self, commitish: &str) -> Result<String, MirrorError> {
        let unknown = || MirrorError::UnknownRevision {
            commitish: commitish.chars().take(80).collect(),
            url: self.url.clone(),
        };
        if commitish.is_empty() || commitish.starts_with('-') || commitish.len() > 256 {
            return Err(unknown());
        }
        let object = self
            .repo
            .revparse_single(commitish)
            .map_err(|_| unknown())?;
        let commit = object.peel_to_commit().map_err(|_| unknown())?;
        Ok(commit.id().to_string())
    }

    /// The remote's default branch as of the last fetch (`main`, `master`, ...), when the
    /// remote named one that exists in the mirror.
    pub fn default_branch(&self) -> Option<String> {
        let head = self.repo.find_reference("HEAD").ok()?;
        let target = head.symbolic_target().ok()??;
        self.repo.find_reference(target).ok()?;
        target.strip_prefix("refs/heads/").map(str::to_owned)
    }

    /// Whether commit `ancestor` is reachable from commit `descendant` (full shas; a commit
    /// is not its own ancestor).
    pub fn is_ancestor(&self, ancestor: &str, descendant: &str) -> bool {
        let (Ok(ancestor), Ok(descendant)) = (Oid::from_str(ancestor), Oid::from_str(descendant))
        else {
            return false;
        };
        self.repo
            .graph_descendant_of(descendant, ancestor)
            .unwrap_or(false)
    }

    /// Whether the mirror holds the commit with this full sha.
    pub fn has_commit(&self, sha: &str) -> bool {
        self.find_commit(sha).is_ok()
    }

    fn find_commit(&self, sha: &str) -> Result<git2::Commit<'_>, MirrorError> {
        if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(MirrorError::InvalidSha {
                sha: sha.chars().take(80).collect(),
            });
        }
        let missing = || MirrorError::MissingCommit {
            sha: sha.to_owned(),
            url: self.url.clone(),
        };
        let oid = Oid::from_str(sha).map_err(|_| missing())?;
        self.repo.find_commit(oid).map_err(|_| missing())
    }

    /// The recorded facts about one commit.
    pub fn commit_info(&self, sha: &str) -> Result<CommitInfo, MirrorError> {
        Ok(info_of(&self.find_commit(sha)?))
    }

    /// Up to `limit` commits of `branch`'s first-parent chain, newest (the tip) first: the
    /// order kymo's history follows.
    pub fn first_parent_history(
        &self,
        branch: &str,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, MirrorError> {
        let tip = match self.repo.find_reference(&format!("refs/heads/{branch}")) {
            Ok(reference) => reference
                .peel_to_commit()
                .map_err(git(format!("reading branch {branch}")))?,
            Err(_) => self.find_commit(&self.resolve(branch)?)?,
        };
        let mut history = Vec::with_capacity(limit.min(1024));
        let mut next = Some(tip);
        while let Some(commit) = next.take() {
            if history.len() >= limit {
                break;
            }
            history.push(info_of(&commit));
            next = commit.parent(0).ok();
        }
        Ok(history)
    }

    /// Makes `worktree` hold exactly the tree of commit `sha`: creates it if needed, removes
    /// everything already in it, then writes the commit's files.
    pub fn checkout(&self, sha: &str, worktree: &Path) -> Result<(), MirrorError> {
        let commit = self.find_commit(sha)?;
        let tree = commit
            .tree()
            .map_err(git(format!("reading the tree of {sha}")))?;
        if worktree.parent().is_none() || worktree.starts_with(&self.path) {
            return Err(MirrorError::Io {
                action: format!("checking out into {}", worktree.display()),
                source: std::io::Error::other("refusing to use this directory as a work tree"),
            });
        }
        fs::create_dir_all(worktree).map_err(io(format!("creating {}", worktree.display())))?;
        empty_dir(worktree)?;
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout
            .target_dir(worktree)
            .force()
            .recreate_missing(true)
            .update_index(false);
        self.repo
            .checkout_tree(tree.as_object(), Some(&mut checkout))
            .map_err(git(format!(
                "checking out {sha} into {}",
                worktree.display()
            )))
    }

    /// The contents of `path` in commit `sha`, or `None` if the commit has no such path.
    /// Files over `max_bytes` are an error, found without reading them.
    pub fn read_file_at(
        &self,
        sha: &str,
        path: &str,
        max_bytes: usize,
    ) -> Result<Option<Vec<u8>>, MirrorError> {
        let commit = self.find_commit(sha)?;
        let tree = commit
            .tree()
            .map_err(git(format!("reading the tree of {sha}")))?;
        let Ok(entry) = tree.get_path(Path::new(path)) else {
            return Ok(None);
        };
        let not_a_file = || MirrorError::NotAFile {
            sha: sha.to_owned(),
            path: path.to_owned(),
        };
        if entry.kind() != Some(ObjectType::Blob) || entry.filemode() == 0o120000 {
            return Err(not_a_file());
        }
        let odb = self
            .repo
            .odb()
            .map_err(git("opening the object database"))?;
        let (size, _) = odb
            .read_header(entry.id())
            .map_err(git(format!("reading {path} at {sha}")))?;
        if size > max_bytes {
            return Err(MirrorError::FileTooLarge {
                sha: sha.to_owned(),
                path: path.to_owned(),
                size,
                max: max_bytes,
            });
        }
        let blob = self
            .repo
            .find_blob(entry.id())
            .map_err(git(format!("reading {path} at {sha}")))?;
        Ok(Some(blob.content().to_vec()))
    }
}

/// The lock that serialises clones and fetches of one mirror within this process: the server
/// and the embedded worker share mirrors, and libgit2 fails rather than waits on a locked ref.
fn mirror_lock(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    locks.entry(path.to_owned()).or_default().clone()
}

/// Fetches every ref of the mirror's remote, authenticating with `credential` and failing
/// once the remote is silent for longer than the git timeout.
fn fetch_all(
    repo: &Repository,
    url: &str,
    credential: Option<&GitCredential>,
) -> Result<(), MirrorError> {
    fetch_refspecs(repo, url, credential, &FETCH_REFSPECS)
}

/// Fetches `refspecs` from the mirror's remote, as [`fetch_all`] describes.
fn fetch_refspecs(
    repo: &Repository,
    url: &str,
    credential: Option<&GitCredential>,
    refspecs: &[&str],
) -> Result<(), MirrorError> {
    let shown = redact_secrets(url);
    // libgit2 reports a local path that is gone as an "unsupported URL protocol": say what it is.
    let local = url.strip_prefix("file://").unwrap_or(url);
    if local.starts_with('/') && !Path::new(local).exists() {
        return Err(MirrorError::RemoteGone {
            url: shown.into_owned(),
        });
    }
    let timeout = git_timeout();
    let mut remote = repo
        .find_remote(REMOTE)
        .map_err(git("finding the mirror's remote"))?;
    let mut options = FetchOptions::new();
    options
        .prune(FetchPrune::On)
        .download_tags(AutotagOption::None)
        .remote_callbacks(remote_callbacks(credential));
    let action = format!("fetching {shown}");
    remote
        .fetch(refspecs, Some(&mut options), None)
        .map_err(|error| {
            let timed_out =
                error.code() == git2::ErrorCode::Timeout || error.message().contains("timed out");
            let error = git(action.clone())(error);
            match (timed_out, credential) {
                (true, _) => MirrorError::Timeout {
                    action,
                    seconds: timeout.as_secs(),
                },
                (false, Some(credential)) => scrub(error, credential),
                (false, None) => error,
            }
        })?;
    // The mirror's HEAD follows the remote's default branch (known from the fetch's ref
    // advertisement), so a repository added without a branch tracks its host's main line.
    if let Ok(default) = remote.default_branch()
        && let Ok(name) = default.as_str()
        && name.starts_with("refs/heads/")
    {
        let _ = repo.set_head(name);
    }
    Ok(())
}

/// Takes the credential's own secrets out of a git error's message, in case a remote echoed one.
fn scrub(error: MirrorError, credential: &GitCredential) -> MirrorError {
    match error {
        MirrorError::Git {
            action,
            code,
            message,
        } => MirrorError::Git {
            action,
            code,
            message: credential.scrub(&message),
        },
        other => other,
    }
}

fn info_of(commit: &git2::Commit<'_>) -> CommitInfo {
    let author = commit.author();
    CommitInfo {
        sha: commit.id().to_string(),
        parents: commit.parent_ids().map(|id| id.to_string()).collect(),
        author: format!(
            "{} <{}>",
            String::from_utf8_lossy(author.name_bytes()),
            String::from_utf8_lossy(author.email_bytes())
        ),
        time: commit.time().seconds(),
        message: String::from_utf8_lossy(commit.message_bytes()).into_owned(),
    }
}

/// Where clones in progress live, as `<mirror>.<pid>`: beside the mirrors, under a name no
/// mirror can have (mirror names never start with a dot).
const PARTIAL_DIR: &str = ".partial";

/// Removes the clones of mirror `name` left by processes that are gone (a worker killed
/// mid-clone), so that they do not pile up; a clone by a live process sharing the cache stays.
fn remove_abandoned_clones(partials: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(partials) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let pid = (file.to_str())
            .and_then(|f| f.strip_prefix(name)?.strip_prefix('.')?.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !process_alive(pid)) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether process `pid` runs; where that cannot be told, it is taken to run.
fn process_alive(pid: u32) -> bool {
    !cfg!(target_os = "linux") || Path::new("/proc").join(pid.to_string()).exists()
}

fn remove_if_present(path: &Path) -> Result<(), MirrorError> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("removing {}", path.display()))(e))
        }
        _ => Ok(()),
    }
}

/// Removes every entry of `dir` without following symlinks out of it.
fn empty_dir(dir: &Path) -> Result<(), MirrorError> {
    let entries = fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(io(format!("listing {}", dir.display())))?;
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let removed = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(io(format!("removing {}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
