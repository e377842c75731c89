//! The servers started on this machine by this user, so that the CLI finds a local server's
//! admin token from any directory: `kymo serve` records its URL and the path of the admin
//! token it wrote beside its database in a per-user file (`$XDG_CONFIG_HOME/kymo/servers.json`,
//! or `~/.config/kymo/servers.json`; mode 0600, holding paths, never a token), and the CLI
//! reads the token of the server it talks to through it.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Servers remembered; the oldest are forgotten first.
const MAX_SERVERS: usize = 32;

/// Largest file read: a hand-edited or hostile file is ignored past it.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// One `kymo serve` of this user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalServer {
    /// `http://` and the address it listens on.
    pub url: String,
    /// The admin token file it wrote beside its database (mode 0600).
    pub token_file: PathBuf,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ServersFile {
    servers: Vec<LocalServer>,
}

/// The per-user file, when the environment names a home or a config directory.
pub fn servers_file() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            let home = PathBuf::from(std::env::var_os("HOME")?);
            home.is_absolute().then(|| home.join(".config"))
        })?;
    Some(config.join("kymo").join("servers.json"))
}

/// Records that a server listens at `url` with its admin token in `token_file`: it replaces
/// an earlier record of that URL, and records whose token file is gone are dropped.
pub fn remember(file: &Path, server: LocalServer) -> anyhow::Result<()> {
    let mut known = read(file).unwrap_or_default();
    known
        .servers
        .retain(|s| s.url != server.url && s.token_file.is_file());
    known.servers.insert(0, server);
    known.servers.truncate(MAX_SERVERS);
    let dir = file.parent().context("the servers file has no directory")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    // Written whole to a temporary file and renamed over the old one: two servers starting
    // at once leave one complete file, never a mix.
    let temporary = dir.join(format!(".servers.json.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    out.write_all(&serde_json::to_vec_pretty(&known)?)?;
    out.sync_all()?;
    std::fs::rename(&temporary, file).with_context(|| format!("cannot write {}", file.display()))
}

/// The admin token of the recorded server that `server_url` reaches, if one is recorded and
/// its token file is readable.
pub fn admin_token_for(file: &Path, server_url: &str) -> Option<String> {
    let known = read(file).ok()?;
    known
        .servers
        .iter()
        .filter(|s| same_server(&s.url, server_url))
        .find_map(|s| std::fs::read_to_string(&s.token_file).ok())
        .map(|token| token.trim().to_owned())
        .filter(|token| !token.is_empty())
}

fn read(file: &Path) -> anyhow::Result<ServersFile> {
    let opened = std::fs::File::open(file)?;
    if opened.metadata()?.len() > MAX_FILE_BYTES {
        anyhow::bail!("{} is larger than {MAX_FILE_BYTES} bytes", file.display());
    }
    Ok(serde_json::from_reader(std::io::BufReader::new(opened))?)
}

/// Whether two URLs reach the same server of this machine: the same port, and the same host
/// or two names of this machine (loopback, or the any-address a server listens on).
pub fn same_server(a: &str, b: &str) -> bool {
    match (host_and_port(a), host_and_port(b)) {
        (Some((host_a, port_a)), Some((host_b, port_b))) => {
            port_a == port_b
                && (host_a.eq_ignore_ascii_case(&host_b)
                    || (is_local(&host_a) && is_local(&host_b)))
        }
        _ => false,
    }
}

/// The host and port of an `http(s)://` URL (the scheme's port when none is written).
fn host_and_port(url: &str) -> Option<(String, u16)> {
    let (rest, default_port) = match url.split_once("://")? {
        ("http", rest) => (rest, 80),
        ("https", rest) => (rest, 443),
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

fn is_local(host: &str) -> bool {
    matches!(
        host.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1" | "0.0.0.0" | "::"
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn names_of_this_machine_reach_the_same_server_on_the_same_port() {
        assert!(same_server(
            "http://127.0.0.1:8080",
            "http://localhost:8080/"
        ));
        assert!(same_server("http://0.0.0.0:8080", "http://127.0.0.1:8080"));
        assert!(same_server("http://[::]:9000", "http://[::1]:9000/api"));
        assert!(same_server(
            "http://bench.lan:8080",
            "http://BENCH.lan:8080"
        ));
        assert!(!same_server(
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8081"
        ));
        assert!(!same_server(
            "http://127.0.0.1:8080",
            "http://bench.lan:8080"
        ));
        assert!(!same_server("http://127.0.0.1", "https://127.0.0.1"));
        for bad in [
            "",
            "127.0.0.1:8080",
            "ftp://x:1",
            "http://:80",
            "http://h:99999",
        ] {
            assert!(!same_server(bad, "http://127.0.0.1:8080"), "{bad}");
        }
    }

    #[test]
    fn a_remembered_server_gives_its_token_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kymo").join("servers.json");
        let token = dir.path().join("kymo.db.admin-token");
        std::fs::write(&token, "kymo_admin_abc\n").unwrap();
        let server = |url: &str| LocalServer {
            url: url.into(),
            token_file: token.clone(),
        };
        remember(&file, server("http://127.0.0.1:8080")).unwrap();
        remember(&file, server("http://127.0.0.1:9000")).unwrap();
        remember(&file, server("http://127.0.0.1:8080")).unwrap();
        assert_eq!(
            admin_token_for(&file, "http://localhost:8080").as_deref(),
            Some("kymo_admin_abc")
        );
        assert_eq!(admin_token_for(&file, "http://127.0.0.1:7000"), None);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("kymo_admin_abc"), "paths only: {text}");
        assert_eq!(
            text.matches("8080").count(),
            1,
            "one record per URL: {text}"
        );

        // A record whose token file is gone is dropped at the next start.
        std::fs::remove_file(&token).unwrap();
        let other = dir.path().join("other-token");
        std::fs::write(&other, "t2").unwrap();
        remember(
            &file,
            LocalServer {
                url: "http://127.0.0.1:7000".into(),
                token_file: other,
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("9000") && !text.contains("8080"), "{text}");
    }

    #[test]
    fn a_broken_or_hostile_file_gives_no_token_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("servers.json");
        for bad in [
            "not json".to_owned(),
            r#"{"servers": [{"url": 1}]}"#.to_owned(),
            format!(r#"{{"servers": [], "pad": "{}"}}"#, "x".repeat(100_000)),
            r#"{"servers": [{"url": "http://127.0.0.1:8080", "token_file": "/nonexistent/t"}]}"#
                .to_owned(),
        ] {
            std::fs::write(&file, &bad).unwrap();
            assert_eq!(admin_token_for(&file, "http://127.0.0.1:8080"), None);
        }
        let token = dir.path().join("t");
        std::fs::write(&token, "tok").unwrap();
        remember(
            &file,
            LocalServer {
                url: "http://127.0.0.1:8080".into(),
                token_file: token,
            },
        )
        .unwrap();
        assert_eq!(
            admin_token_for(&file, "http://127.0.0.1:8080").as_deref(),
            Some("tok")
        );
    }
}
