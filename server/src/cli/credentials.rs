//! The credential flags of `kymo repo add` and `kymo repo set`. Secrets are read from a file
//! (or standard input) or an environment variable, never from the command line, so that they
//! stay out of shell history and process listings.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use kymo_core::credentials::GitCredential;

/// How the server and workers authenticate to a private remote.
#[derive(Debug, Default, Args)]
pub struct CredentialArgs {
    /// HTTPS user name for a private remote (with --https-token-file or --https-token-env).
    #[arg(long, value_name = "USER", conflicts_with = "ssh_key")]
    pub https_user: Option<String>,
    /// Read the HTTPS token from this file (`-`: standard input).
    #[arg(
        long,
        value_name = "FILE",
        requires = "https_user",
        conflicts_with = "https_token_env"
    )]
    pub https_token_file: Option<PathBuf>,
    /// Read the HTTPS token from this environment variable.
    #[arg(long, value_name = "VAR", requires = "https_user")]
    pub https_token_env: Option<String>,
    /// SSH private key file, at this path on the server's and every worker's machine (its
    /// host must be in their `~/.ssh/known_hosts`).
    #[arg(long, value_name = "PATH")]
    pub ssh_key: Option<String>,
    /// Read the SSH key's passphrase from this file (`-`: standard input).
    #[arg(
        long,
        value_name = "FILE",
        requires = "ssh_key",
        conflicts_with = "ssh_passphrase_env"
    )]
    pub ssh_passphrase_file: Option<PathBuf>,
    /// Read the SSH key's passphrase from this environment variable.
    #[arg(long, value_name = "VAR", requires = "ssh_key")]
    pub ssh_passphrase_env: Option<String>,
}

/// Most bytes read as a secret.
const MAX_SECRET: u64 = 4096;

impl CredentialArgs {
    /// The credential these flags give, if any.
    pub fn credential(&self) -> anyhow::Result<Option<GitCredential>> {
        if let Some(username) = &self.https_user {
            let token = secret(
                "HTTPS token",
                self.https_token_file.as_deref(),
                self.https_token_env.as_deref(),
            )?
            .context("--https-user needs --https-token-file FILE or --https-token-env VAR")?;
            return Ok(Some(GitCredential::Https {
                username: username.clone(),
                token,
            }));
        }
        let Some(key) = &self.ssh_key else {
            return Ok(None);
        };
        // A key that exists here is named by its absolute path; one that does not is taken to
        // be a path on the server's machine.
        let key_path = match Path::new(key).canonicalize() {
            Ok(path) => path.display().to_string(),
            Err(_) => key.clone(),
        };
        let passphrase = secret(
            "SSH key passphrase",
            self.ssh_passphrase_file.as_deref(),
            self.ssh_passphrase_env.as_deref(),
        )?;
        Ok(Some(GitCredential::Ssh {
            key_path,
            passphrase,
        }))
    }
}

/// A secret from a file (`-`: standard input) or an environment variable, without the line
/// end that files and `echo` add.
fn secret(what: &str, file: Option<&Path>, var: Option<&str>) -> anyhow::Result<Option<String>> {
    let text = match (file, var) {
        (Some(path), _) if path == Path::new("-") => read_limited(std::io::stdin().lock())
            .with_context(|| format!("cannot read the {what} from standard input"))?,
        (Some(path), _) => std::fs::File::open(path)
            .and_then(read_limited)
            .with_context(|| format!("cannot read the {what} from {}", path.display()))?,
        (None, Some(var)) => std::env::var(var)
            .with_context(|| format!("the {what}'s environment variable {var} is not set"))?,
        (None, None) => return Ok(None),
    };
    let text = text.trim_end_matches(['\n', '\r']).to_owned();
    if text.is_empty() {
        bail!("the {what} is empty");
    }
    Ok(Some(text))
}

fn read_limited(reader: impl Read) -> std::io::Result<String> {
    let mut text = String::new();
    reader.take(MAX_SECRET + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SECRET {
        return Err(std::io::Error::other(format!(
            "longer than {MAX_SECRET} bytes"
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_loses_its_line_end_and_oversized_or_empty_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok-1\n").unwrap();
        let args = CredentialArgs {
            https_user: Some("alice".into()),
            https_token_file: Some(file.clone()),
            ..Default::default()
        };
        assert_eq!(
            args.credential().unwrap(),
            Some(GitCredential::Https {
                username: "alice".into(),
                token: "tok-1".into()
            })
        );
        std::fs::write(&file, "x".repeat(5000)).unwrap();
        assert!(args.credential().is_err());
        std::fs::write(&file, "\n").unwrap();
        assert!(args.credential().is_err());
        let missing = CredentialArgs {
            https_user: Some("alice".into()),
            https_token_env: Some("KYMO_TEST_SURELY_UNSET_VARIABLE".into()),
            ..Default::default()
        };
        let error = missing.credential().unwrap_err().to_string();
        assert!(error.contains("KYMO_TEST_SURELY_UNSET_VARIABLE"), "{error}");
        let no_token = CredentialArgs {
            https_user: Some("alice".into()),
            ..Default::default()
        };
        assert!(no_token.credential().is_err());
        assert_eq!(CredentialArgs::default().credential().unwrap(), None);
    }

    #[test]
    fn an_existing_ssh_key_is_named_by_its_absolute_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("id"), "key").unwrap();
        let args = CredentialArgs {
            ssh_key: Some(dir.path().join("id").display().to_string()),
            ..Default::default()
        };
        let Some(GitCredential::Ssh {
            key_path,
            passphrase,
        }) = args.credential().unwrap()
        else {
            panic!("an SSH credential");
        };
        assert!(key_path.starts_with('/') && key_path.ends_with("/id"));
        assert_eq!(passphrase, None);
    }
}
