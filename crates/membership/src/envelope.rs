//! The gossip packet envelope: cluster check, authentication, replay window.
//!
//! Every gossip datagram is
//!
//! ```text
//! "RG" | wire version (1) | flags (1) | cluster id (8) | sender host id (16) | sequence (8) | body | [tag (32)]
//! ```
//!
//! The cluster id is a hash of the cluster name: a packet of another cluster is
//! dropped before its body is looked at. With a cluster secret, flag bit 0 is
//! set and the tag is HMAC-SHA256(secret, everything before the tag); a packet
//! whose tag does not verify is dropped, and so is an authenticated packet
//! reaching a node without the secret (or the reverse). A node may hold
//! several secrets while one is rotated: it seals with the first and opens
//! with any (each extra secret costs a second HMAC on packets sealed with
//! it), as memberlist's keyring does. Sequences are
//! `generation << 32 | counter`, so they grow across restarts; with a secret,
//! each sender's last 64 sequences are remembered and a repeat, or anything
//! older than the window, is dropped as a replay. Without a secret there is
//! no authentication, so no replay window either (anyone could forge a fresh
//! sequence).

use std::collections::HashMap;
use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use ringstore_placement::{HostId, cassandra_murmur3_x64_128};
use sha2::Sha256;

use crate::identity::Generation;

const MAGIC: [u8; 2] = *b"RG";
const WIRE_VERSION: u8 = 1;
const FLAG_AUTHENTICATED: u8 = 1;
/// Bytes before the body.
pub const HEADER_LEN: usize = 2 + 1 + 1 + 8 + 16 + 8;
/// Bytes of the authentication tag.
pub const TAG_LEN: usize = 32;
/// How many distinct authenticated senders have a replay window at once.
const MAX_WINDOWS: usize = 4096;

/// A shared secret that authenticates gossip. Its `Debug` hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(Vec<u8>);

impl ClusterSecret {
    /// A secret from its text form (any non-empty string).
    pub fn new(secret: impl Into<Vec<u8>>) -> Option<ClusterSecret> {
        let secret = secret.into();
        (!secret.is_empty()).then_some(ClusterSecret(secret))
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Too short, wrong magic or unknown wire version.
    Malformed,
    /// From another cluster.
    ForeignCluster,
    /// Not authenticated as this cluster's secret requires (or authenticated
    /// when this node has no secret).
    BadAuth,
    /// A sequence already seen, or older than the window.
    Replay,
}

/// A packet that passed the envelope checks.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    /// Who sent it (as it claims; proven when the cluster has a secret).
    pub sender: HostId,
    /// The payload.
    pub body: &'a [u8],
}

/// Seals outgoing and opens incoming packets for one node.
pub struct Envelope {
    cluster_id: u64,
    local: HostId,
    /// One per secret, the sealing one first; empty without a secret.
    macs: Vec<Hmac<Sha256>>,
    next_sequence: u64,
    windows: HashMap<HostId, ReplayWindow>,
}

impl Envelope {
    /// The envelope of node `local` in cluster `cluster_name`, started at `generation`.
    pub fn new(
        cluster_name: &str,
        secret: Option<&ClusterSecret>,
        local: HostId,
        generation: Generation,
    ) -> Envelope {
        let secrets: Vec<ClusterSecret> = secret.into_iter().cloned().collect();
        Envelope::with_secrets(cluster_name, &secrets, local, generation)
    }

    /// The envelope of a node holding `secrets`: it seals with the first and
    /// opens with any (none: unauthenticated).
    pub fn with_secrets(
        cluster_name: &str,
        secrets: &[ClusterSecret],
        local: HostId,
        generation: Generation,
    ) -> Envelope {
        Envelope {
            cluster_id: cluster_id(cluster_name),
            local,
            macs: macs(secrets),
            next_sequence: generation.0 << 32,
            windows: HashMap::new(),
        }
    }

    /// Replaces the secrets (a rotation step). Going from none to some or
    /// back is refused: it would cut this node off from the others at once.
    pub fn set_secrets(&mut self, secrets: &[ClusterSecret]) -> bool {
        if secrets.is_empty() != self.macs.is_empty() {
            return false;
        }
        self.macs = macs(secrets);
        true
    }

    /// Wraps `body` in a packet from this node.
    pub fn seal(&mut self, body: &[u8]) -> Vec<u8> {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let mut packet = Vec::with_capacity(HEADER_LEN + body.len() + TAG_LEN);
        packet.extend_from_slice(&MAGIC);
        packet.push(WIRE_VERSION);
        packet.push(if !self.macs.is_empty() {
            FLAG_AUTHENTICATED
        } else {
            0
        });
        packet.extend_from_slice(&self.cluster_id.to_le_bytes());
        packet.extend_from_slice(self.local.0.as_bytes());
        packet.extend_from_slice(&sequence.to_le_bytes());
        packet.extend_from_slice(body);
        if let Some(mac) = self.macs.first() {
            let mut mac = mac.clone();
            mac.update(&packet);
            packet.extend_from_slice(&mac.finalize().into_bytes());
        }
        packet
    }

    /// Checks a received packet; on success returns its sender and body.
    /// Never panics, whatever the bytes.
    pub fn open<'a>(&mut self, packet: &'a [u8]) -> Result<Opened<'a>, Rejection> {
        if packet.len() < HEADER_LEN || packet[..2] != MAGIC || packet[2] != WIRE_VERSION {
            return Err(Rejection::Malformed);
        }
        let flags = packet[3];
        let cluster = u64::from_le_bytes(packet[4..12].try_into().expect("8 bytes"));
        let sender = HostId(uuid::Uuid::from_bytes(
            packet[12..28].try_into().expect("16 bytes"),
        ));
        let sequence = u64::from_le_bytes(packet[28..36].try_into().expect("8 bytes"));
        if cluster != self.cluster_id {
            return Err(Rejection::ForeignCluster);
        }
        let authenticated = flags & FLAG_AUTHENTICATED != 0;
        let body = match self.macs.is_empty() {
            true if authenticated => return Err(Rejection::BadAuth),
            true => &packet[HEADER_LEN..],
            false if !authenticated => return Err(Rejection::BadAuth),
            false => {
                if packet.len() < HEADER_LEN + TAG_LEN {
                    return Err(Rejection::Malformed);
                }
                let (signed, tag) = packet.split_at(packet.len() - TAG_LEN);
                let verifies = self.macs.iter().any(|mac| {
                    let mut mac = mac.clone();
                    mac.update(signed);
                    mac.verify_slice(tag).is_ok()
                });
                if !verifies {
                    return Err(Rejection::BadAuth);
                }
                if !self.accept_sequence(sender, sequence) {
                    return Err(Rejection::Replay);
                }
                &signed[HEADER_LEN..]
            }
        };
        Ok(Opened { sender, body })
    }

    fn accept_sequence(&mut self, sender: HostId, sequence: u64) -> bool {
        if !self.windows.contains_key(&sender) && self.windows.len() >= MAX_WINDOWS {
            // Forget an arbitrary sender; it merely loses replay history.
            let victim = *self.windows.keys().next().expect("windows is full");
            self.windows.remove(&victim);
        }
        self.windows.entry(sender).or_default().accept(sequence)
    }
}

fn macs(secrets: &[ClusterSecret]) -> Vec<Hmac<Sha256>> {
    secrets
        .iter()
        .map(|s| Hmac::<Sha256>::new_from_slice(&s.0).expect("HMAC takes any key length"))
        .collect()
}

/// The cluster id carried in every packet: a hash of the cluster name.
fn cluster_id(cluster_name: &str) -> u64 {
    cassandra_murmur3_x64_128(cluster_name.as_bytes(), 0x7269_6e67).0
}

/// The last 64 sequences seen from one sender: the highest, and a bitmap of
/// which of the 63 below it were seen.
#[derive(Default)]
struct ReplayWindow {
    highest: Option<u64>,
    seen: u64,
}

impl ReplayWindow {
    fn accept(&mut self, sequence: u64) -> bool {
        let Some(highest) = self.highest else {
            self.highest = Some(sequence);
            self.seen = 1;
            return true;
        };
        if sequence > highest {
            let shift = sequence - highest;
            self.seen = if shift >= 64 { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.highest = Some(sequence);
            return true;
        }
        let age = highest - sequence;
        if age >= 64 || self.seen & (1 << age) != 0 {
            return false;
        }
        self.seen |= 1 << age;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(secret: Option<&str>) -> (Envelope, Envelope) {
        let secret = secret.and_then(ClusterSecret::new);
        (
            Envelope::new(
                "prod",
                secret.as_ref(),
                HostId::from_u128(1),
                Generation(10),
            ),
            Envelope::new(
                "prod",
                secret.as_ref(),
                HostId::from_u128(2),
                Generation(20),
            ),
        )
    }

    #[test]
    fn a_sealed_packet_opens_with_its_sender_and_body() {
        for secret in [None, Some("s3cret")] {
            let (mut a, mut b) = pair(secret);
            let packet = a.seal(b"hello");
            assert_eq!(
                b.open(&packet),
                Ok(Opened {
                    sender: HostId::from_u128(1),
                    body: b"hello"
                })
            );
        }
    }

    #[test]
    fn another_cluster_is_rejected() {
        let mut a = Envelope::new("prod", None, HostId::from_u128(1), Generation(1));
        let mut b = Envelope::new("staging", None, HostId::from_u128(2), Generation(1));
        assert_eq!(b.open(&a.seal(b"x")), Err(Rejection::ForeignCluster));
    }

    #[test]
    fn a_wrong_or_missing_secret_is_rejected() {
        let right = ClusterSecret::new("right").unwrap();
        let wrong = ClusterSecret::new("wrong").unwrap();
        let mut a = Envelope::new("prod", Some(&wrong), HostId::from_u128(1), Generation(1));
        let mut b = Envelope::new("prod", Some(&right), HostId::from_u128(2), Generation(1));
        let mut open = Envelope::new("prod", None, HostId::from_u128(3), Generation(1));
        assert_eq!(b.open(&a.seal(b"x")), Err(Rejection::BadAuth));
        assert_eq!(b.open(&open.seal(b"x")), Err(Rejection::BadAuth));
        assert_eq!(open.open(&a.seal(b"x")), Err(Rejection::BadAuth));
    }

    #[test]
    fn a_tampered_packet_is_rejected() {
        let (mut a, mut b) = pair(Some("s"));
        let mut packet = a.seal(b"hello");
        packet[HEADER_LEN] ^= 1;
        assert_eq!(b.open(&packet), Err(Rejection::BadAuth));
    }

    #[test]
    fn a_replayed_packet_is_rejected_but_reordering_is_fine() {
        let (mut a, mut b) = pair(Some("s"));
        let first = a.seal(b"1");
        let second = a.seal(b"2");
        assert!(b.open(&second).is_ok());
        assert!(b.open(&first).is_ok(), "late but new");
        assert_eq!(b.open(&first), Err(Rejection::Replay));
        assert_eq!(b.open(&second), Err(Rejection::Replay));
        let old = a.seal(b"old");
        for _ in 0..64 {
            assert!(b.open(&a.seal(b"n")).is_ok());
        }
        assert_eq!(
            b.open(&old),
            Err(Rejection::Replay),
            "older than the window"
        );
    }

    #[test]
    fn a_restarted_sender_starts_above_its_old_sequences() {
        let secret = ClusterSecret::new("s").unwrap();
        let mut b = Envelope::new("prod", Some(&secret), HostId::from_u128(2), Generation(1));
        let mut old = Envelope::new("prod", Some(&secret), HostId::from_u128(1), Generation(5));
        for _ in 0..100 {
            b.open(&old.seal(b"x")).unwrap();
        }
        let mut restarted =
            Envelope::new("prod", Some(&secret), HostId::from_u128(1), Generation(6));
        assert!(b.open(&restarted.seal(b"x")).is_ok());
    }

    #[test]
    fn truncated_and_garbage_packets_are_malformed() {
        let (mut a, mut b) = pair(Some("s"));
        let packet = a.seal(b"hello");
        for len in 0..HEADER_LEN {
            assert_eq!(b.open(&packet[..len]), Err(Rejection::Malformed));
        }
        assert_eq!(b.open(&packet[..HEADER_LEN + 3]), Err(Rejection::Malformed));
        assert_eq!(
            b.open(b"GET / HTTP/1.1\r\n\r\n and more bytes to pass the length"),
            Err(Rejection::Malformed)
        );
    }

    #[test]
    fn during_a_rotation_both_secrets_open_and_the_first_seals() {
        let old = ClusterSecret::new("old").unwrap();
        let new = ClusterSecret::new("new").unwrap();
        let mut rolled = Envelope::with_secrets(
            "prod",
            &[new.clone(), old.clone()],
            HostId::from_u128(1),
            Generation(1),
        );
        let mut not_yet = Envelope::new("prod", Some(&old), HostId::from_u128(2), Generation(1));
        let mut done = Envelope::new("prod", Some(&new), HostId::from_u128(3), Generation(1));
        assert!(rolled.open(&not_yet.seal(b"x")).is_ok());
        assert!(rolled.open(&done.seal(b"x")).is_ok());
        assert!(
            done.open(&rolled.seal(b"x")).is_ok(),
            "sealed with the new one"
        );
        assert_eq!(not_yet.open(&rolled.seal(b"x")), Err(Rejection::BadAuth));
        assert!(not_yet.set_secrets(std::slice::from_ref(&new)));
        assert!(not_yet.open(&rolled.seal(b"x")).is_ok());
        assert!(
            !not_yet.set_secrets(&[]),
            "a secret is never dropped at runtime"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let (_, mut b) = pair(Some("s"));
            prop_assert!(b.open(&bytes).is_err());
        }
    }
}
