//! The behaviour both backends promise, tested on each.

use std::sync::Arc;

use super::*;

fn event(seq: u64) -> KernelEvent {
    KernelEvent {
        topic: Arc::from("health"),
        seq,
    }
}

fn delivers_every_message_to_every_subscriber_exactly_once<B>(bus: B, batched: bool)
where
    B: BroadcastBus<KernelEvent> + Send,
{
    const MESSAGES: u64 = 5_000;
    let receivers: Vec<_> = (0..4).map(|_| bus.subscribe()).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = receivers
            .into_iter()
            .map(|mut rx| {
                scope.spawn(move || {
                    let mut seen = Vec::new();
                    loop {
                        match rx.recv() {
                            Ok(e) => seen.push(e.seq),
                            Err(RecvError::Closed) => return seen,
                            Err(RecvError::Lagged(n)) => panic!("lagged by {n} with a big ring"),
                        }
                    }
                })
            })
            .collect();
        if batched {
            for chunk in (0..MESSAGES).collect::<Vec<_>>().chunks(100) {
                assert_eq!(bus.publish_batch(chunk.iter().map(|&s| event(s))), 4);
            }
        } else {
            for seq in 0..MESSAGES {
                assert_eq!(bus.publish(event(seq)), 4);
            }
        }
        bus.close();
        for handle in handles {
            let seen = handle.join().unwrap();
            assert_eq!(seen, (0..MESSAGES).collect::<Vec<_>>());
        }
    });
}

fn lagging_readers_account_for_every_message<B>(bus: B)
where
    B: BroadcastBus<KernelEvent> + Send,
{
    const MESSAGES: u64 = 20_000;
    let receivers: Vec<_> = (0..3).map(|_| bus.subscribe()).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = receivers
            .into_iter()
            .map(|mut rx| {
                scope.spawn(move || {
                    let (mut received, mut lagged, mut last) = (0u64, 0u64, None);
                    loop {
                        match rx.recv() {
                            Ok(e) => {
                                assert!(last.is_none_or(|l| e.seq > l), "out of order");
                                assert_eq!(e.seq, received + lagged, "a message out of place");
                                last = Some(e.seq);
                                received += 1;
                            }
                            Err(RecvError::Lagged(n)) => lagged += n,
                            Err(RecvError::Closed) => return (received, lagged),
                        }
                    }
                })
            })
            .collect();
        for seq in 0..MESSAGES {
            bus.publish(event(seq));
        }
        bus.close();
        for handle in handles {
            let (received, lagged) = handle.join().unwrap();
            assert_eq!(received + lagged, MESSAGES);
            assert!(received > 0);
        }
    });
}

/// The bursty benchmark's pattern: bursts, then a barrier until everyone has read them, so
/// subscribers keep going to sleep and being woken mid-burst.
fn bursts_reach_every_sleeping_subscriber<B>(bus: B)
where
    B: BroadcastBus<KernelEvent> + Send,
{
    const BURSTS: u64 = 300;
    const BURST: u64 = 64;
    let barrier = std::sync::Barrier::new(5);
    let receivers: Vec<_> = (0..4).map(|_| bus.subscribe()).collect();
    std::thread::scope(|scope| {
        for mut rx in receivers {
            let barrier = &barrier;
            scope.spawn(move || {
                for burst in 0..BURSTS {
                    for i in 0..BURST {
                        assert_eq!(rx.recv().unwrap().seq, burst * BURST + i);
                    }
                    barrier.wait();
                }
            });
        }
        for burst in 0..BURSTS {
            bus.publish_batch((0..BURST as usize).map(|i| event(burst * BURST + i as u64)));
            barrier.wait();
        }
    });
}

fn publishing_without_subscribers_drops_the_message<B: BroadcastBus<KernelEvent>>(bus: B) {
    assert_eq!(bus.publish(event(1)), 0);
    let mut rx = bus.subscribe();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(bus.publish(event(2)), 1);
    assert_eq!(rx.try_recv().unwrap().seq, 2);
}

fn a_lagging_subscriber_is_told_how_much_it_missed<B: BroadcastBus<KernelEvent>>(bus: B) {
    // Capacity 1: the second publish overwrites the first.
    let mut rx = bus.subscribe();
    bus.publish(event(0));
    bus.publish(event(1));
    bus.publish(event(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Lagged(2)));
    assert_eq!(rx.try_recv().unwrap().seq, 2);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

fn a_late_subscriber_sees_only_later_messages<B: BroadcastBus<KernelEvent>>(bus: B) {
    let mut early = bus.subscribe();
    bus.publish(event(0));
    let mut late = bus.subscribe();
    bus.publish(event(1));
    assert_eq!(early.try_recv().unwrap().seq, 0);
    assert_eq!(early.try_recv().unwrap().seq, 1);
    assert_eq!(late.try_recv().unwrap().seq, 1);
    assert_eq!(late.try_recv(), Err(TryRecvError::Empty));
}

fn closing_lets_receivers_drain_first<B: BroadcastBus<KernelEvent>>(bus: B) {
    let mut rx = bus.subscribe();
    bus.publish(event(7));
    bus.close();
    assert_eq!(rx.recv().unwrap().seq, 7);
    assert_eq!(rx.recv(), Err(RecvError::Closed));
}

macro_rules! contract {
    ($backend:ident, $module:ident) => {
        mod $module {
            use super::*;

            #[test]
            fn exactly_once_with_edge_wakes() {
                delivers_every_message_to_every_subscriber_exactly_once(
                    $backend::new(8192, WakeMode::Edge),
                    false,
                );
            }

            #[test]
            fn exactly_once_with_every_wakes_and_batches() {
                delivers_every_message_to_every_subscriber_exactly_once(
                    $backend::new(8192, WakeMode::Every),
                    true,
                );
            }

            #[test]
            fn bursts_with_every_wakes() {
                bursts_reach_every_sleeping_subscriber($backend::new(2048, WakeMode::Every));
            }

            #[test]
            fn bursts_with_edge_wakes() {
                bursts_reach_every_sleeping_subscriber($backend::new(2048, WakeMode::Edge));
            }

            #[test]
            fn lagging_under_concurrency() {
                lagging_readers_account_for_every_message($backend::new(8, WakeMode::Edge));
            }

            #[test]
            fn no_subscribers() {
                publishing_without_subscribers_drops_the_message($backend::new(4, WakeMode::Edge));
            }

            #[test]
            fn lagging() {
                a_lagging_subscriber_is_told_how_much_it_missed($backend::new(1, WakeMode::Edge));
            }

            #[test]
            fn late_subscriber() {
                a_late_subscriber_sees_only_later_messages($backend::new(8, WakeMode::Edge));
            }

            #[test]
            fn closing() {
                closing_lets_receivers_drain_first($backend::new(8, WakeMode::Every));
            }
        }
    };
}

contract!(ClassicBus, classic);
contract!(SoaBus, soa);

#[test]
fn the_soa_ring_clones_for_all_but_the_last_reader() {
    let bus = SoaBus::new(4, WakeMode::Edge);
    let mut a = bus.subscribe();
    let mut b = bus.subscribe();
    let payload: Arc<str> = Arc::from("x");
    bus.publish(KernelEvent {
        topic: Arc::clone(&payload),
        seq: 0,
    });
    assert_eq!(Arc::strong_count(&payload), 2);
    let first = a.try_recv().unwrap();
    assert_eq!(Arc::strong_count(&payload), 3, "first reader clones");
    let second = b.try_recv().unwrap();
    assert_eq!(
        Arc::strong_count(&payload),
        3,
        "last reader takes, no clone"
    );
    drop((first, second));
    assert_eq!(Arc::strong_count(&payload), 1, "the slot is empty");
}
