//! Authenticating fetches from private remotes (an HTTPS token or an SSH key) and bounding
//! every git network operation in time, so that a remote that accepts and never answers
//! fails the operation instead of holding it.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use git2::{Cred, CredentialType, RemoteCallbacks};
use kymo_core::credentials::GitCredential;

/// How long a remote may stay silent (and a connection may take) before the operation fails,
/// unless `KYMO_GIT_TIMEOUT` (seconds) says otherwise. A large fetch that keeps sending is
/// never cut: this bounds silence, not the whole transfer.
const DEFAULT_GIT_TIMEOUT: Duration = if cfg!(test) {
    // Unit tests share one process-wide setting; a hanging remote must fail them quickly.
    Duration::from_secs(3)
} else {
    Duration::from_secs(30)
};

/// The git network timeout in force, applying it to libgit2 on first use.
///
/// Every network operation of kymo goes through this before it starts (see `fetch_all` in
/// `mirror.rs`), so the options are written once, before any thread reads them: that is the
/// condition libgit2's global options set.
pub fn git_timeout() -> Duration {
    static APPLIED: OnceLock<Duration> = OnceLock::new();
    *APPLIED.get_or_init(|| {
        let timeout = std::env::var("KYMO_GIT_TIMEOUT")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|s| (1..=3600).contains(s))
            .map_or(DEFAULT_GIT_TIMEOUT, Duration::from_secs);
        let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: this runs once, inside `OnceLock::get_or_init`, before the first network
        // operation of this process; no libgit2 stream reads these options concurrently,
        // because every stream is created by an operation that called this function first.
        unsafe {
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(millis);
            let _ = git2::opts::set_server_timeout_in_milliseconds(millis);
        }
        timeout
    })
}

/// The user SSH logs in as when the URL names none.
const DEFAULT_SSH_USER: &str = "git";

/// What to hand libgit2 when the remote asks for credentials.
#[derive(Debug, PartialEq, Eq)]
enum Answer<'a> {
    UserPass {
        username: &'a str,
        token: &'a str,
    },
    SshKey {
        username: String,
        key_path: &'a str,
        passphrase: Option<&'a str>,
    },
    Username(String),
}

/// Decides the answer to a request for credentials; `tries` is how many secrets were already
/// offered (libgit2 asks again after a refusal, forever unless told to stop). Errors are the
/// messages the operation fails with: they name the user or key file, never the secret.
fn answer<'a>(
    credential: Option<&'a GitCredential>,
    username_from_url: Option<&str>,
    allowed: CredentialType,
    tries: u32,
) -> Result<Answer<'a>, String> {
    let wanted = if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        "a user name and token (HTTPS)"
    } else if allowed.intersects(CredentialType::SSH_KEY | CredentialType::USERNAME) {
        "an SSH key"
    } else {
        "a kind of credentials kymo does not support"
    };
    match credential {
        None => Err(format!(
            "the remote asks for {wanted} and the repository has none: set them with `kymo repo \
             set NAME --https-user USER --https-token-file FILE` (or `--ssh-key PATH`)"
        )),
        Some(GitCredential::Https { username, token }) => {
            if !allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
                Err(format!(
                    "the remote asks for {wanted}, but the repository's credential is an HTTPS token"
                ))
            } else if tries > 0 {
                Err(format!(
                    "the remote refused the HTTPS token of user {username}: check the user \
                     name and the token, and that the token may read this repository"
                ))
            } else {
                Ok(Answer::UserPass { username, token })
            }
        }
        Some(GitCredential::Ssh {
            key_path,
            passphrase,
        }) => {
            let username = username_from_url.unwrap_or(DEFAULT_SSH_USER).to_owned();
            if allowed.contains(CredentialType::USERNAME) {
                Ok(Answer::Username(username))
            } else if !allowed.contains(CredentialType::SSH_KEY) {
                Err(format!(
                    "the remote asks for {wanted}, but the repository's credential is an SSH key"
                ))
            } else if tries > 0 {
                Err(format!(
                    "the remote refused the SSH key {key_path} for user {username}: check that \
                     its public key is authorized there, and its passphrase"
                ))
            } else if !Path::new(key_path).is_file() {
                Err(format!(
                    "the SSH key file {key_path} does not exist on this machine"
                ))
            } else {
                Ok(Answer::SshKey {
                    username,
                    key_path,
                    passphrase: passphrase.as_deref(),
                })
            }
        }
    }
}

/// Callbacks that answer the remote's requests for credentials with `credential`, once.
pub fn remote_callbacks(credential: Option<&GitCredential>) -> RemoteCallbacks<'_> {
    let mut callbacks = RemoteCallbacks::new();
    let mut tries = 0;
    callbacks.credentials(move |_url, username_from_url, allowed| {
        match answer(credential, username_from_url, allowed, tries).map_err(|message| {
            git2::Error::new(git2::ErrorCode::Auth, git2::ErrorClass::Net, message)
        })? {
            Answer::Username(username) => Cred::username(&username),
            Answer::UserPass { username, token } => {
                tries += 1;
                Cred::userpass_plaintext(username, token)
            }
            Answer::SshKey {
                username,
                key_path,
                passphrase,
            } => {
                tries += 1;
                Cred::ssh_key(&username, None, Path::new(key_path), passphrase)
            }
        }
    });
    callbacks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn https() -> GitCredential {
        GitCredential::Https {
            username: "alice".into(),
            token: "tok-secret-1".into(),
        }
    }

    #[test]
    fn an_https_token_is_offered_once_then_refused_without_the_secret() {
        let credential = https();
        let plain = CredentialType::USER_PASS_PLAINTEXT;
        assert_eq!(
            answer(Some(&credential), None, plain, 0),
            Ok(Answer::UserPass {
                username: "alice",
                token: "tok-secret-1"
            })
        );
        let refused = answer(Some(&credential), None, plain, 1).unwrap_err();
        assert!(
            refused.contains("refused the HTTPS token of user alice"),
            "{refused}"
        );
        assert!(!refused.contains("tok-secret-1"));
        let mismatch = answer(Some(&credential), Some("git"), CredentialType::SSH_KEY, 0);
        assert!(mismatch.unwrap_err().contains("asks for an SSH key"));
    }

    #[test]
    fn no_credential_says_how_to_set_one() {
        let error = answer(None, None, CredentialType::USER_PASS_PLAINTEXT, 0).unwrap_err();
        assert!(error.contains("kymo repo set"), "{error}");
        assert!(error.contains("asks for a user name and token"), "{error}");
    }

    #[test]
    fn an_ssh_key_names_the_url_s_user_then_offers_the_key_once() {
        let key = tempfile::NamedTempFile::new().unwrap();
        let key_path = key.path().to_str().unwrap().to_owned();
        let credential = GitCredential::Ssh {
            key_path: key_path.clone(),
            passphrase: Some("pass-phrase".into()),
        };
        assert_eq!(
            answer(Some(&credential), None, CredentialType::USERNAME, 0),
            Ok(Answer::Username("git".into()))
        );
        assert_eq!(
            answer(
                Some(&credential),
                Some("deploy"),
                CredentialType::SSH_KEY,
                0
            ),
            Ok(Answer::SshKey {
                username: "deploy".into(),
                key_path: &key_path,
                passphrase: Some("pass-phrase"),
            })
        );
        let refused = answer(
            Some(&credential),
            Some("deploy"),
            CredentialType::SSH_KEY,
            1,
        )
        .unwrap_err();
        assert!(
            refused.contains(&key_path) && !refused.contains("pass-phrase"),
            "{refused}"
        );
        let https_wanted = answer(
            Some(&credential),
            None,
            CredentialType::USER_PASS_PLAINTEXT,
            0,
        )
        .unwrap_err();
        assert!(
            https_wanted.contains("credential is an SSH key"),
            "{https_wanted}"
        );
    }

    #[test]
    fn a_missing_key_file_is_named() {
        let credential = GitCredential::Ssh {
            key_path: "/nonexistent/kymo/id_ed25519".into(),
            passphrase: None,
        };
        let error = answer(Some(&credential), None, CredentialType::SSH_KEY, 0).unwrap_err();
        assert!(
            error.contains("/nonexistent/kymo/id_ed25519 does not exist"),
            "{error}"
        );
    }

    #[test]
    fn a_remote_that_accepts_and_never_answers_times_out_and_leaves_no_clone() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/r.git", listener.local_addr().unwrap());
        let holder = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
        let cache = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let error = crate::mirror::Mirror::open_or_clone(cache.path(), "hang", &url).unwrap_err();
        assert!(
            matches!(
                error,
                crate::mirror::MirrorError::Timeout { seconds: 3, .. }
            ),
            "{error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        let mirrors = cache.path().join("mirrors");
        assert!(!mirrors.join("hang.git").exists());
        assert_eq!(
            std::fs::read_dir(mirrors.join(".partial")).unwrap().count(),
            0
        );
        drop(holder.join());
    }

    #[test]
    fn ssh_urls_reach_the_ssh_transport() {
        let cache = tempfile::tempdir().unwrap();
        let credential = GitCredential::Ssh {
            key_path: "/nonexistent/id".into(),
            passphrase: None,
        };
        // Port 1 refuses at once: the error comes from connecting, which shows that this build
        // of libgit2 has an SSH transport (without one: "unsupported URL protocol").
        let url = "ssh://git@127.0.0.1:1/repo.git";
        let error =
            crate::mirror::Mirror::open_or_clone_with(cache.path(), "ssh", url, Some(&credential))
                .unwrap_err()
                .to_string();
        assert!(!error.contains("unsupported"), "{error}");
        assert!(error.contains(url), "{error}");
    }

    #[test]
    fn the_timeout_is_applied_to_libgit2() {
        let timeout = git_timeout();
        // SAFETY: reading the options races with no writer: `git_timeout` wrote them once.
        let (connect, idle) = unsafe {
            (
                git2::opts::get_server_connect_timeout_in_milliseconds().unwrap(),
                git2::opts::get_server_timeout_in_milliseconds().unwrap(),
            )
        };
        assert_eq!(connect as u128, timeout.as_millis());
        assert_eq!(idle as u128, timeout.as_millis());
    }
}
