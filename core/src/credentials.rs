//! Credentials for private git remotes, and the redaction that keeps secrets out of everything
//! kymo shows: pages, logs, API answers, job errors and webhook deliveries.
//!
//! A credential is stored on the server and handed to a worker with each claimed job; it is
//! never written into a URL or a mirror's git config. Text that may hold a URL (a repository's
//! URL, a message from libgit2) goes through [`redact_secrets`] before anyone sees it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// What stands in for a secret that was taken out of a text.
pub const REDACTED: &str = "***";

/// Longest user name, token, passphrase or key path accepted.
const MAX_FIELD: usize = 4096;

/// How kymo authenticates to a private git remote. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum GitCredential {
    /// HTTPS basic authentication: a user name and a token (or password), kept on the server.
    Https { username: String, token: String },
    /// An SSH private key file on the machine that fetches (the server's and each worker's),
    /// with its passphrase when it has one. The user is the URL's (`git@host:...`), else `git`.
    Ssh {
        key_path: String,
        #[serde(default)]
        passphrase: Option<String>,
    },
}

impl std::fmt::Debug for GitCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What may be shown of a credential: its kind and who or what, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CredentialSummary {
    /// `https` or `ssh`.
    pub kind: String,
    /// The HTTPS user name.
    pub username: Option<String>,
    /// The SSH key file on the fetching machines.
    pub key_path: Option<String>,
}

impl GitCredential {
    /// Checks lengths and characters, so that nothing stored can break a header or a log line.
    pub fn validated(self) -> Result<Self, String> {
        let check = |what: &str, value: &str| {
            if value.is_empty() || value.len() > MAX_FIELD || value.chars().any(char::is_control) {
                Err(format!(
                    "the {what} must have 1-{MAX_FIELD} characters and no control characters"
                ))
            } else {
                Ok(())
            }
        };
        match &self {
            GitCredential::Https { username, token } => {
                check("HTTPS user name", username)?;
                if username.contains(':') {
                    return Err("the HTTPS user name cannot contain ':'".into());
                }
                check("HTTPS token", token)?;
            }
            GitCredential::Ssh {
                key_path,
                passphrase,
            } => {
                check("SSH key path", key_path)?;
                if !key_path.starts_with('/') {
                    return Err(format!(
                        "the SSH key path {:?} must be absolute: it is read on the server's and the workers' machines",
                        key_path.chars().take(80).collect::<String>()
                    ));
                }
                if let Some(passphrase) = passphrase {
                    check("SSH key passphrase", passphrase)?;
                }
            }
        }
        Ok(self)
    }

    /// Its kind and who or what, without the secret.
    pub fn summary(&self) -> CredentialSummary {
        match self {
            GitCredential::Https { username, .. } => CredentialSummary {
                kind: "https".into(),
                username: Some(username.clone()),
                key_path: None,
            },
            GitCredential::Ssh { key_path, .. } => CredentialSummary {
                kind: "ssh".into(),
                username: None,
                key_path: Some(key_path.clone()),
            },
        }
    }

    /// One line for people: `HTTPS token of user alice`, `SSH key /keys/id`.
    pub fn describe(&self) -> String {
        match self {
            GitCredential::Https { username, .. } => format!("HTTPS token of user {username}"),
            GitCredential::Ssh { key_path, .. } => format!("SSH key {key_path}"),
        }
    }

    /// `text` with URL credentials and this credential's own secrets taken out: for messages
    /// that libgit2 or a remote produced while this credential was in use.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = redact_secrets(text).into_owned();
        let secrets = match self {
            GitCredential::Https { token, .. } => vec![token.as_str()],
            GitCredential::Ssh { passphrase, .. } => {
                passphrase.iter().map(|p| p.as_str()).collect()
            }
        };
        for secret in secrets {
            // A one- or two-character secret would blank out ordinary words; none is that short
            // in practice, and the URL redaction above still applies.
            if secret.len() >= 3 {
                text = text.replace(secret, REDACTED);
            }
        }
        text
    }
}

/// `text` with the credentials of every URL in it replaced by `***`: the password of
/// `scheme://user:password@host`, and the whole user part of `https://token@host` (forges
/// accept a token as the user name). `ssh://git@host` keeps its user, which is no secret.
/// Text without credentials is returned as it is.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let scheme_start = rest[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let scheme = &rest[scheme_start..at];
        let after = at + 3;
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        // The authority ends at the path, query, fragment, or anything that ends a URL in prose.
        let authority_end = rest
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace()
            })
            .unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if let Some(user_end) = authority.rfind('@') {
            let userinfo = &authority[..user_end];
            let keep_user = scheme.eq_ignore_ascii_case("ssh") || scheme.ends_with("+ssh");
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                    changed = true;
                }
                None if keep_user => out.push_str(userinfo),
                None => {
                    out.push_str(REDACTED);
                    changed = true;
                }
            }
            out.push_str(&authority[user_end..]);
            rest = &rest[authority_end..];
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Splits the user and password out of an `http(s)://user:password@host/...` URL: the URL
/// without them, the user and the password. `None` when the URL holds no password.
pub fn split_url_credentials(url: &str) -> Option<(String, String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("http")) {
        return None;
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, host) = authority.rsplit_once('@')?;
    let (user, password) = userinfo.split_once(':')?;
    let decode = |s: &str| percent_decode(s);
    Some((
        format!("{scheme}://{host}{path}"),
        decode(user),
        decode(password),
    ))
}

/// Decodes `%XX` escapes (as a URL's user part may hold); invalid escapes stay as they are.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serializes a URL with its credentials redacted: every answer that carries a repository's
/// URL uses it (`#[serde(serialize_with = ...)]`).
pub fn serialize_redacted<S: serde::Serializer>(
    url: &str,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&redact_secrets(url))
}

#[cfg(test)]
#[path = "credentials_tests.rs"]
mod tests;
