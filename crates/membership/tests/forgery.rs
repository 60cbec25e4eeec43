//! A member that holds the cluster secret tries to speak for others (issue
//! 40): a record for another host id, a removal of a live node, a claim on a
//! live node's tokens, an old record replayed after a restart, and the same
//! from a node that was removed. Every one is refused by every member, and
//! the cluster keeps its view: the victim stays up, in the ring, with its
//! tokens. The nodes have host ids derived from their keys, as real nodes do.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{addr, config, metadata};
use ringstore_identity::NodeKeys;
use ringstore_membership::envelope::Envelope;
use ringstore_membership::sim::{LinkModel, Simulation};
use ringstore_membership::{
    Generation, Liveness, MembershipEvent, MetadataStamp, NodeMetadata, NodeState, metadata_bodies,
};
use ringstore_placement::HostId;

const SECRET: &str = "forgery-test-secret-0123456789";
/// Nodes 0-2 are honest; node 3 is the forger (a member with the secret).
const N: usize = 4;
const VICTIM: usize = 1;
const FORGER: usize = 3;

fn keys(i: usize) -> Arc<NodeKeys> {
    Arc::new(NodeKeys::for_test(7000 + i as u64))
}

/// Four nodes with derived host ids and the secret, converged.
fn cluster(seed: u64) -> Simulation {
    let mut sim = Simulation::new(seed, LinkModel::lan());
    for i in 0..N {
        let keys = keys(i);
        let mut m = metadata(i, 8, "test");
        m.host_id = keys.host_id();
        sim.add_node_with_keys(config("test", Some(SECRET)), m, keys);
    }
    let all: Vec<usize> = (0..N).collect();
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all))
        .expect("the cluster converges");
    sim
}

fn host(sim: &Simulation, i: usize) -> HostId {
    sim.nodes()[i].host_id
}

/// Sends `record`'s bytes (a record of `subject` at `stamp`) to every
/// running node but the forger, sealed with the secret as the forger.
fn send_to_all(sim: &mut Simulation, record: &[u8], stamp: MetadataStamp, subject: HostId) {
    let mut envelope = Envelope::new(
        "test",
        ringstore_membership::ClusterSecret::new(SECRET).as_ref(),
        host(sim, FORGER),
        Generation(rand_generation()),
    );
    let from: SocketAddr = addr(FORGER);
    for body in metadata_bodies(subject, stamp, record) {
        let packet = envelope.seal(&body);
        for i in 0..N {
            if i != FORGER && sim.nodes()[i].is_running() {
                sim.inject(i, from, packet.clone());
            }
        }
    }
}

/// A generation for a forger's envelope that no earlier one used.
fn rand_generation() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1 << 20);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Every node but the forger (which believes its own claims) sees the
/// victim up, `Normal`, in the ring with all its tokens, not removed, and
/// every node is still running.
fn victim_intact(sim: &Simulation) {
    let victim = host(sim, VICTIM);
    let tokens = sim
        .view(VICTIM)
        .member(victim)
        .unwrap()
        .metadata
        .tokens
        .clone();
    for i in (0..N).filter(|&i| i != FORGER) {
        assert!(sim.nodes()[i].is_running(), "node {i} stopped");
        let view = sim.view(i);
        let member = view.member(victim).expect("the victim is known");
        assert_eq!(
            member.liveness,
            Liveness::Up,
            "node {i} sees the victim down"
        );
        assert_eq!(member.metadata.state, NodeState::Normal, "node {i}");
        assert!(
            !view.removed.contains(&victim),
            "node {i} removed the victim"
        );
        assert_eq!(
            view.ring.tokens_of(victim),
            tokens,
            "node {i}: the victim's tokens"
        );
    }
}

#[test]
fn a_record_for_another_host_id_is_refused_by_every_member() {
    let mut sim = cluster(1);
    let victim = host(&sim, VICTIM);
    let forger_keys = keys(FORGER);
    let current = sim.view(VICTIM).member(victim).unwrap().metadata.clone();
    let mut forged = NodeMetadata::clone(&current);
    forged.state = NodeState::Left;
    forged.stamp = MetadataStamp {
        generation: Generation(current.stamp.generation.0 + 1000),
        version: 1,
    };
    // 1. The victim's keys, the forger's signature.
    let mut bytes = forged.clone().sign(&forger_keys).encode().unwrap();
    let signature_at = bytes.len() - 64;
    bytes.truncate(signature_at);
    let mut payload = bytes.clone();
    payload.extend_from_slice(&forger_keys.sign(&bytes).0);
    send_to_all(&mut sim, &payload, forged.stamp, victim);
    // 2. The forger's own keys, correctly signed, naming the victim's host id.
    let mut own_keys = forged.clone();
    own_keys.keys = forger_keys.public();
    let signed = own_keys.sign(&forger_keys).encode().unwrap();
    send_to_all(&mut sim, &signed, forged.stamp, victim);
    let sent_at = sim.now();
    sim.run_for(Duration::from_secs(5));
    victim_intact(&sim);
    for i in [0, 2] {
        // Not even for a moment: a node that took the forgery would have
        // reported the change (and the victim, seeing a newer record of
        // itself, would have published a newer one).
        let changes = sim.nodes()[i]
            .events
            .iter()
            .filter(|(at, event)| {
                *at >= sent_at && *event == MembershipEvent::MetadataChanged(victim)
            })
            .count();
        assert_eq!(changes, 0, "node {i} took a forged record of the victim");
        let stats = sim.membership(i).unwrap().stats().clone();
        assert!(stats.metadata_forged >= 2, "node {i}: {stats:?}");
    }
}

#[test]
fn a_removal_of_a_live_node_is_refused_until_every_member_sees_it_down() {
    let mut sim = cluster(2);
    let victim = host(&sim, VICTIM);
    let forger = host(&sim, FORGER);
    sim.update_local(FORGER, move |m| m.takeovers.removed.push(victim));
    sim.run_for(Duration::from_secs(5));
    victim_intact(&sim);
    assert!(
        sim.view(VICTIM).removal_claims.contains(&forger),
        "the victim is told who claims to have removed it"
    );
    for i in [0, 2] {
        assert!(
            sim.membership(i).unwrap().stats().claims_refused >= 1,
            "node {i}"
        );
    }
    // The same claim about a node every member sees down is how removenode
    // works, and is accepted once a newer record carries it.
    sim.kill(VICTIM);
    sim.run_until(Duration::from_secs(60), |s| {
        s.seen_by_all_as(VICTIM, Liveness::Down)
    })
    .expect("the victim is seen down");
    sim.update_local(FORGER, |m| m.load_bytes += 1);
    sim.run_for(Duration::from_secs(3));
    for i in [0, 2, 3] {
        assert!(sim.view(i).removed.contains(&victim), "node {i}");
        assert!(!sim.view(i).ring.contains_host(victim), "node {i}");
    }
}

#[test]
fn a_claim_on_a_live_nodes_tokens_leaves_them_with_it() {
    let mut sim = cluster(3);
    let victim = host(&sim, VICTIM);
    let forger_keys = keys(FORGER);
    let theirs = sim
        .view(VICTIM)
        .member(victim)
        .unwrap()
        .metadata
        .tokens
        .clone();
    let mine = sim
        .view(FORGER)
        .member(host(&sim, FORGER))
        .unwrap()
        .metadata
        .clone();
    let mut claim = NodeMetadata::clone(&mine);
    claim.tokens.extend(theirs.iter().copied());
    claim.tokens.sort_unstable();
    // An older generation than anyone's, as if it had owned them first,
    // and a version far ahead so it is the newest record of the forger.
    claim.stamp = MetadataStamp {
        generation: Generation(1),
        version: u64::MAX / 2,
    };
    // Records are ordered by (generation, version): one of generation 1 is
    // older than the forger's own, so send it as the forger of a brand new
    // generation would, and also as its current generation's next version.
    for stamp in [
        claim.stamp,
        MetadataStamp {
            generation: mine.stamp.generation,
            version: mine.stamp.version + 10,
        },
    ] {
        let mut record = claim.clone();
        record.stamp = stamp;
        let bytes = record.sign(&forger_keys).encode().unwrap();
        let forger = host(&sim, FORGER);
        send_to_all(&mut sim, &bytes, stamp, forger);
    }
    sim.run_for(Duration::from_secs(5));
    victim_intact(&sim);
}

#[test]
fn an_old_record_replayed_after_a_restart_changes_nothing() {
    let mut sim = cluster(4);
    let victim = host(&sim, VICTIM);
    // The victim says `Leaving` in one version (a forger records it), then
    // `Normal` again.
    sim.update_local(VICTIM, |m| m.state = NodeState::Leaving);
    sim.run_for(Duration::from_secs(2));
    let old = sim.view(0).member(victim).unwrap().metadata.clone();
    assert_eq!(old.state, NodeState::Leaving);
    // The genuine signed record, as the forger received it (Ed25519 signs
    // deterministically: signing the same bytes again gives the same record).
    let captured = NodeMetadata::clone(&old)
        .sign(&keys(VICTIM))
        .encode()
        .unwrap();
    sim.update_local(VICTIM, |m| m.state = NodeState::Normal);
    sim.restart(VICTIM);
    let all: Vec<usize> = (0..N).collect();
    sim.run_until(Duration::from_secs(60), |s| s.converged(&all))
        .expect("the cluster converges after the restart");
    send_to_all(&mut sim, &captured, old.stamp, victim);
    sim.run_for(Duration::from_secs(5));
    victim_intact(&sim);
    let generation = sim
        .view(VICTIM)
        .member(victim)
        .unwrap()
        .metadata
        .stamp
        .generation;
    assert!(generation > old.stamp.generation);
    for i in 0..N {
        assert_eq!(
            sim.view(i)
                .member(victim)
                .unwrap()
                .metadata
                .stamp
                .generation,
            generation,
            "node {i} holds the victim's current generation"
        );
    }
}

#[test]
fn a_removed_node_is_refused_whatever_it_sends() {
    let mut sim = cluster(5);
    let victim = host(&sim, VICTIM);
    let removed = host(&sim, 2);
    // Node 2 dies and node 0 removes it, as removenode does.
    sim.kill(2);
    sim.run_until(Duration::from_secs(60), |s| {
        s.seen_by_all_as(2, Liveness::Down)
    })
    .expect("node 2 is seen down");
    sim.update_local(0, move |m| m.takeovers.removed.push(removed));
    sim.run_for(Duration::from_secs(3));
    for i in [0, 1, 3] {
        assert!(sim.view(i).removed.contains(&removed), "node {i}");
    }
    // It comes back on its old data, with the secret and its keys, and
    // claims the victim's removal.
    sim.restart(2);
    sim.update_local(2, move |m| m.takeovers.removed.push(victim));
    sim.run_for(Duration::from_secs(10));
    for i in [0, 1, 3] {
        let view = sim.view(i);
        assert!(view.removed.contains(&removed), "node {i}");
        assert!(!view.is_up(removed), "node {i} sees the removed node up");
        assert!(
            !view.removed.contains(&victim),
            "node {i} removed the victim"
        );
        assert!(
            sim.membership(i).unwrap().stats().dropped_removed > 0,
            "node {i}"
        );
    }
    assert!(
        sim.view(2).removal_claims.contains(&host(&sim, 0)),
        "the removed node learns who removed it"
    );
}

#[test]
fn a_decommissioned_node_cannot_come_back_under_its_old_host_id() {
    let mut sim = cluster(6);
    let gone = host(&sim, 2);
    sim.update_local(2, |m| m.state = NodeState::Left);
    sim.run_for(Duration::from_secs(2));
    for i in [0, 1, 3] {
        assert!(sim.view(i).has_left(gone), "node {i}");
    }
    // With its key, it publishes itself Normal again, newer.
    sim.update_local(2, |m| m.state = NodeState::Normal);
    sim.run_for(Duration::from_secs(5));
    for i in [0, 1, 3] {
        let view = sim.view(i);
        assert!(view.has_left(gone), "node {i} took it back");
        assert!(!view.ring.contains_host(gone), "node {i}");
        assert!(
            sim.membership(i).unwrap().stats().metadata_refused > 0,
            "node {i}"
        );
    }
}
