//! The producer side of chronik-bench: `concurrency` producers, each on its own
//! connection, batching messages by size (`batch_size` bytes) or age (`linger`) and
//! waiting for each batch's ack. A message's latency runs from its creation to its ack,
//! recorded in microseconds in an HdrHistogram.

use std::io::{BufReader, BufWriter, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::broker::STATUS_OK;
use super::protocol::{self, Codec, ProduceRequest};
use crate::error::{IoContext, KernelError};
use crate::measure::{latency_histogram, record_clamped};

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAfter {
    /// Each producer sends this many messages.
    MessagesPerProducer(u64),
    /// Producers stop starting batches after this long.
    Duration(Duration),
}

/// What a producer run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerConfig {
    /// Producers, each on its own connection.
    pub concurrency: usize,
    /// Bytes per message.
    pub message_size: usize,
    /// Batch compression.
    pub codec: Codec,
    /// A batch is sent once it holds this many bytes of messages.
    pub batch_size: usize,
    /// ... or once its oldest message is this old.
    pub linger: Duration,
    /// When the run ends.
    pub stop: StopAfter,
}

/// Counters the producers share, so that a progress line can be printed during a run.
#[derive(Debug, Default)]
pub struct LiveCounters {
    /// Messages acknowledged so far.
    pub acked: AtomicU64,
    /// Messages whose batch failed so far.
    pub failed: AtomicU64,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct ProduceOutcome {
    /// Messages acknowledged.
    pub acked: u64,
    /// Messages whose batch failed.
    pub failed: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Per-message latency in microseconds.
    pub latency_us: Histogram<u64>,
    /// Payload bytes acknowledged.
    pub bytes: u64,
}

impl ProduceOutcome {
    /// Acknowledged messages per second.
    pub fn messages_per_second(&self) -> f64 {
        self.acked as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Acknowledged payload megabytes (10^6) per second.
    pub fn megabytes_per_second(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Acknowledged share of all messages sent, in percent.
    pub fn success_rate(&self) -> f64 {
        let total = self.acked + self.failed;
        if total == 0 {
            0.0
        } else {
            100.0 * self.acked as f64 / total as f64
        }
    }
}

/// A log-line-like payload of exactly `size` bytes: realistic enough that snappy finds
/// something to compress, different per message.
pub fn message_payload(producer: usize, seq: u64, size: usize) -> Vec<u8> {
    let line = format!(
        "{{\"ts\":{seq},\"producer\":{producer},\"level\":\"info\",\"msg\":\"request served\",\"path\":\"/api/v1/items/{}\",\"status\":200}}\n",
        seq % 977
    );
    line.bytes().cycle().take(size).collect()
}

/// Runs the producers against `addr` and gathers their results.
pub fn run_producers(
    addr: SocketAddr,
    config: &ProducerConfig,
    live: &LiveCounters,
) -> Result<ProduceOutcome, KernelError> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.concurrency)
            .map(|p| {
                let stop = &stop;
                scope.spawn(move || run_one_producer(addr, p, config, live, stop))
            })
            .collect();
        if let StopAfter::Duration(d) = config.stop {
            while start.elapsed() < d && !handles.iter().all(|h| h.is_finished()) {
                std::thread::sleep(Duration::from_millis(5).min(d));
            }
            stop.store(true, Ordering::Release);
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| KernelError::ThreadPanicked("producer"))?
            })
            .collect::<Result<Vec<_>, KernelError>>()
    })?;
    let elapsed = start.elapsed();
    let mut latency_us = latency_histogram();
    let (mut acked, mut failed, mut bytes) = (0, 0, 0);
    for one in results {
        latency_us
            .add(&one.latency_us)
            .map_err(|e| KernelError::Histogram(format!("{e:?}")))?;
        acked += one.acked;
        failed += one.failed;
        bytes += one.bytes;
    }
    Ok(ProduceOutcome {
        acked,
        failed,
        elapsed,
        latency_us,
        bytes,
    })
}

fn run_one_producer(
    addr: SocketAddr,
    producer: usize,
    config: &ProducerConfig,
    live: &LiveCounters,
    stop: &AtomicBool,
) -> Result<ProduceOutcome, KernelError> {
    let stream = TcpStream::connect(addr).io_context("connecting to the broker")?;
    stream.set_nodelay(true).io_context("TCP_NODELAY")?;
    let mut output = BufWriter::new(stream.try_clone().io_context("producer socket")?);
    let mut input = BufReader::new(stream);
    let mut outcome = ProduceOutcome {
        acked: 0,
        failed: 0,
        elapsed: Duration::ZERO,
        latency_us: latency_histogram(),
        bytes: 0,
    };
    let limit = match config.stop {
        StopAfter::MessagesPerProducer(n) => n,
        StopAfter::Duration(_) => u64::MAX,
    };
    let mut seq = 0u64;
    let mut correlation = 0u32;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut created: Vec<Instant> = Vec::new();
    while seq < limit && !stop.load(Ordering::Acquire) {
        batch.clear();
        created.clear();
        let mut batch_bytes = 0;
        while seq < limit
            && batch_bytes < config.batch_size
            && created
                .first()
                .is_none_or(|first| first.elapsed() < config.linger)
        {
            created.push(Instant::now());
            batch.push(message_payload(producer, seq, config.message_size));
            batch_bytes += config.message_size;
            seq += 1;
        }
        correlation = correlation.wrapping_add(1);
        let request = ProduceRequest {
            correlation,
            codec: config.codec,
            records: batch.len() as u32,
            batch: protocol::encode_batch(&batch, config.codec)?,
        };
        let acked = protocol::write_request(&mut output, &request)
            .and_then(|()| output.flush().io_context("sending a batch"))
            .and_then(|()| protocol::read_response(&mut input))
            .is_ok_and(|r| r.status == STATUS_OK && r.correlation == correlation);
        let acked_at = Instant::now();
        let n = batch.len() as u64;
        if acked {
            for at in &created {
                record_clamped(&mut outcome.latency_us, (acked_at - *at).as_micros() as u64);
            }
            outcome.acked += n;
            outcome.bytes += batch_bytes as u64;
            live.acked.fetch_add(n, Ordering::Relaxed);
        } else {
            outcome.failed += n;
            live.failed.fetch_add(n, Ordering::Relaxed);
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_have_the_asked_size_and_compress() {
        let p = message_payload(3, 42, 1024);
        assert_eq!(p.len(), 1024);
        let packed = protocol::encode_batch(&[p], Codec::Snappy).unwrap();
        assert!(packed.len() < 400, "{}", packed.len());
        assert_ne!(message_payload(3, 42, 64), message_payload(3, 43, 64));
    }
}
