//! `kymo-kernels produce`: chronik-bench's command line. Starts the broker on loopback,
//! runs the producers, prints a summary, and writes CSV and JSON result files on request.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;

use super::broker::{Broker, BrokerConfig, SyncPolicy};
use super::producer::{LiveCounters, ProduceOutcome, ProducerConfig, StopAfter, run_producers};
use super::protocol::Codec;
use super::suite::with_progress;

/// Options of the standalone producer benchmark.
#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// Concurrent producers, each on its own connection.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Bytes per message.
    #[arg(long, default_value_t = 1024)]
    message_size: usize,
    /// How long to produce, e.g. `30s`, `500ms`, `2m`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Stop after this many messages per producer instead of after `--duration`.
    #[arg(long)]
    messages: Option<u64>,
    /// Batch compression.
    #[arg(long, value_enum, default_value = "none")]
    compression: Codec,
    /// Bytes of messages per batch.
    #[arg(long, default_value_t = 16_384)]
    batch_size: usize,
    /// Longest a message waits for its batch to fill.
    #[arg(long, default_value_t = 0)]
    linger_ms: u64,
    /// Broker durability before the ack.
    #[arg(long, value_enum, default_value = "group")]
    sync: SyncPolicy,
    /// Write a CSV line (with header) here.
    #[arg(long)]
    csv_output: Option<PathBuf>,
    /// Write the summary as JSON here.
    #[arg(long)]
    json_output: Option<PathBuf>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((text, "s"), |i| text.split_at(i));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like 30s, 500ms or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        _ => {
            return Err(format!(
                "unknown duration unit in `{text}` (use ms, s or m)"
            ));
        }
    };
    Ok(Duration::from_secs_f64(seconds))
}

/// The summary written as JSON (and, flattened, as CSV).
#[derive(Debug, Serialize)]
struct Summary {
    concurrency: usize,
    message_size: usize,
    compression: &'static str,
    batch_size: usize,
    linger_ms: u64,
    messages: u64,
    failed: u64,
    duration_s: f64,
    throughput_msg_s: f64,
    throughput_mb_s: f64,
    p50_us: u64,
    p90_us: u64,
    p99_us: u64,
    p999_us: u64,
    max_us: u64,
    success_rate: f64,
}

impl Summary {
    fn new(args: &ProduceArgs, o: &ProduceOutcome) -> Self {
        let q = |q| o.latency_us.value_at_quantile(q);
        Self {
            concurrency: args.concurrency,
            message_size: args.message_size,
            compression: args.compression.as_str(),
            batch_size: args.batch_size,
            linger_ms: args.linger_ms,
            messages: o.acked,
            failed: o.failed,
            duration_s: o.elapsed.as_secs_f64(),
            throughput_msg_s: o.messages_per_second(),
            throughput_mb_s: o.megabytes_per_second(),
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: o.latency_us.max(),
            success_rate: o.success_rate(),
        }
    }

    fn csv(&self) -> String {
        let header = "concurrency,message_size,compression,batch_size,linger_ms,messages,failed,\
                      duration_s,throughput_msg_s,throughput_mb_s,p50_us,p90_us,p99_us,p999_us,\
                      max_us,success_rate";
        format!(
            "{header}\n{},{},{},{},{},{},{},{:.3},{:.1},{:.3},{},{},{},{},{},{:.2}\n",
            self.concurrency,
            self.message_size,
            self.compression,
            self.batch_size,
            self.linger_ms,
            self.messages,
            self.failed,
            self.duration_s,
            self.throughput_msg_s,
            self.throughput_mb_s,
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.success_rate
        )
    }

    fn console(&self) -> String {
        format!(
            "produce results\n  messages:     {} ({} failed)\n  throughput:   {:.0} msg/s, {:.2} MB/s\n  \
             latency (µs): p50 {}  p90 {}  p99 {}  p99.9 {}  max {}\n  success rate: {:.2} %\n",
            self.messages,
            self.failed,
            self.throughput_msg_s,
            self.throughput_mb_s,
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.success_rate
        )
    }
}

/// Runs the standalone producer benchmark.
pub fn run_standalone(args: &ProduceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(args.message_size >= 1, "--message-size must be at least 1");
    let dir = tempfile::Builder::new()
        .prefix("kymo-broker-")
        .tempdir()
        .context("creating the broker directory")?;
    let broker = Broker::start(BrokerConfig {
        dir: dir.path().to_path_buf(),
        segment_bytes: 64 << 20,
        sync: args.sync,
    })?;
    let config = ProducerConfig {
        concurrency: args.concurrency,
        message_size: args.message_size,
        codec: args.compression,
        batch_size: args.batch_size.max(1),
        linger: Duration::from_millis(args.linger_ms),
        stop: args.messages.map_or(
            StopAfter::Duration(args.duration),
            StopAfter::MessagesPerProducer,
        ),
    };
    let live = LiveCounters::default();
    let outcome = with_progress("produce", &live, || {
        run_producers(broker.addr(), &config, &live)
    })?;
    broker.stop()?;
    let summary = Summary::new(args, &outcome);
    print!("{}", summary.console());
    if let Some(path) = &args.csv_output {
        std::fs::write(path, summary.csv())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.json_output {
        let json = serde_json::to_string_pretty(&summary)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("5").unwrap(), Duration::from_secs(5));
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
