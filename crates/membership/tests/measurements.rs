//! Figures for the closing note, measured on the simulated network in
//! simulated time (nothing here depends on the machine's speed):
//! convergence after a join, failure detection time, and steady-state gossip
//! bandwidth per node. Run with `--nocapture` to see them. The assertions are
//! loose sanity bounds; the acceptance bounds live in `simulation.rs`.

mod common;

use std::time::Duration;

use common::{DETECTION_BOUND, cluster, config, metadata};
use ringstore_membership::Liveness;

/// Time for every view to include a newly started node, in a cluster of `n`.
fn join_convergence(n: usize) -> Duration {
    let (mut sim, _) = cluster(n - 1, n as u64);
    sim.run_for(Duration::from_secs(5));
    sim.add_node(config("test", None), metadata(n - 1, 16, "test"));
    let all: Vec<usize> = (0..n).collect();
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all))
        .expect("converges")
}

/// Times for every other node to see a killed node down, over `kills` victims.
fn detection_times(n: usize, kills: usize) -> Vec<Duration> {
    (0..kills)
        .map(|k| {
            let (mut sim, _) = cluster(n, 1000 + k as u64);
            sim.run_for(Duration::from_secs(3));
            let victim = k % n;
            sim.kill(victim);
            sim.run_until(Duration::from_secs(60), |s| {
                s.seen_by_all_as(victim, Liveness::Down)
            })
            .expect("detected")
        })
        .collect()
}

/// Mean bytes sent per node per second over `window` once converged.
fn steady_bytes_per_second(n: usize, window: Duration) -> f64 {
    let (mut sim, _) = cluster(n, 77);
    sim.run_for(Duration::from_secs(10));
    let before = sim.bytes_sent();
    sim.run_for(window);
    (sim.bytes_sent() - before) as f64 / n as f64 / window.as_secs_f64()
}

#[test]
fn convergence_detection_and_bandwidth_figures() {
    for n in [5, 20, 50] {
        let took = join_convergence(n);
        println!("join convergence, {n} nodes: {:.2} s", took.as_secs_f64());
        assert!(took < Duration::from_secs(30), "{n} nodes: {took:?}");
    }
    for n in [5, 20] {
        let mut times = detection_times(n, 10);
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "detection (all see down), {n} nodes, 10 kills: mean {:.2} s, max {:.2} s",
            mean.as_secs_f64(),
            times.last().unwrap().as_secs_f64()
        );
        assert!(*times.last().unwrap() <= DETECTION_BOUND);
    }
    for n in [5, 20, 50] {
        let rate = steady_bytes_per_second(n, Duration::from_secs(60));
        println!(
            "steady-state gossip, {n} nodes: {:.0} bytes/s sent per node",
            rate
        );
        assert!(rate < 64.0 * 1024.0, "{n} nodes: {rate} B/s");
    }
}
