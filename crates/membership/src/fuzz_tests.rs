//! Fuzzing the gossip decoders with proptest: arbitrary datagrams, and valid
//! packets mutated (truncated, bit-flipped, extended, length fields set huge),
//! fed to the envelope, the body decoder and a whole [`Membership`].
//!
//! Properties: nothing panics; with a cluster secret, a mutated sealed packet
//! never opens (it cannot pass as a different message); a malicious but
//! well-formed metadata message (any tokens, states, takeovers, chunking) is
//! refused or absorbed without a panic.
//!
//! In-crate because the control messages are crate-private. More cases:
//! `PROPTEST_CASES=100000 cargo test -p ringstore-membership fuzz_tests`.

use std::net::SocketAddr;
use std::sync::Arc;

use proptest::prelude::*;
use ringstore_identity::NodeKeys;
use ringstore_placement::{HostId, Token};

use crate::config::MembershipConfig;
use crate::envelope::{ClusterSecret, Envelope, HEADER_LEN};
use crate::identity::{Generation, NodeIdentity};
use crate::message::{Body, Control, MetadataChunk, chunk_metadata, encode_control, encode_swim};
use crate::metadata::{MetadataStamp, NodeMetadata, NodeState, SignedMetadata, Takeovers};
use crate::state_machine::{Membership, Timer};

const CLUSTER: &str = "fuzz";
const LOCAL: u128 = 1;
const PEER: u128 = 2;

fn addr(n: u128) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, n as u8], 7000))
}

fn metadata(host: u128, tokens: Vec<Token>) -> NodeMetadata {
    NodeMetadata {
        host_id: HostId::from_u128(host),
        keys: keys_of(host).public(),
        stamp: MetadataStamp {
            generation: Generation(7),
            version: 1,
        },
        cluster_name: CLUSTER.into(),
        dc: "dc1".into(),
        rack: "rack1".into(),
        client_addr: addr(host),
        internode_addr: addr(host),
        gossip_addr: addr(host),
        tokens,
        state: NodeState::Normal,
        load_bytes: 0,
        schema_version: uuid::Uuid::nil(),
        software_version: "0.1.0".into(),
        takeovers: Takeovers::default(),
    }
}

/// The keys of test host `host`.
fn keys_of(host: u128) -> NodeKeys {
    NodeKeys::for_test(host as u64 + 100)
}

/// `m` as its host signs it (the local node's and a peer's alike).
fn signed(m: &NodeMetadata) -> Vec<u8> {
    let keys = keys_of(m.host_id.0.as_u128());
    let mut m = m.clone();
    m.keys = keys.public();
    m.sign(&keys).encode().expect("signed")
}

/// A node of cluster [`CLUSTER`], with tokens 0, 10, 20.
fn node(secret: Option<&str>) -> Membership {
    let config = MembershipConfig::lan(CLUSTER, vec![addr(PEER)])
        .with_secret(secret.and_then(ClusterSecret::new));
    let identity = NodeIdentity {
        host_id: HostId::from_u128(LOCAL),
        gossip_addr: addr(LOCAL),
        generation: Generation(7),
        rejoin: 0,
    };
    let tokens = vec![Token(0), Token(10), Token(20)];
    let keys = Arc::new(keys_of(LOCAL));
    let mut node = Membership::new(config, identity, metadata(LOCAL, tokens), keys, 42);
    node.drain_outputs();
    node
}

/// The envelope of the peer that sends to [`node`].
fn peer_envelope(secret: Option<&str>) -> Envelope {
    let secret = secret.and_then(ClusterSecret::new);
    Envelope::new(
        CLUSTER,
        secret.as_ref(),
        HostId::from_u128(PEER),
        Generation(3),
    )
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Ways to damage a valid encoding.
#[derive(Clone, Debug)]
enum Mutation {
    Truncate(prop::sample::Index),
    FlipBit(prop::sample::Index, u8),
    Append(Vec<u8>),
    /// Overwrites 1–8 bytes at a position with 0xff: a length or count field
    /// (a postcard varint, a u16 count) set huge.
    Saturate(prop::sample::Index, usize),
    Overwrite(prop::sample::Index, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        bytes(64).prop_map(Mutation::Append),
        (any::<prop::sample::Index>(), 1usize..9).prop_map(|(i, n)| Mutation::Saturate(i, n)),
        (any::<prop::sample::Index>(), bytes(16)).prop_map(|(i, b)| Mutation::Overwrite(i, b)),
    ]
}

fn mutate(mut data: Vec<u8>, mutation: &Mutation) -> Vec<u8> {
    if data.is_empty() {
        return data;
    }
    match mutation {
        Mutation::Truncate(at) => data.truncate(at.index(data.len())),
        Mutation::FlipBit(at, bit) => {
            let at = at.index(data.len());
            data[at] ^= 1 << bit;
        }
        Mutation::Append(extra) => data.extend_from_slice(extra),
        Mutation::Saturate(at, n) => {
            let start = at.index(data.len());
            let end = (start + n).min(data.len());
            data[start..end].fill(0xff);
        }
        Mutation::Overwrite(at, with) => {
            let start = at.index(data.len());
            for (i, b) in with.iter().enumerate() {
                if let Some(slot) = data.get_mut(start + i) {
                    *slot = *b;
                }
            }
        }
    }
    data
}

fn token() -> impl Strategy<Value = Token> {
    prop_oneof![
        any::<i64>().prop_map(Token),
        // The local node's tokens and their neighbours: collisions.
        (-1i64..22).prop_map(Token),
        Just(Token::MIN),
        Just(Token::MAX),
    ]
}

fn host() -> impl Strategy<Value = HostId> {
    (0u128..5).prop_map(HostId::from_u128)
}

/// Well-formed but hostile metadata: any host (the local one included), any
/// tokens (unsorted, duplicated, colliding), any state and takeovers.
fn hostile_metadata() -> impl Strategy<Value = NodeMetadata> {
    (
        0u128..5,
        proptest::collection::vec(token(), 0..40),
        prop_oneof![
            Just(NodeState::Joining),
            Just(NodeState::Normal),
            Just(NodeState::Leaving),
            Just(NodeState::Left),
        ],
        proptest::option::of(host()),
        proptest::option::of(host()),
        proptest::collection::vec(host(), 0..4),
        any::<(u64, u64)>(),
        prop_oneof![Just(String::new()), Just("dc1".to_string()), "[a-z]{1,3}"],
    )
        .prop_map(
            |(h, tokens, state, replaces, removing, removed, (generation, version), dc)| {
                let mut m = metadata(h, tokens);
                m.state = state;
                m.takeovers = Takeovers {
                    replaces,
                    removing,
                    removed,
                };
                m.stamp = MetadataStamp {
                    generation: Generation(generation),
                    version,
                };
                m.dc = dc.as_str().into();
                m
            },
        )
}

/// A control message as an attacker without the secret could send it.
fn control() -> impl Strategy<Value = Control> {
    let stamp = any::<(u64, u64)>().prop_map(|(g, v)| MetadataStamp {
        generation: Generation(g),
        version: v,
    });
    prop_oneof![
        proptest::collection::vec((host(), stamp.clone()), 0..40).prop_map(Control::Digest),
        proptest::collection::vec(host(), 0..100).prop_map(Control::Pull),
        (host(), stamp, any::<u16>(), any::<u16>(), bytes(64)).prop_map(
            |(host_id, stamp, index, count, data)| Control::Metadata(MetadataChunk {
                host_id,
                stamp,
                index,
                count,
                data,
            })
        ),
        any::<u64>().prop_map(Control::DigestHash),
        Just(Control::SendDigest),
    ]
}

/// Drives `node` a little after a packet, as the agent would: its timers fire.
fn tick(node: &mut Membership) {
    node.handle_timer(Timer::GossipMetadata);
    node.drain_outputs();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_datagrams_never_panic_a_node(packet in bytes(2048)) {
        for secret in [None, Some("s3cret")] {
            let mut node = node(secret);
            node.handle_packet(addr(PEER), &packet);
            tick(&mut node);
        }
    }

    #[test]
    fn arbitrary_bodies_in_a_valid_envelope_never_panic_a_node(
        body in bytes(1500),
        kind in 0u8..3,
    ) {
        // The body as it is, or made to look like a SWIM or control body.
        let body = match kind {
            0 => body,
            1 => encode_swim(&body),
            _ => [&[1u8][..], &body].concat(),
        };
        for secret in [None, Some("s3cret")] {
            let mut node = node(secret);
            let packet = peer_envelope(secret).seal(&body);
            node.handle_packet(addr(PEER), &packet);
            tick(&mut node);
        }
    }

    #[test]
    fn body_decoding_never_panics_and_controls_round_trip(body in bytes(1500)) {
        if let Some(Body::Control(control)) = Body::decode(&body) {
            // Decoding is a function of the bytes: the decoded message encodes
            // to a body that decodes to the same message.
            let again = encode_control(&control);
            prop_assert_eq!(Body::decode(&again), Some(Body::Control(control)));
        }
    }

    #[test]
    fn a_mutated_sealed_packet_never_opens_with_a_secret(
        body in bytes(300),
        mutation in mutation(),
    ) {
        let mut sender = peer_envelope(Some("s3cret"));
        let packet = sender.seal(&body);
        let damaged = mutate(packet.clone(), &mutation);
        prop_assume!(damaged != packet);
        let mut receiver = Envelope::new(
            CLUSTER,
            ClusterSecret::new("s3cret").as_ref(),
            HostId::from_u128(LOCAL),
            Generation(1),
        );
        prop_assert!(receiver.open(&damaged).is_err(), "{mutation:?} opened");
        // The undamaged packet still opens: the rejection was the damage's.
        prop_assert!(receiver.open(&packet).is_ok());
    }

    #[test]
    fn a_mutated_sealed_packet_never_panics_a_node(
        control in control(),
        mutation in mutation(),
    ) {
        for secret in [None, Some("s3cret")] {
            let mut node = node(secret);
            let packet = peer_envelope(secret).seal(&encode_control(&control));
            node.handle_packet(addr(PEER), &mutate(packet, &mutation));
            tick(&mut node);
        }
    }

    #[test]
    fn hostile_control_messages_never_panic_a_node(
        controls in proptest::collection::vec(control(), 1..8),
    ) {
        let mut node = node(None);
        let mut peer = peer_envelope(None);
        for control in &controls {
            node.handle_packet(addr(PEER), &peer.seal(&encode_control(control)));
            tick(&mut node);
        }
    }

    #[test]
    fn hostile_metadata_never_panics_a_node(
        metadata in proptest::collection::vec(hostile_metadata(), 1..6),
        mutation in proptest::option::of(mutation()),
    ) {
        let mut node = node(None);
        let mut peer = peer_envelope(None);
        for m in &metadata {
            let encoded = match &mutation {
                Some(mutation) => mutate(signed(m), mutation),
                None => signed(m),
            };
            for chunk in chunk_metadata(m.host_id, m.stamp, &encoded) {
                node.handle_packet(addr(PEER), &peer.seal(&encode_control(&chunk)));
            }
            tick(&mut node);
        }
        // The view stays usable.
        let view = node.view();
        prop_assert!(view.ring.token_count() <= view.ring.tokens().len());
    }

    #[test]
    fn metadata_decoding_never_panics_and_round_trips(
        m in hostile_metadata(),
        mutation in mutation(),
        garbage in bytes(300),
    ) {
        for encoded in [mutate(signed(&m), &mutation), garbage] {
            if let Ok(decoded) = SignedMetadata::decode(&encoded) {
                let again = decoded.encode().expect("signed");
                prop_assert_eq!(SignedMetadata::decode(&again).unwrap(), decoded);
            }
        }
    }
}

#[test]
fn a_packet_of_only_a_header_is_refused_by_a_node_with_a_secret() {
    let mut node = node(Some("s3cret"));
    let packet = peer_envelope(Some("s3cret")).seal(b"");
    node.handle_packet(addr(PEER), &packet[..HEADER_LEN]);
    assert_eq!(node.stats().packets_received, 1);
}
