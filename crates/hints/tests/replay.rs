//! The replay scheduler driving a real hint store on a simulated clock:
//! throttled rates over many megabytes, runtime rate changes, failures that
//! keep hints, and the hint window deciding what is stored at all.
//!
//! Deliveries are instantaneous: the simulated clock moves only when the
//! scheduler says `WaitUntil`, so every rate measured is the throttle's.

mod support;

use std::time::Duration;

use ringstore_hints::{
    HintLimits, HintStore, HintWindow, ReplayAction, ReplayConfig, ReplayScheduler,
};
use ringstore_placement::HostId;
use support::{hint, host, memory_tree, ts};

const MIB: u64 = 1 << 20;
const KIB: usize = 1 << 10;
const SECOND: Duration = Duration::from_secs(1);
/// The keyspace's gc_grace: far longer than these runs.
const GC_GRACE: Duration = Duration::from_secs(10 * 86_400);

/// A node's replay loop on the simulated clock `now`: polls, delivers
/// (instantly and successfully) and waits, until the scheduler is idle or the
/// clock reaches `until`. The bytes delivered.
fn replay(
    scheduler: &mut ReplayScheduler,
    store: &HintStore,
    now: &mut Duration,
    until: Duration,
) -> u64 {
    let mut delivered = 0;
    while *now < until {
        match scheduler.poll(*now, |target| store.has_hints(target)) {
            ReplayAction::Deliver { target, max_bytes } => {
                let batch = store
                    .next_batch(target, max_bytes, ts(*now), |_| GC_GRACE)
                    .unwrap();
                let bytes: u64 = batch.iter().map(|(_, h)| h.size_bytes()).sum();
                let ids: Vec<_> = batch.iter().map(|(id, _)| *id).collect();
                store.delete(&ids).unwrap();
                scheduler.delivered(target, bytes, *now);
                delivered += bytes;
            }
            ReplayAction::WaitUntil(at) => {
                assert!(at > *now, "a wait must move time forward");
                *now = at.min(until);
            }
            ReplayAction::Idle => break,
        }
    }
    delivered
}

/// A store holding `count` hints of `value_len` bytes, spread over `targets`.
fn store_with(count: u64, value_len: usize, targets: &[HostId]) -> HintStore {
    let store = HintStore::open(memory_tree(), HintLimits::default()).unwrap();
    for n in 0..count {
        let target = targets[n as usize % targets.len()];
        store
            .store(&hint(target, ts(Duration::ZERO), n, value_len))
            .unwrap();
    }
    store
}

fn scheduler_at(bytes_per_second: u64, targets: &[HostId]) -> ReplayScheduler {
    let config = ReplayConfig {
        bytes_per_second,
        ..ReplayConfig::default()
    };
    let mut scheduler = ReplayScheduler::new(config, Duration::ZERO);
    for &target in targets {
        scheduler.target_up(target, Duration::ZERO);
    }
    scheduler
}

fn mib_per_second(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / MIB as f64 / elapsed.as_secs_f64()
}

#[test]
fn replay_of_twenty_mebibytes_holds_the_throttle_rate_of_one_mebibyte_per_second() {
    let targets = [host(1), host(2), host(3)];
    let store = store_with(2_100, 10 * KIB, &targets);
    let total: u64 = store.pending().values().map(|s| s.bytes).sum();
    assert!(total >= 20 * MIB);
    let mut scheduler = scheduler_at(MIB, &targets);

    let mut now = Duration::ZERO;
    let delivered = replay(&mut scheduler, &store, &mut now, Duration::MAX);

    assert_eq!(delivered, total);
    assert!(store.pending().is_empty());
    assert_eq!(store.counters().replayed, 2_100);
    let rate = mib_per_second(delivered, now);
    println!(
        "replayed {:.2} MiB in {:.3} simulated s: {rate:.4} MiB/s (throttle 1 MiB/s)",
        delivered as f64 / MIB as f64,
        now.as_secs_f64()
    );
    assert!((0.8..=1.2).contains(&rate), "{rate} MiB/s");
}

#[test]
fn a_runtime_rate_change_takes_effect_immediately() {
    let targets = [host(1), host(2)];
    let store = store_with(2_000, 10 * KIB, &targets);
    let mut scheduler = scheduler_at(MIB, &targets);
    let mut now = Duration::ZERO;

    let slow = replay(&mut scheduler, &store, &mut now, 5 * SECOND);
    let slow_rate = mib_per_second(slow, 5 * SECOND);

    // Faster: the very next delivery is paced at the new rate.
    scheduler.set_rate(4 * MIB, now);
    let ReplayAction::WaitUntil(next) = scheduler.poll(now, |t| store.has_hints(t)) else {
        panic!("the bucket was empty at the old rate");
    };
    assert!(
        next - now < Duration::from_millis(20),
        "waited {:?} after speeding up",
        next - now
    );
    let start = now;
    let fast = replay(&mut scheduler, &store, &mut now, start + 3 * SECOND);
    let fast_rate = mib_per_second(fast, now - start);

    // Unthrottled: everything left goes without any wait.
    scheduler.set_rate(0, now);
    let before = now;
    let rest = replay(&mut scheduler, &store, &mut now, Duration::MAX);
    println!("slow {slow_rate:.3} MiB/s, fast {fast_rate:.3} MiB/s, then {rest} bytes unthrottled");
    assert!((0.8..=1.2).contains(&slow_rate), "{slow_rate}");
    assert!((3.2..=4.8).contains(&fast_rate), "{fast_rate}");
    assert_eq!(now, before);
    assert!(rest > 0 && store.pending().is_empty());
}

#[test]
fn a_failed_delivery_leaves_the_hints_in_the_store_for_the_retry() {
    let store = store_with(5, 100, &[host(1)]);
    let mut scheduler = scheduler_at(MIB, &[host(1)]);
    let now = Duration::ZERO;

    let ReplayAction::Deliver { target, max_bytes } = scheduler.poll(now, |t| store.has_hints(t))
    else {
        panic!("expected a delivery");
    };
    let batch = store
        .next_batch(target, max_bytes, ts(now), |_| GC_GRACE)
        .unwrap();
    assert_eq!(batch.len(), 5);
    scheduler.failed(target, now); // the target never acknowledged
    assert_eq!(store.pending()[&host(1)].hints, 5);
    assert_eq!(store.counters().replayed, 0);

    assert_eq!(
        scheduler.poll(now, |t| store.has_hints(t)),
        ReplayAction::WaitUntil(SECOND)
    );
    let mut now = now;
    let delivered = replay(&mut scheduler, &store, &mut now, Duration::MAX);
    assert_eq!(now, SECOND);
    assert_eq!(
        delivered,
        batch.iter().map(|(_, h)| h.size_bytes()).sum::<u64>()
    );
    assert_eq!(store.counters().replayed, 5);
}

#[test]
fn a_target_down_past_the_window_gets_no_hints_and_one_inside_it_gets_them_replayed() {
    let hour = Duration::from_secs(3600);
    let store = HintStore::open(memory_tree(), HintLimits::default()).unwrap();
    let mut window = HintWindow::default();
    let mut scheduler = scheduler_at(MIB, &[]);
    let (long_gone, brief) = (host(1), host(2));
    window.mark_down(long_gone, Duration::ZERO);
    scheduler.target_down(long_gone);

    let mut now = 2 * hour;
    window.mark_down(brief, now);
    // Writes fail to both at 2 h, then at 4 h.
    for (n, at) in [(0, 2 * hour), (1, 4 * hour)] {
        for target in [long_gone, brief] {
            if window.should_hint(target, at, None) {
                store.store(&hint(target, ts(at), n, 100)).unwrap();
            } else {
                store.note_outside_window();
            }
        }
    }
    assert_eq!(
        store.pending()[&long_gone].hints,
        1,
        "hinted only inside its window"
    );
    assert_eq!(store.pending()[&brief].hints, 2);
    assert_eq!(store.counters().dropped_outside_window, 1);

    // Down targets get nothing replayed; once up, their hints drain.
    now = 4 * hour;
    assert_eq!(replay(&mut scheduler, &store, &mut now, Duration::MAX), 0);
    window.mark_up(brief);
    scheduler.target_up(brief, now);
    assert!(replay(&mut scheduler, &store, &mut now, Duration::MAX) > 0);
    assert!(!store.has_hints(brief) && store.has_hints(long_gone));
}
