//! Clock-offset estimation on the deterministic simulated network: offsets
//! found within their round-trip uncertainty, a node whose clock is off from
//! the majority judged skewed (and only it), and its recovery once its clock
//! is back.

mod common;

use std::time::Duration;

use common::{cluster, cluster_with};
use ringstore_membership::sim::{LinkModel, Simulation};
use ringstore_membership::{ClockReport, ClockVerdict};

const SECOND: i64 = 1_000_000;

fn report(sim: &Simulation, i: usize) -> std::sync::Arc<ClockReport> {
    sim.membership(i).expect("running").clock_report()
}

/// Every running node has an estimate of every other, and each estimate is
/// within its uncertainty of the true offset (`offsets[j] - offsets[i]`).
fn estimates_are_true(sim: &Simulation, offsets: &[i64]) -> bool {
    (0..offsets.len()).all(|i| {
        let report = report(sim, i);
        report.peers.len() == offsets.len() - 1
            && (0..offsets.len()).filter(|&j| j != i).all(|j| {
                let host = sim.nodes()[j].host_id;
                report.peers.get(&host).is_some_and(|e| {
                    (e.offset_micros - (offsets[j] - offsets[i])).abs() <= e.uncertainty_micros
                })
            })
    })
}

#[test]
fn offsets_are_found_within_the_round_trip_uncertainty() {
    // A slow, jittery network: 5 to 80 ms each way, 5% loss.
    let link = LinkModel {
        drop_probability: 0.05,
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(80),
    };
    let (mut sim, _) = cluster_with(5, 11, 16, link);
    let offsets = [0, 3 * SECOND, -SECOND / 4, 7_777, -90 * SECOND];
    for (i, &offset) in offsets.iter().enumerate() {
        sim.set_clock_offset(i, offset);
    }
    sim.run_until(Duration::from_secs(20), |s| estimates_are_true(s, &offsets))
        .expect("every node estimates every other within the uncertainty");
    // It stays true as samples come and go.
    for _ in 0..20 {
        sim.run_for(Duration::from_millis(700));
        assert!(estimates_are_true(&sim, &offsets));
    }
    let worst = (0..5)
        .flat_map(|i| {
            report(&sim, i)
                .peers
                .values()
                .map(|e| e.uncertainty_micros)
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>();
    assert!(
        worst.iter().all(|&u| u <= 80_000),
        "the fastest of five samples is used: {worst:?}"
    );
}

#[test]
fn a_node_off_from_the_majority_is_skewed_until_its_clock_is_back() {
    let (mut sim, _) = cluster(5, 3);
    let skewed = 4;
    sim.run_for(Duration::from_secs(3));
    assert!((0..5).all(|i| !report(&sim, i).verdict.is_skewed()));

    sim.set_clock_offset(skewed, 2 * SECOND);
    let took = sim
        .run_until(Duration::from_secs(30), |s| {
            report(s, skewed).verdict.is_skewed()
        })
        .expect("the skewed node is judged skewed");
    assert!(took <= Duration::from_secs(10), "detected after {took:?}");
    sim.run_for(Duration::from_secs(10));
    match report(&sim, skewed).verdict {
        ClockVerdict::Skewed {
            offset_micros,
            beyond,
            members,
        } => {
            assert!(
                (offset_micros - 2 * SECOND).abs() < 5_000,
                "{offset_micros}"
            );
            assert_eq!((beyond, members), (4, 5));
        }
        other => panic!("{other:?}"),
    }
    // The others see it 2 s ahead, and are not skewed themselves.
    for i in 0..4 {
        let report = report(&sim, i);
        assert!(
            !report.verdict.is_skewed(),
            "node {i}: {:?}",
            report.verdict
        );
        assert!(report.verdict.offset_micros().abs() < 5_000);
        let estimate = report.peers[&sim.nodes()[skewed].host_id];
        assert!((estimate.offset_micros - 2 * SECOND).abs() <= estimate.uncertainty_micros);
    }

    // Back within the bound (0.4 s off): it recovers by itself.
    sim.set_clock_offset(skewed, 2 * SECOND / 5);
    let took = sim
        .run_until(Duration::from_secs(60), |s| {
            !report(s, skewed).verdict.is_skewed()
        })
        .expect("the node recovers");
    assert!(took <= Duration::from_secs(10), "recovered after {took:?}");
    sim.run_for(Duration::from_secs(20));
    assert!((0..5).all(|i| !report(&sim, i).verdict.is_skewed()));
}

#[test]
fn a_killed_peer_loses_its_vote() {
    let (mut sim, _) = cluster(3, 5);
    sim.set_clock_offset(2, -3 * SECOND);
    sim.run_until(Duration::from_secs(30), |s| {
        report(s, 2).verdict.is_skewed()
    })
    .expect("skewed against two good peers");
    sim.kill(1);
    // With one peer left (and itself), nobody has a majority against it.
    sim.run_until(Duration::from_secs(60), |s| {
        !report(s, 2).verdict.is_skewed() && report(s, 2).peers.len() == 1
    })
    .expect("a dead peer has no vote");
    assert!(!report(&sim, 0).verdict.is_skewed());
}

/// In a cluster bigger than the clock-probe fanout, a node probes a few
/// random peers a second, not all of them: its clock traffic stays the
/// same whatever the cluster's size, and it still finds itself skewed
/// against the majority, from the peers it sampled.
#[test]
fn in_a_cluster_bigger_than_the_fanout_probes_are_sampled_and_still_judge() {
    let nodes = 60;
    let (mut sim, _) = cluster(nodes, 21);
    let fanout = common::config("test", None).clock_probe_fanout;
    assert!(fanout < nodes - 1, "the cluster must exceed the fanout");
    sim.run_for(Duration::from_secs(5));

    // Per second, each node sends `fanout` probes and echoes as many:
    // measured as the packets of a quiet second, far below one per peer.
    let before = sim.packets_sent();
    sim.run_for(Duration::from_secs(10));
    let per_node_second = (sim.packets_sent() - before) as f64 / nodes as f64 / 10.0;
    assert!(
        per_node_second < (nodes - 1) as f64,
        "{per_node_second:.1} packets a second per node: clock probes go to every peer"
    );

    let skewed = 7;
    sim.set_clock_offset(skewed, 2 * SECOND);
    let took = sim
        .run_until(Duration::from_secs(60), |s| {
            report(s, skewed).verdict.is_skewed()
        })
        .expect("the skewed node is judged skewed from its sample of peers");
    assert!(took <= Duration::from_secs(15), "detected after {took:?}");
    // Every peer has an estimate from the last 30 s, and nobody else is skewed.
    assert!(report(&sim, skewed).peers.len() > nodes / 2);
    for i in (0..nodes).filter(|&i| i != skewed) {
        assert!(!report(&sim, i).verdict.is_skewed(), "node {i}");
    }
}
