//! The state machine's unit tests: garbage, clock probes, remembered members, metadata.

use super::*;
use crate::envelope::ClusterSecret;
use crate::identity::Generation;
use crate::message::{MetadataChunk, chunk_metadata, encode_control};
use crate::metadata::tests::signed_sample;
use proptest::prelude::*;

fn node(secret: Option<&str>) -> Membership {
    let mut metadata = crate::metadata::tests::sample(1, 16);
    metadata.cluster_name = "test".into();
    let identity = NodeIdentity {
        host_id: metadata.host_id,
        gossip_addr: metadata.gossip_addr,
        generation: metadata.stamp.generation,
        rejoin: 0,
    };
    let config =
        MembershipConfig::lan("test", vec![]).with_secret(secret.and_then(ClusterSecret::new));
    Membership::new(
        config,
        identity,
        metadata,
        Arc::new(NodeKeys::for_test(1)),
        1,
    )
}

proptest! {
    /// Bodies that pass the envelope (so a peer, or an attacker holding the
    /// secret, sent them) but hold garbage never panic the node nor change
    /// its view.
    #[test]
    fn garbage_inside_a_valid_envelope_changes_nothing(
        swim in proptest::collection::vec(any::<u8>(), 0..600),
        control in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut membership = node(Some("s"));
        let before = membership.view();
        let mut peer = Envelope::new("test", ClusterSecret::new("s").as_ref(), HostId::from_u128(2), Generation(1));
        let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
        membership.handle_packet(from, &peer.seal(&encode_swim(&swim)));
        let mut body = vec![1u8];
        body.extend_from_slice(&control);
        membership.handle_packet(from, &peer.seal(&body));
        prop_assert_eq!(membership.view().members.len(), before.members.len());
        prop_assert_eq!(membership.view().ring.checksum(), before.ring.checksum());
    }
}

proptest! {
    /// Clock echoes nobody asked for, and garbage clock bodies, leave no
    /// estimate behind (and never panic).
    #[test]
    fn forged_clock_echoes_and_garbage_change_no_estimate(
        probe_sent_at in any::<i64>(),
        replied_at in any::<i64>(),
        garbage in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut membership = node(None);
        let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
        let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
        let echo = ClockMessage::Echo { probe_sent_at, replied_at };
        membership.handle_packet(from, &peer.seal(&encode_clock(&echo)));
        let mut body = vec![2u8];
        body.extend_from_slice(&garbage);
        membership.handle_packet(from, &peer.seal(&body));
        prop_assert!(membership.clock_report().peers.is_empty());
        prop_assert!(!membership.clock_report().verdict.is_skewed());
    }
}

#[test]
fn remembered_members_are_in_the_ring_at_once_and_down_until_seen() {
    let alone = node(None);
    assert_eq!(alone.view().ring.hosts().len(), 1);
    let mut peer = crate::metadata::tests::sample(2, 16);
    peer.cluster_name = "test".into();
    peer.tokens.iter_mut().for_each(|token| token.0 += 1);
    let mut stranger = crate::metadata::tests::sample(3, 16);
    stranger.cluster_name = "another".into();
    let mut own = crate::metadata::tests::sample(1, 16);
    own.cluster_name = "test".into();
    own.tokens.clear();
    let memory = Remembrance {
        records: [peer.clone(), stranger, own]
            .into_iter()
            .map(SignedMetadata::unsigned)
            .collect(),
        claims: Vec::new(),
    };
    let membership = node(None).with_remembered(memory);
    let view = membership.view();
    assert_eq!(
        view.ring.hosts().len(),
        2,
        "this node and the remembered peer"
    );
    assert!(!view.is_up(peer.host_id), "down until gossip finds it up");
    assert_eq!(
        view.member(view.local).unwrap().metadata.tokens.len(),
        16,
        "its own entry is its own, not the remembered one"
    );
}

#[test]
fn a_clock_probe_is_echoed_at_once_to_its_sender() {
    let mut membership = node(None);
    membership.drain_outputs();
    let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
    let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
    let probe = ClockMessage::Probe { sent_at: 42 };
    membership.handle_packet(from, &peer.seal(&encode_clock(&probe)));
    let sends: Vec<Vec<u8>> = membership
        .drain_outputs()
        .into_iter()
        .filter_map(|o| match o {
            Output::Send { to, packet } if to == from => Some(packet),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 1);
    let opened = peer.open(&sends[0]).unwrap();
    let before = crate::clock::system_micros();
    match Body::decode(opened.body) {
        Some(Body::Clock(ClockMessage::Echo {
            probe_sent_at,
            replied_at,
        })) => {
            assert_eq!(probe_sent_at, 42);
            assert!((replied_at - before).abs() < 60_000_000, "the system clock");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn inconsistent_metadata_chunks_are_counted_and_dropped() {
    let mut membership = node(None);
    let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
    let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
    let (keys, other) = signed_sample(2, 4);
    let mut other = NodeMetadata::clone(&other.metadata);
    other.cluster_name = "another".into();
    let encoded = other.clone().sign(&keys).encode().unwrap();
    for chunk in chunk_metadata(other.host_id, other.stamp, &encoded) {
        membership.handle_packet(from, &peer.seal(&encode_control(&chunk)));
    }
    let bad = Control::Metadata(MetadataChunk {
        host_id: HostId::from_u128(3),
        stamp: other.stamp,
        index: 5,
        count: 2,
        data: vec![1, 2, 3],
    });
    membership.handle_packet(from, &peer.seal(&encode_control(&bad)));
    assert_eq!(membership.stats().metadata_rejected, 2);
    assert_eq!(membership.view().members.len(), 1);
}

/// Each SWIM update is sent more often as the cluster grows, never less
/// often than the preset says, and the count follows the records a node
/// holds (a restarted node remembering 1,000 members sends each update 13
/// times from its first moment).
#[test]
fn updates_are_sent_more_often_as_the_cluster_grows() {
    let counts: Vec<u8> = [1, 10, 100, 1_000, 5_000]
        .into_iter()
        .map(|n| transmissions_for(n).get())
        .collect();
    assert_eq!(counts, [2, 5, 9, 13, 15]);

    let mut membership = node(None);
    assert_eq!(
        membership.transmissions.get(),
        8,
        "a lone node keeps the preset's 8"
    );
    let records = (2..=1_000).map(|i| signed_sample(i, 1).1).collect();
    membership = membership.with_remembered(Remembrance {
        records,
        claims: Vec::new(),
    });
    assert_eq!(membership.transmissions.get(), 13);
}

/// A member's load or address update changes its record, not the ring: the
/// view takes it without building a ring; new tokens or a new state do
/// build one.
#[test]
fn only_a_record_that_can_change_the_ring_rebuilds_it() {
    let mut membership = node(None);
    let mut peer = Envelope::new("test", None, HostId::from_u128(2), Generation(1));
    let from: SocketAddr = "127.0.0.2:7000".parse().unwrap();
    let (keys, record) = signed_sample(2, 4);
    let mut metadata = NodeMetadata::clone(&record.metadata);
    metadata.tokens.iter_mut().for_each(|token| token.0 += 1);
    let mut deliver = |membership: &mut Membership, metadata: &NodeMetadata| {
        let encoded = metadata.clone().sign(&keys).encode().unwrap();
        for chunk in chunk_metadata(metadata.host_id, metadata.stamp, &encoded) {
            membership.handle_packet(from, &peer.seal(&encode_control(&chunk)));
        }
    };
    let builds = |membership: &Membership| membership.stats().ring_builds;

    deliver(&mut membership, &metadata);
    let after_first = builds(&membership);
    assert_eq!(
        membership.view().ring.hosts().len(),
        2,
        "the peer is in the ring"
    );
    for load in 1..=20 {
        metadata.stamp.version += 1;
        metadata.load_bytes = load * 1_000_000;
        deliver(&mut membership, &metadata);
    }
    let member = &membership.view().members[&metadata.host_id];
    assert_eq!(
        member.metadata.load_bytes, 20_000_000,
        "the view has the newest load"
    );
    assert_eq!(builds(&membership), after_first, "no ring built for a load");

    metadata.stamp.version += 1;
    metadata.tokens.pop();
    deliver(&mut membership, &metadata);
    assert_eq!(builds(&membership), after_first + 1);
    assert_eq!(membership.view().ring.tokens_of(metadata.host_id).len(), 3);
}
