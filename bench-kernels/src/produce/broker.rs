//! The log broker: a TCP listener on loopback, a thread per connection that validates
//! produce requests, and one log-writer thread that appends them to segment files with
//! group commit: it takes every request waiting, writes them in one go, syncs once (with
//! [`SyncPolicy::Group`]) and only then acknowledges each of them.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use super::protocol::{self, Codec, ProduceRequest, ProduceResponse};
use crate::error::{IoContext, KernelError};

/// When the broker makes appended batches durable before acknowledging them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncPolicy {
    /// One `fdatasync` per group commit.
    Group,
    /// Acknowledge once written to the page cache.
    None,
}

/// Broker settings.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Where segment files go.
    pub dir: PathBuf,
    /// Size at which a segment is rolled.
    pub segment_bytes: u64,
    /// Durability before the ack.
    pub sync: SyncPolicy,
}

/// Status byte of a successful produce.
pub const STATUS_OK: u8 = 0;
/// Status byte of a batch that did not decode to its announced record count.
pub const STATUS_INVALID: u8 = 1;

struct Append {
    request: ProduceRequest,
    reply: Sender<ProduceResponse>,
}

/// A running broker; dropping it stops it.
pub struct Broker {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    writer: Option<JoinHandle<Result<(), KernelError>>>,
}

impl Broker {
    /// Starts a broker on an ephemeral loopback port.
    pub fn start(config: BrokerConfig) -> Result<Self, KernelError> {
        std::fs::create_dir_all(&config.dir).io_context("creating the broker directory")?;
        let listener = TcpListener::bind("127.0.0.1:0").io_context("binding the broker")?;
        let addr = listener.local_addr().io_context("broker address")?;
        let (appends, queue) = mpsc::channel::<Append>();
        let mut log = SegmentWriter::open(&config)?;
        let writer = std::thread::Builder::new()
            .name("broker-log".to_string())
            .spawn(move || group_commit_loop(&queue, &mut log))
            .io_context("spawning the log writer")?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let acceptor = std::thread::Builder::new()
            .name("broker-accept".to_string())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let appends = appends.clone();
                    // A connection that fails only ends itself.
                    let _ = std::thread::Builder::new()
                        .name("broker-conn".to_string())
                        .spawn(move || serve_connection(stream, &appends));
                }
            })
            .io_context("spawning the acceptor")?;
        Ok(Self {
            addr,
            stopping,
            acceptor: Some(acceptor),
            writer: Some(writer),
        })
    }

    /// Where producers connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, waits for the log writer to finish what it was given.
    pub fn stop(mut self) -> Result<(), KernelError> {
        self.shut_down()
    }

    fn shut_down(&mut self) -> Result<(), KernelError> {
        self.stopping.store(true, Ordering::Release);
        // Wake the acceptor with a connection of our own.
        let _ = TcpStream::connect(self.addr);
        if let Some(acceptor) = self.acceptor.take() {
            acceptor
                .join()
                .map_err(|_| KernelError::ThreadPanicked("broker acceptor"))?;
        }
        // The writer ends when the last connection (holding a sender) closes.
        if let Some(writer) = self.writer.take() {
            writer
                .join()
                .map_err(|_| KernelError::ThreadPanicked("broker log writer"))??;
        }
        Ok(())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

fn serve_connection(stream: TcpStream, appends: &Sender<Append>) {
    let _ = stream.set_nodelay(true);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut input = BufReader::new(stream);
    let mut output = BufWriter::new(write_half);
    let (reply, replies) = mpsc::channel();
    while let Ok(Some(request)) = protocol::read_request(&mut input) {
        let valid = protocol::decode_batch(&request.batch, request.codec)
            .is_ok_and(|m| m.len() == request.records as usize);
        let response = if valid {
            let append = Append {
                request,
                reply: reply.clone(),
            };
            if appends.send(append).is_err() {
                return;
            }
            match replies.recv() {
                Ok(response) => response,
                Err(_) => return,
            }
        } else {
            ProduceResponse {
                correlation: request.correlation,
                status: STATUS_INVALID,
                base_offset: 0,
            }
        };
        if protocol::write_response(&mut output, &response).is_err() || output.flush().is_err() {
            return;
        }
    }
}

fn group_commit_loop(queue: &Receiver<Append>, log: &mut SegmentWriter) -> Result<(), KernelError> {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        group.extend(queue.try_iter());
        let mut acks = Vec::with_capacity(group.len());
        for append in &group {
            let base_offset = log.append(&append.request)?;
            acks.push(base_offset);
        }
        log.commit()?;
        for (append, base_offset) in group.into_iter().zip(acks) {
            let _ = append.reply.send(ProduceResponse {
                correlation: append.request.correlation,
                status: STATUS_OK,
                base_offset,
            });
        }
    }
    log.commit()
}

/// Append-only segment files of batch entries:
/// `[base_offset u64][records u32][codec u8][len u32][batch]`.
struct SegmentWriter {
    dir: PathBuf,
    segment_bytes: u64,
    sync: SyncPolicy,
    file: BufWriter<File>,
    size: u64,
    next_offset: u64,
}

const ENTRY_HEADER_BYTES: u64 = 17;

fn segment_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.log"))
}

fn create_segment(dir: &Path, base_offset: u64) -> Result<BufWriter<File>, KernelError> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(segment_path(dir, base_offset))
        .io_context("creating a broker segment")?;
    Ok(BufWriter::with_capacity(1 << 20, file))
}

impl SegmentWriter {
    fn open(config: &BrokerConfig) -> Result<Self, KernelError> {
        Ok(Self {
            dir: config.dir.clone(),
            segment_bytes: config.segment_bytes,
            sync: config.sync,
            file: create_segment(&config.dir, 0)?,
            size: 0,
            next_offset: 0,
        })
    }

    fn append(&mut self, request: &ProduceRequest) -> Result<u64, KernelError> {
        let entry = ENTRY_HEADER_BYTES + request.batch.len() as u64;
        if self.size > 0 && self.size + entry > self.segment_bytes {
            self.commit()?;
            self.file = create_segment(&self.dir, self.next_offset)?;
            self.size = 0;
        }
        let base_offset = self.next_offset;
        let codec = match request.codec {
            Codec::None => 0u8,
            Codec::Snappy => 1u8,
        };
        let mut header = [0u8; ENTRY_HEADER_BYTES as usize];
        header[..8].copy_from_slice(&base_offset.to_le_bytes());
        header[8..12].copy_from_slice(&request.records.to_le_bytes());
        header[12] = codec;
        header[13..].copy_from_slice(&(request.batch.len() as u32).to_le_bytes());
        self.file
            .write_all(&header)
            .and_then(|()| self.file.write_all(&request.batch))
            .io_context("appending a batch")?;
        self.size += entry;
        self.next_offset += u64::from(request.records);
        Ok(base_offset)
    }

    /// Writes the group out (one `write`) and, with `SyncPolicy::Group`, syncs it.
    fn commit(&mut self) -> Result<(), KernelError> {
        self.file.flush().io_context("writing a group")?;
        if self.sync == SyncPolicy::Group {
            self.file
                .get_ref()
                .sync_data()
                .io_context("syncing a group")?;
        }
        Ok(())
    }
}

/// A stored batch: its first offset and its messages.
pub type StoredBatch = (u64, Vec<Vec<u8>>);

/// Reads back every batch a broker stored in `dir`, in offset order; what a consumer (and
/// the tests) would see.
pub fn read_stored_batches(dir: &Path) -> Result<Vec<StoredBatch>, KernelError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .io_context("listing broker segments")?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut batches = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).io_context("reading a broker segment")?;
        let mut at = 0usize;
        while at < bytes.len() {
            let header = bytes
                .get(at..at + ENTRY_HEADER_BYTES as usize)
                .ok_or_else(|| KernelError::Corrupt("truncated batch header".to_string()))?;
            let base = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
            let codec = if header[12] == 1 {
                Codec::Snappy
            } else {
                Codec::None
            };
            let len = u32::from_le_bytes(header[13..].try_into().expect("4 bytes")) as usize;
            let start = at + ENTRY_HEADER_BYTES as usize;
            let batch = bytes
                .get(start..start + len)
                .ok_or_else(|| KernelError::Corrupt("truncated batch".to_string()))?;
            batches.push((base, protocol::decode_batch(batch, codec)?));
            at = start + len;
        }
    }
    Ok(batches)
}
