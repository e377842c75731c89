//! A tiny HTTP/1.1 server on loopback that records every request and answers with scripted
//! status codes: it stands in for Slack, Discord, a JSON webhook, and the statuses and comments
//! APIs of forges.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// A listener answering the scripted statuses in turn, then the last one for ever.
pub struct Listener {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Listener {
    pub fn answering(script: &[u16]) -> Self {
        Self::start(script, None)
    }

    /// Answers the scripted statuses with `body` as every answer's text, as an internal
    /// service that tells too much would.
    pub fn answering_saying(script: &[u16], body: &str) -> Self {
        Self::start(script, Some(body.to_owned()))
    }

    fn start(script: &[u16], body: Option<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = received.clone();
        let script = script.to_vec();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { continue };
                let status = script.get(n).or(script.last()).copied().unwrap_or(200);
                serve_one(stream, status, body.as_deref(), &log);
            }
        });
        Self { url, received }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// A URL on which nothing listens (the port was bound, then released).
pub fn closed_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}/hook", listener.local_addr().unwrap())
}

/// Reads one request, records it, then answers (in that order, so that a client that got
/// its answer finds its request recorded).
fn serve_one(
    stream: TcpStream,
    status: u16,
    body: Option<&str>,
    log: &Mutex<Vec<Received>>,
) -> Option<()> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut request_body = vec![0; length];
    reader.read_exact(&mut request_body).ok()?;
    let id = {
        let mut log = log.lock().unwrap();
        log.push(Received {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&request_body).into_owned(),
        });
        log.len()
    };
    // `id` is what a forge answers a created comment with: the request's number here.
    let answer = body.map_or_else(
        || format!("{{\"status\":{status},\"id\":{id}}}"),
        str::to_owned,
    );
    let response = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let mut stream = stream;
    stream.write_all(response.as_bytes()).ok()
}
