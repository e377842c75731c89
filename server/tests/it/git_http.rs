//! A real authenticated git server for the tests: git's own `git http-backend` (CGI) behind a
//! small HTTP/1.1 server with basic authentication, on a loopback port. It can also be told to
//! hang: accept connections and never answer, as a dead remote behind a live load balancer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;

/// Serves the git repositories under `root` at `http://127.0.0.1:PORT/...` to one user.
pub struct GitHttpServer {
    pub base: String,
    hang: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

impl GitHttpServer {
    pub fn start(root: &Path, user: &str, token: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let hang = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"))
        );
        let (root, hang_flag, refused_count) = (root.to_owned(), hang.clone(), refused.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (root, expected) = (root.clone(), expected.clone());
                let (hang, refused) = (hang_flag.clone(), refused_count.clone());
                std::thread::spawn(move || {
                    if hang.load(Ordering::SeqCst) {
                        // Hold the connection open without a byte of answer.
                        std::thread::sleep(Duration::from_secs(120));
                        drop(stream);
                        return;
                    }
                    let _ = serve(stream, &root, &expected, &refused);
                });
            }
        });
        Self {
            base,
            hang,
            refused,
        }
    }

    /// From now on, accept connections and never answer.
    pub fn hang(&self) {
        self.hang.store(true, Ordering::SeqCst);
    }

    /// How many requests were refused for missing or wrong credentials.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }
}

/// A listener that accepts connections and never answers them.
pub fn silent_remote() -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    (base, handle)
}

struct Request {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Request> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body: Vec::new(),
    };
    if let Some(length) = request.header("content-length") {
        let mut body = vec![0; length.parse().unwrap_or(0)];
        reader.read_exact(&mut body)?;
        request.body = body;
    } else if request
        .header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            request.body.extend_from_slice(&chunk[..size]);
        }
    }
    Ok(request)
}

fn serve(
    stream: TcpStream,
    root: &Path,
    expected: &str,
    refused: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let request = read_request(&mut reader)?;
    let mut stream = stream;
    if request.header("authorization") != Some(expected) {
        refused.fetch_add(1, Ordering::SeqCst);
        stream.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"kymo-test\"\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    let output = run_backend(root, &request)?;
    // A CGI answer: headers (with an optional Status), a blank line, the body.
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        })
        .unwrap_or((output.len(), output.len()));
    let head = String::from_utf8_lossy(&output[..split.0]).into_owned();
    let body = &output[split.1..];
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for line in head.lines().filter(|l| !l.is_empty()) {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_owned();
            }
            _ => response.push_str(&format!("{line}\r\n")),
        }
    }
    let head = format!(
        "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

fn run_backend(root: &Path, request: &Request) -> std::io::Result<Vec<u8>> {
    let mut child = Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("CONTENT_TYPE", request.header("content-type").unwrap_or(""))
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("GIT_PROTOCOL", request.header("git-protocol").unwrap_or(""))
        .env("REMOTE_USER", "tester")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let body = request.body.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let output = child.wait_with_output()?;
    let _ = writer.join();
    Ok(output.stdout)
}
