//! chronik-bench's produce benchmark against our own log broker on loopback TCP:
//! append-only segments, batched group commit, optional snappy compression; producers at
//! concurrency 1/32/64 with a message size, batch size and linger; throughput in msg/s
//! and MB/s, latency percentiles at microsecond precision, success rate.

mod broker;
mod producer;
mod protocol;
mod standalone;
mod suite;

pub use broker::{
    Broker, BrokerConfig, STATUS_INVALID, STATUS_OK, SyncPolicy, read_stored_batches,
};
pub use producer::{
    LiveCounters, ProduceOutcome, ProducerConfig, StopAfter, message_payload, run_producers,
};
pub use protocol::{Codec, ProduceRequest, ProduceResponse, decode_batch, encode_batch};
pub use standalone::{ProduceArgs, run_standalone};
pub use suite::ProduceSuite;

#[cfg(test)]
mod broker_tests;
