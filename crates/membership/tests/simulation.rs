//! Membership scenarios on the deterministic simulated network: convergence,
//! failure detection, restarts, partitions, foreign clusters, late joiners,
//! big token lists, flapping and garbage.

mod common;

use std::num::NonZeroU8;
use std::time::Duration;

use common::{
    DETECTION_BOUND, addr, cluster, cluster_with, config, lossy_lan, metadata, restarted_cluster,
};
use ringstore_membership::sim::{LinkModel, Simulation};
use ringstore_membership::{Generation, Liveness, MembershipEvent, NodeState};
use ringstore_placement::Token;

fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// The whole life of an `n`-node cluster: converge; a killed node is seen down
/// by all within the bound and keeps its tokens; restarted, it is seen up with
/// a higher generation; a partition heals and views re-converge; a node that
/// joins after everyone changed metadata learns the newest of every member.
fn cluster_life(n: usize) {
    let (mut sim, _) = cluster(n, n as u64);
    let victim = n - 1;
    let host = sim.nodes()[victim].host_id;
    let checksum = sim.view(0).ring.checksum();

    sim.kill(victim);
    let took = sim
        .run_until(Duration::from_secs(60), |s| {
            s.seen_by_all_as(victim, Liveness::Down)
        })
        .expect("the killed node is seen down");
    assert!(took <= DETECTION_BOUND, "{n} nodes: down after {took:?}");
    for i in 0..n - 1 {
        let view = sim.view(i);
        assert_eq!(
            view.ring.checksum(),
            checksum,
            "down does not change the ring"
        );
        assert_eq!(view.ring.tokens_of(host).len(), 16, "down keeps its tokens");
    }

    sim.restart(victim);
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(n)))
        .expect("converges after the restart");
    for i in 0..n {
        let member = &sim.view(i).members[&host];
        assert_eq!(member.liveness, Liveness::Up);
        assert_eq!(member.metadata.stamp.generation, Generation(101));
    }

    let (left, right): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| i < n / 2);
    sim.partition(&left, &right);
    sim.run_until(Duration::from_secs(60), |s| {
        s.seen_by_all_as(n - 1, Liveness::Down) || {
            left.iter().all(|&i| {
                s.view(i)
                    .member(host)
                    .is_some_and(|m| m.liveness == Liveness::Down)
            })
        }
    })
    .expect("the sides see each other down");
    sim.heal();
    sim.run_until(Duration::from_secs(90), |s| s.converged(&all(n)))
        .expect("re-converges after the partition");

    for i in 0..n {
        sim.update_local(i, |m| m.load_bytes = 5000 + i as u64);
    }
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(n)))
        .expect("converged");
    sim.run_for(Duration::from_secs(30));
    let late = sim.add_node(config("test", None), metadata(n, 16, "test"));
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(n + 1)))
        .expect("the late joiner converges");
    for i in 0..n {
        let member = &sim.view(late).members[&sim.nodes()[i].host_id];
        assert_eq!(member.metadata.load_bytes, 5000 + i as u64);
    }
}

#[test]
fn the_life_of_a_five_node_cluster() {
    cluster_life(5);
}

#[test]
fn the_life_of_a_twenty_node_cluster() {
    cluster_life(20);
}

#[test]
fn a_restarted_node_comes_back_up_with_a_higher_generation() {
    let (mut sim, _) = cluster(5, 7);
    sim.kill(3);
    sim.run_until(Duration::from_secs(30), |s| {
        s.seen_by_all_as(3, Liveness::Down)
    })
    .expect("seen down");
    sim.restart(3);
    let took = sim
        .run_until(Duration::from_secs(30), |s| s.converged(&all(5)))
        .expect("views converge after the restart");
    let host = sim.nodes()[3].host_id;
    for i in 0..5 {
        let member = sim.view(i).members[&host].clone();
        assert_eq!(member.liveness, Liveness::Up);
        assert_eq!(
            member.metadata.stamp.generation,
            Generation(101),
            "node {i}"
        );
    }
    println!("restarted node seen up with its new generation after {took:?}");
}

#[test]
fn a_partition_heals_and_views_reconverge() {
    let (mut sim, _) = cluster(6, 11);
    sim.partition(&[0, 1, 2], &[3, 4, 5]);
    sim.run_until(Duration::from_secs(60), |s| {
        s.view(0)
            .member(s.nodes()[4].host_id)
            .is_some_and(|m| m.liveness == Liveness::Down)
            && s.view(4)
                .member(s.nodes()[0].host_id)
                .is_some_and(|m| m.liveness == Liveness::Down)
    })
    .expect("each side sees the other down");
    // While cut off, one side changes its metadata.
    sim.update_local(4, |m| m.load_bytes = 4242);
    sim.heal();
    sim.run_until(Duration::from_secs(90), |s| s.converged(&all(6)))
        .expect("views re-converge after the partition heals");
    let host = sim.nodes()[4].host_id;
    assert_eq!(sim.view(0).members[&host].metadata.load_bytes, 4242);
}

#[test]
fn a_node_of_another_cluster_or_with_the_wrong_secret_never_appears() {
    let mut sim = Simulation::new(3, LinkModel::lan());
    for i in 0..4 {
        sim.add_node(config("test", Some("right")), metadata(i, 16, "test"));
    }
    let outsider = sim.add_node(config("other", Some("right")), metadata(4, 16, "other"));
    let wrong_secret = sim.add_node(config("test", Some("wrong")), metadata(5, 16, "test"));
    let no_secret = sim.add_node(config("test", None), metadata(6, 16, "test"));
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all(4)))
        .expect("the real cluster converges");
    sim.run_for(Duration::from_secs(20));
    for i in 0..4 {
        let view = sim.view(i);
        assert_eq!(view.members.len(), 4, "node {i} sees only its cluster");
        for stranger in [outsider, wrong_secret, no_secret] {
            assert!(view.member(sim.nodes()[stranger].host_id).is_none());
        }
        let stats = sim.membership(i).unwrap().stats().clone();
        if i == 0 {
            assert!(
                stats.dropped_foreign_cluster > 0 && stats.dropped_bad_auth > 0,
                "{stats:?}"
            );
        }
    }
    for stranger in [outsider, wrong_secret, no_secret] {
        assert_eq!(
            sim.view(stranger).members.len(),
            1,
            "the stranger stays alone"
        );
    }
}

#[test]
fn a_late_joiner_learns_the_newest_metadata_of_every_member() {
    let (mut sim, _) = cluster(5, 13);
    for i in 0..5 {
        sim.update_local(i, |m| {
            m.load_bytes = 1000 + i as u64;
            m.state = if i == 2 {
                NodeState::Leaving
            } else {
                NodeState::Normal
            };
        });
    }
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(5)))
        .expect("converged");
    sim.run_for(Duration::from_secs(30)); // foca's own broadcasts of these are long over.
    let late = sim.add_node(config("test", None), metadata(5, 16, "test"));
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(6)))
        .expect("the late joiner converges");
    let view = sim.view(late);
    for i in 0..5 {
        let member = &view.members[&sim.nodes()[i].host_id];
        assert_eq!(member.metadata.load_bytes, 1000 + i as u64);
        assert_eq!(member.metadata.stamp.version, 2);
    }
    assert_eq!(
        view.members[&sim.nodes()[2].host_id].metadata.state,
        NodeState::Leaving
    );
}

/// A node that starts while a member is down learns that member's record
/// only from another's digest (the down member cannot be pulled from): with
/// digests an hour apart it never does by itself, and its ring lacks the
/// member's tokens. A pull from a member that holds the record brings it —
/// what a joiner does before it computes its ranges (`ringstore-node`'s
/// `topology::catch_up::wait_until_caught_up`).
#[test]
fn a_node_started_while_a_member_is_down_learns_its_record_by_pulling_it() {
    let rare_digests = || {
        let mut config = config("test", None);
        config.metadata_gossip_interval = Duration::from_secs(3600);
        config
    };
    let mut sim = Simulation::new(29, LinkModel::lan());
    for i in 0..4 {
        sim.add_node(rare_digests(), metadata(i, 16, "test"));
    }
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all(4)))
        .expect("converged");
    let down = sim.nodes()[3].host_id;
    sim.kill(3);
    sim.run_until(Duration::from_secs(60), |s| {
        (0..3).all(|i| sim_sees(s, i, down, Liveness::Down))
    })
    .expect("the killed node is seen down");

    let late = sim.add_node(rare_digests(), metadata(4, 16, "test"));
    sim.run_until(Duration::from_secs(30), |s| {
        (0..3).all(|i| s.view(late).member(s.nodes()[i].host_id).is_some())
    })
    .expect("the late node learns the live members");
    sim.run_for(Duration::from_secs(20));
    let view = sim.view(late);
    assert!(
        view.member(down).is_none(),
        "without digests the late node was expected not to know the down member"
    );
    assert_ne!(view.ring.checksum(), sim.view(0).ring.checksum());

    sim.pull(late, 1, &[down]);
    sim.run_for(Duration::from_secs(1));
    let view = sim.view(late);
    let member = view.member(down).expect("the pulled record arrived");
    assert_eq!(member.liveness, Liveness::Down);
    assert_eq!(view.ring.tokens_of(down).len(), 16);
    assert_eq!(view.ring.checksum(), sim.view(0).ring.checksum());
}

fn sim_sees(
    sim: &Simulation,
    observer: usize,
    host: ringstore_placement::HostId,
    liveness: Liveness,
) -> bool {
    sim.view(observer)
        .member(host)
        .is_some_and(|m| m.liveness == liveness)
}

#[test]
fn every_node_sees_every_node_s_full_list_of_256_tokens() {
    let (sim, _) = cluster_with(8, 17, 256, LinkModel::lan());
    for i in 0..8 {
        let view = sim.view(i);
        assert_eq!(view.ring.token_count(), 8 * 256, "node {i}");
        for j in 0..8 {
            let expected: Vec<Token> = metadata(j, 256, "test").tokens;
            assert_eq!(view.ring.tokens_of(sim.nodes()[j].host_id), expected);
        }
    }
}

#[test]
fn joining_tokens_stay_out_of_the_ring_until_the_node_is_normal() {
    let (mut sim, _) = cluster(4, 19);
    sim.update_local(3, |m| m.state = NodeState::Joining);
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(4)))
        .expect("converged");
    let host = sim.nodes()[3].host_id;
    let view = sim.view(0);
    assert!(view.ring.tokens_of(host).is_empty());
    assert_eq!(view.joining[&host].len(), 16);
    sim.update_local(3, |m| m.state = NodeState::Normal);
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(4)))
        .expect("converged");
    assert_eq!(sim.view(0).ring.tokens_of(host).len(), 16);
}

#[test]
fn a_change_reaches_every_member_of_a_small_cluster_at_once_passed_on_by_those_pushed_to() {
    let (mut sim, _) = cluster(4, 29);
    let host = sim.nodes()[3].host_id;
    for round in 1..=10u64 {
        sim.update_local(3, |m| m.load_bytes = round);
        // Pushed to 2 of the 3 others, who pass it on: the third has it
        // after a few link delays (2 ms at most each), long before an
        // anti-entropy round (every 1 s) would bring it.
        let took = sim
            .run_until(Duration::from_secs(5), |s| {
                (0..3).all(|i| s.view(i).members[&host].metadata.load_bytes == round)
            })
            .expect("the change spreads");
        assert!(
            took <= Duration::from_millis(50),
            "change {round} took {took:?} to reach every member"
        );
        sim.run_for(Duration::from_millis(1500));
    }
}

#[test]
fn a_briefly_flapping_node_causes_no_down_events() {
    let (mut sim, _) = cluster(5, 23);
    let others = [0, 1, 2, 3];
    for _ in 0..5 {
        sim.partition(&[4], &others);
        sim.run_for(Duration::from_millis(1500));
        sim.heal();
        sim.run_for(Duration::from_secs(4));
    }
    for i in others {
        let downs = sim.nodes()[i]
            .events
            .iter()
            .filter(|(_, e)| matches!(e, MembershipEvent::Down(h) if *h == sim.nodes()[4].host_id))
            .count();
        assert_eq!(downs, 0, "node {i} saw the flapping node down");
    }
}

#[test]
fn views_converge_on_a_lossy_network() {
    let link = LinkModel {
        drop_probability: 0.05,
        ..LinkModel::lan()
    };
    let (sim, took) = cluster_with(10, 29, 16, link);
    assert!(sim.converged(&all(10)));
    println!("10 nodes, 5% loss: converged {took:?} after the last start");
}

#[test]
fn garbage_truncated_and_replayed_packets_change_nothing() {
    let mut sim = Simulation::new(31, LinkModel::lan());
    for i in 0..3 {
        sim.add_node(config("test", Some("s")), metadata(i, 16, "test"));
    }
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(3)))
        .expect("converged");
    let before = sim.view(0);
    // Capture real packets by replaying what node 1 would send: seal via a twin envelope.
    let mut twin = ringstore_membership::envelope::Envelope::new(
        "test",
        ringstore_membership::ClusterSecret::new("s").as_ref(),
        sim.nodes()[1].host_id,
        Generation(100),
    );
    let genuine = twin.seal(&[1, 0]); // a control body that does not decode
    sim.inject(0, addr(1), genuine.clone());
    sim.inject(0, addr(1), genuine.clone()); // replay
    for len in [0, 1, 10, 36, 40] {
        sim.inject(0, addr(9), genuine[..len.min(genuine.len())].to_vec());
    }
    let mut noise = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..300 {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                noise = noise
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (noise >> 56) as u8
            })
            .collect();
        sim.inject(0, addr(9), bytes);
    }
    sim.run_for(Duration::from_secs(1));
    let stats = sim.membership(0).unwrap().stats().clone();
    assert!(stats.dropped_replay >= 1, "{stats:?}");
    assert!(stats.dropped_malformed >= 5, "{stats:?}");
    let after = sim.view(0);
    assert_eq!(after.members.len(), before.members.len());
    assert_eq!(after.ring.checksum(), before.ring.checksum());
    assert!(sim.converged(&all(3)));
}

#[test]
fn a_node_whose_seed_is_not_up_yet_keeps_retrying_and_joins_when_it_is() {
    let mut sim = Simulation::new(37, LinkModel::lan());
    // Nodes 1 and 2 start first; their only seed, node 0, is not running yet.
    let mut early = Vec::new();
    for i in 1..3 {
        early.push(sim.add_node(config("test", None), metadata(i, 16, "test")));
    }
    sim.run_for(Duration::from_secs(20));
    for &i in &early {
        assert_eq!(
            sim.view(i).members.len(),
            1,
            "alone while the seed is missing"
        );
    }
    let seed = sim.add_node(config("test", None), metadata(0, 16, "test"));
    sim.run_until(Duration::from_secs(10), |s| {
        s.converged(&[seed, early[0], early[1]])
    })
    .expect("the waiting nodes join once the seed is up");
}

#[test]
fn a_node_started_just_before_its_seed_joins_within_a_second() {
    // Nodes started together: the seed's socket is not up at the first announce.
    let mut sim = Simulation::new(43, LinkModel::lan());
    let early = sim.add_node(config("test", None), metadata(1, 16, "test"));
    sim.run_for(Duration::from_millis(100));
    let seed = sim.add_node(config("test", None), metadata(0, 16, "test"));
    sim.run_until(Duration::from_secs(1), |s| s.converged(&[seed, early]))
        .expect("the quick retries reach the seed (not after the 2 s interval)");
}

#[test]
fn a_node_that_lost_every_member_announces_to_the_seeds_again() {
    // Without foca's periodic announce to down members, only the seed
    // re-announce can bring an isolated node back.
    let mut sim = Simulation::new(41, LinkModel::lan());
    for i in 0..3 {
        let mut config = config("test", None);
        config.swim.periodic_announce_to_down_members = None;
        sim.add_node(config, metadata(i, 16, "test"));
    }
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(3)))
        .expect("converged");
    sim.partition(&[2], &[0, 1]);
    sim.run_until(Duration::from_secs(30), |s| {
        let view = s.view(2);
        view.members
            .values()
            .filter(|m| m.liveness == Liveness::Down)
            .count()
            == 2
    })
    .expect("the isolated node sees everyone down");
    sim.run_for(Duration::from_secs(5));
    sim.heal();
    sim.run_until(Duration::from_secs(30), |s| s.converged(&all(3)))
        .expect("views re-converge after the isolation ends");
}

/// A cut between two halves, each with live members, lasting until each
/// half has declared the other down and long after, heals once the cut
/// does: neither half is alone, so neither announces to the seeds; what
/// brings them together is the periodic announce to down members
/// (`MembershipConfig::lan`). Without it this test fails.
#[test]
fn two_halves_that_declared_each_other_down_find_each_other_again() {
    cut_until_declared_down_then_heal(&[0, 1], &[2, 3]);
}

/// The only seed, cut off until it and the others have declared each other
/// down and long after, finds them again once the cut heals: it has no
/// other seed to announce to. Two things bring it back, each enough alone:
/// the others' periodic announce to down members, and its own announce to
/// the members it knows once it learns it was declared down and rejoins.
/// Without both (tried), this test fails.
#[test]
fn the_only_seed_cut_off_long_after_all_are_declared_down_finds_the_others_again() {
    cut_until_declared_down_then_heal(&[0], &[1, 2, 3]);
}

/// Cuts 4 converged nodes into groups `a` and `b` until each group sees
/// every node of the other down, and a minute longer (every notice about
/// the other side has been sent and lost); then heals the cut, and expects
/// every node to see every other up again within a minute.
fn cut_until_declared_down_then_heal(a: &[usize], b: &[usize]) {
    let (mut sim, _) = common::cluster(4, 31);
    sim.partition(a, b);
    sim.run_until(Duration::from_secs(120), |s| {
        a.iter().all(|&x| {
            b.iter().all(|&y| {
                sim_sees(s, x, s.nodes()[y].host_id, Liveness::Down)
                    && sim_sees(s, y, s.nodes()[x].host_id, Liveness::Down)
            })
        })
    })
    .expect("both sides declare the other down");
    sim.run_for(Duration::from_secs(60));
    sim.heal();
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all(4)))
        .expect("both sides see each other up again");
}

/// The only seed paused (its packets and its peers' held, then delivered at
/// once) long enough that it declared every other member down and they
/// declared it down: the held verdicts reach everyone together, every node
/// rejoins under a new identity at the same moment, and what each sends
/// next goes to the others' old identities and is dropped. Each must then
/// announce to the members it knows; before that, the cluster stayed split
/// for good, the seed alone (the whole-cluster simulation's seed 8984: a
/// pause of 5.9 s after earlier faults; here, pauses of 6 to 20 s).
#[test]
fn the_only_seed_paused_until_all_are_declared_down_finds_the_others_again() {
    for (run, pause_ms) in (6_000..=20_000).step_by(2_000).enumerate() {
        let (mut sim, _) = common::cluster(4, 40 + run as u64);
        sim.hold(&[0], &[1, 2, 3]);
        sim.run_for(Duration::from_millis(pause_ms));
        sim.release();
        let healed = sim.run_until(Duration::from_secs(30), |s| s.converged(&all(4)));
        assert!(
            healed.is_some_and(|h| h <= Duration::from_secs(10)),
            "after a pause of {pause_ms} ms: {healed:?}"
        );
    }
}

/// A hundred nodes started at once through one seed, on a lossy network:
/// SWIM's dissemination of the joins ends with a few pairs that never met,
/// and each would find the other only when one happened to probe it (15 s
/// at 100 nodes, 81 s at 200 before the fix). A node announces to the
/// members whose records it holds but SWIM has never heard of, so the
/// views agree within seconds.
#[test]
fn a_hundred_nodes_started_at_once_all_see_each_other_up_within_seconds() {
    let nodes = 100;
    let mut sim = Simulation::new(nodes as u64, lossy_lan());
    for i in 0..nodes {
        sim.add_node(config("test", None), metadata(i, 16, "test"));
    }
    let took = sim.run_until(Duration::from_secs(60), |s| s.converged(&all(nodes)));
    assert!(
        took.is_some_and(|t| t <= Duration::from_secs(6)),
        "converged after {took:?}"
    );
}

/// A whole cluster restarted together, each node remembering the others:
/// each announces to its seed and a sample of the members it knows (not to
/// all of them, which was n² announces at once), and all see each other up
/// within a couple of seconds.
#[test]
fn a_whole_cluster_restarted_together_finds_itself_with_sampled_announces() {
    let nodes = 150;
    let mut sim = restarted_cluster(nodes, 7, LinkModel::lan(), || config("test", None));
    // Within the first few milliseconds only the announces, their feeds
    // and the clock probes of the first members up (and their echoes) are
    // on the wire: about 2 × 17 + 2 × 16 per node, against 2 × 149 for the
    // announces alone if each node announced to every member.
    sim.run_for(Duration::from_millis(5));
    let sent = sim.packets_sent();
    assert!(
        sent < (nodes * 100) as u64,
        "{sent} packets in the first 5 ms: every node announced to every member"
    );
    let took = sim.run_until(Duration::from_secs(30), |s| s.converged(&all(nodes)));
    assert!(
        took.is_some_and(|t| t <= Duration::from_secs(3)),
        "converged after {took:?}"
    );
}

/// Each SWIM update is sent a number of times that grows with the cluster
/// (4 · log10 n), not the preset's fixed count: an update sent `k` times by
/// each node that has it misses about `e^-k` of the members, and a member
/// that missed a death learns it only when it probes the dead node itself,
/// up to n probe periods later. A preset of 3 would leave about 6 of 100
/// members in the dark; grown to 9, every member sees the dead node down
/// within the detection bound.
#[test]
fn a_death_reaches_every_member_because_updates_are_sent_as_often_as_the_size_needs() {
    let nodes = 100;
    let few = || {
        let mut config = config("test", None);
        config.swim.max_transmissions = NonZeroU8::new(3).expect("nonzero");
        config
    };
    let mut sim = restarted_cluster(nodes, 21, lossy_lan(), few);
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all(nodes)))
        .expect("the cluster converges");
    for victim in [nodes - 1, nodes / 2] {
        sim.kill(victim);
        let took = sim.run_until(Duration::from_secs(120), |s| {
            s.seen_by_all_as(victim, Liveness::Down)
        });
        assert!(
            took.is_some_and(|t| t <= DETECTION_BOUND),
            "node {victim} seen down by all after {took:?}"
        );
    }
}

/// A quiet cluster's metadata anti-entropy sends each round a hash of the
/// versions a node holds, and the whole digest only to a peer whose hash
/// differs: what a node sends does not grow with the cluster. (A digest of
/// every member each round cost about 40 bytes per member per second,
/// 41.7 KiB/s a node at 1,000 nodes.)
#[test]
fn a_quiet_cluster_s_gossip_does_not_grow_with_its_size() {
    let bytes_per_node_second = |nodes: usize| {
        let mut sim = restarted_cluster(nodes, nodes as u64, LinkModel::lan(), || {
            config("test", None)
        });
        sim.run_until(Duration::from_secs(60), |s| s.converged(&all(nodes)))
            .expect("the cluster converges");
        sim.run_for(Duration::from_secs(10));
        let before = sim.bytes_sent();
        let window = Duration::from_secs(20);
        sim.run_for(window);
        (sim.bytes_sent() - before) as f64 / nodes as f64 / window.as_secs_f64()
    };
    let small = bytes_per_node_second(25);
    let big = bytes_per_node_second(200);
    assert!(
        big < small * 1.3,
        "a node sends {big:.0} B/s at 200 nodes, {small:.0} B/s at 25"
    );
}
