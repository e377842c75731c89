//! Issue 20, availability: silent sockets, half-sent headers and idle keep-alive connections
//! are closed after the header-read timeout, over real sockets against `kymo serve` limited
//! to 1,024 descriptors, and `/healthz` keeps answering.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use crate::support::KymoServer;

/// Open descriptors allowed to the server, as on a default Linux account.
const SERVER_DESCRIPTORS: u64 = 1024;
const TIMEOUT_SECONDS: u64 = 2;

fn set_descriptor_limit(soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the struct passed to it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// This test process needs more than a thousand sockets of its own.
fn raise_own_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed to it.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    assert!(
        limit.rlim_max >= 4096,
        "the hard descriptor limit is too low for this test"
    );
    set_descriptor_limit(limit.rlim_max, limit.rlim_max).unwrap();
}

fn small_server() -> KymoServer {
    let timeout = TIMEOUT_SECONDS.to_string();
    KymoServer::start_with(
        &["--no-worker", "--header-read-timeout", &timeout],
        |command| {
            // SAFETY: only setrlimit runs between fork and exec.
            unsafe {
                command.pre_exec(|| set_descriptor_limit(SERVER_DESCRIPTORS, SERVER_DESCRIPTORS));
            }
        },
    )
}

fn address(server: &KymoServer) -> String {
    server.url.trim_start_matches("http://").to_owned()
}

/// Whether the server closes `stream` within `within` (EOF or reset on read).
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut buffer = [0u8; 4096];
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
    false
}

fn healthz_answers(server: &KymoServer) -> bool {
    ureq::get(format!("{}/healthz", server.url))
        .config()
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .call()
        .is_ok_and(|r| r.status() == 200)
}

#[test]
fn a_thousand_silent_sockets_are_closed_and_healthz_keeps_answering() {
    raise_own_limit();
    let server = small_server();
    let address = address(&server);
    let mut silent: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();
    let started = Instant::now();
    // Connections beyond the cap are closed at once; the others within the timeout. Then
    // /healthz answers (it may be refused while the cap is full).
    let slack = Duration::from_secs(TIMEOUT_SECONDS + 3);
    for stream in &mut silent {
        assert!(
            closed_within(stream, slack.saturating_sub(started.elapsed())),
            "a silent socket was still open after {:?}",
            started.elapsed()
        );
    }
    drop(silent);
    assert!(healthz_answers(&server), "healthz after the flood");

    // Below the cap, /healthz answers at once while silent sockets wait.
    let _waiting: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        healthz_answers(&server),
        "healthz beside 500 silent sockets"
    );
}

#[test]
fn half_sent_headers_and_idle_keep_alive_connections_are_closed() {
    let server = small_server();
    let address = address(&server);
    let mut half = TcpStream::connect(&address).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: kymo\r\nX-Slow: ")
        .unwrap();
    let mut idle = TcpStream::connect(&address).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: kymo\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 12];
    idle.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");

    let within = Duration::from_secs(TIMEOUT_SECONDS + 3);
    let started = Instant::now();
    assert!(
        closed_within(&mut half, within),
        "a half-sent header was kept"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(TIMEOUT_SECONDS * 1000 - 500),
        "closed before the timeout: {:?}",
        started.elapsed()
    );
    assert!(
        closed_within(&mut idle, within),
        "an idle keep-alive connection was kept"
    );
}
