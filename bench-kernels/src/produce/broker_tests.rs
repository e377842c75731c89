//! The broker and producers together, over real loopback TCP.

use std::io::{BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use super::*;

fn broker(dir: &std::path::Path, segment_bytes: u64) -> Broker {
    Broker::start(BrokerConfig {
        dir: dir.to_path_buf(),
        segment_bytes,
        sync: SyncPolicy::Group,
    })
    .unwrap()
}

#[test]
fn every_acked_message_is_persisted_once_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), 20_000);
    let config = ProducerConfig {
        concurrency: 4,
        message_size: 100,
        codec: Codec::Snappy,
        batch_size: 1_000,
        linger: Duration::from_millis(1),
        stop: StopAfter::MessagesPerProducer(250),
    };
    let live = LiveCounters::default();
    let outcome = run_producers(b.addr(), &config, &live).unwrap();
    b.stop().unwrap();
    assert_eq!((outcome.acked, outcome.failed), (1000, 0));
    assert_eq!(outcome.latency_us.len(), 1000);
    assert_eq!(outcome.success_rate(), 100.0);
    let batches = read_stored_batches(dir.path()).unwrap();
    let mut next = 0;
    let mut stored = Vec::new();
    for (base, messages) in batches {
        assert_eq!(base, next, "offsets are contiguous");
        next += messages.len() as u64;
        stored.extend(messages);
    }
    assert_eq!(next, 1000);
    for producer in 0..4 {
        for seq in 0..250 {
            let expected = message_payload(producer, seq, 100);
            assert_eq!(stored.iter().filter(|m| **m == expected).count(), 1);
        }
    }
    let segments = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(segments > 1, "20 kB segments roll");
}

#[test]
fn a_batch_that_lies_about_its_size_is_refused_and_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), 1 << 20);
    let stream = TcpStream::connect(b.addr()).unwrap();
    let mut output = stream.try_clone().unwrap();
    let mut input = BufReader::new(stream);
    let batch = encode_batch(&[b"one".to_vec()], Codec::None).unwrap();
    let request = ProduceRequest {
        correlation: 9,
        codec: Codec::None,
        records: 2,
        batch,
    };
    super::protocol::write_request(&mut output, &request).unwrap();
    output.flush().unwrap();
    let response = super::protocol::read_response(&mut input).unwrap();
    assert_eq!((response.correlation, response.status), (9, STATUS_INVALID));
    drop((output, input));
    b.stop().unwrap();
    assert!(read_stored_batches(dir.path()).unwrap().is_empty());
}
