//! What the write-up compares `record()` against: an atomic counter, a `write()` system
//! call per record, and a StatsD-style UDP datagram per record on loopback.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::UdpSocket;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoContext, KernelError};

/// A Prometheus-client-style counter: one relaxed atomic add per increment.
#[derive(Debug, Default)]
pub struct AtomicCounter(AtomicU64);

impl AtomicCounter {
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Appends each record to a file with its own `pwrite()`, cycling over a 1 MiB window so
/// that a long run does not fill the disk.
pub struct WriteSyscallSink {
    file: File,
    next: u64,
}

const WINDOW_RECORDS: u64 = 65_536;

impl WriteSyscallSink {
    /// Creates the file at `path`.
    pub fn create(path: &Path) -> Result<Self, KernelError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .io_context("creating the write() baseline file")?;
        Ok(Self { file, next: 0 })
    }

    /// Writes the 16-byte record with one system call.
    #[inline]
    pub fn record(&mut self, timestamp_ns: u64, value: f64) -> Result<(), KernelError> {
        let mut slot = [0u8; 16];
        slot[..8].copy_from_slice(&timestamp_ns.to_le_bytes());
        slot[8..].copy_from_slice(&value.to_bits().to_le_bytes());
        let offset = (self.next % WINDOW_RECORDS) * 16;
        self.next += 1;
        self.file
            .write_all_at(&slot, offset)
            .io_context("write() baseline")
    }
}

/// Sends each record as a StatsD gauge line (`name:value|g`) to a UDP socket on loopback,
/// as an agent-based pipeline would. The receiving socket is bound but never read: the
/// kernel drops what overflows its buffer, which is what a busy StatsD daemon does too.
pub struct UdpStatsdSink {
    socket: UdpSocket,
    _receiver: UdpSocket,
    line: Vec<u8>,
}

impl UdpStatsdSink {
    /// Binds a receiver and a connected sender on 127.0.0.1.
    pub fn bind() -> Result<Self, KernelError> {
        let receiver = UdpSocket::bind("127.0.0.1:0").io_context("binding the UDP receiver")?;
        let socket = UdpSocket::bind("127.0.0.1:0").io_context("binding the UDP sender")?;
        socket
            .connect(receiver.local_addr().io_context("receiver address")?)
            .io_context("connecting the UDP sender")?;
        Ok(Self {
            socket,
            _receiver: receiver,
            line: Vec::with_capacity(64),
        })
    }

    /// Formats and sends one gauge.
    #[inline]
    pub fn record(&mut self, series: &str, value: f64) -> Result<(), KernelError> {
        self.line.clear();
        write!(self.line, "{series}:{value}|g").io_context("formatting a StatsD line")?;
        self.socket.send(&self.line).io_context("UDP send")?;
        Ok(())
    }

    /// The local address of the receiving socket (tests read from it).
    #[cfg(test)]
    fn receiver(&self) -> &UdpSocket {
        &self._receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_counts() {
        let c = AtomicCounter::default();
        for _ in 0..5 {
            c.inc();
        }
        assert_eq!(c.get(), 5);
    }

    #[test]
    fn write_sink_writes_sixteen_bytes_per_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w");
        let mut sink = WriteSyscallSink::create(&path).unwrap();
        sink.record(7, 1.0).unwrap();
        sink.record(8, 2.0).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 32);
        assert_eq!(u64::from_le_bytes(bytes[16..24].try_into().unwrap()), 8);
    }

    #[test]
    fn udp_sink_sends_a_statsd_gauge() {
        let mut sink = UdpStatsdSink::bind().unwrap();
        sink.record("vm.cpu", 0.5).unwrap();
        let mut buf = [0u8; 64];
        let n = sink.receiver().recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"vm.cpu:0.5|g");
    }
}
