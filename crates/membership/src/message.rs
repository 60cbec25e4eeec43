//! The bodies carried inside envelopes: foca's SWIM packets, ringstore's
//! metadata anti-entropy messages, and clock probes.
//!
//! The first body byte says which, and doubles as the body's format version:
//! a node that does not know a kind (clock probes, kind 2, came after kinds
//! 0 and 1) counts the packet as malformed and drops it, and understands the
//! other kinds as before. So nodes with and without clock probes gossip
//! together (an upgrade can be rolled); the older ones are simply not
//! measured, and a changed clock message would get a new kind byte.
//! [`Control::DigestHash`] and [`Control::SendDigest`] came after the other
//! control messages: an older node drops them as malformed, so during a
//! rolling upgrade the older nodes' metadata arrives by their own digests,
//! which newer nodes still answer, and by pushes.

use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};

use crate::metadata::MetadataStamp;

/// First body byte of a foca packet; the rest is foca's own encoding.
const SWIM: u8 = 0;
/// First body byte of a [`Control`] message; the rest is postcard.
const CONTROL: u8 = 1;
/// First body byte of a [`ClockMessage`]; the rest is postcard.
const CLOCK: u8 = 2;

/// Most metadata bytes carried by one [`Control::Metadata`] chunk.
pub const METADATA_CHUNK_BYTES: usize = 1100;
/// Most entries carried by one [`Control::Digest`].
pub const DIGEST_ENTRIES_PER_PACKET: usize = 28;

/// Metadata anti-entropy, Cassandra-style: digests say which metadata
/// versions a node has; the receiver pulls what is newer and pushes back what
/// the sender lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// "These are the metadata versions I hold" (part of them, if many).
    Digest(Vec<(HostId, MetadataStamp)>),
    /// "Send me the metadata of these hosts."
    Pull(Vec<HostId>),
    /// One chunk of a host's encoded metadata.
    Metadata(MetadataChunk),
    /// "The versions I hold hash to this" ([`digest_hash`]): a receiver
    /// holding the same answers nothing, one holding other versions asks
    /// for the whole digest. A quiet cluster's anti-entropy then costs one
    /// small packet per peer a round, not an entry per member.
    DigestHash(u64),
    /// "Ours differ: send me your whole digest."
    SendDigest,
}

/// The hash of a digest's entries, in host order: the first 8 bytes of
/// their SHA-256, so that every build of every node computes the same.
pub fn digest_hash<'a>(entries: impl IntoIterator<Item = (&'a HostId, &'a MetadataStamp)>) -> u64 {
    use sha2::{Digest as _, Sha256};
    let mut hasher = Sha256::new();
    for (host, stamp) in entries {
        hasher.update(host.0.as_bytes());
        hasher.update(stamp.generation.0.to_be_bytes());
        hasher.update(stamp.version.to_be_bytes());
    }
    let hash = hasher.finalize();
    u64::from_be_bytes(hash[..8].try_into().expect("SHA-256 has 32 bytes"))
}

/// A piece of one host's encoded metadata; `count` pieces make it whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataChunk {
    /// Whose metadata.
    pub host_id: HostId,
    /// Which version of it.
    pub stamp: MetadataStamp,
    /// This chunk's index, below `count`.
    pub index: u16,
    /// How many chunks the metadata has.
    pub count: u16,
    /// The chunk's bytes.
    pub data: Vec<u8>,
}

/// Clock probes: how nodes estimate each other's clock offsets (see
/// [`offsets`](crate::offsets)). Both carry the sender's wall time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClockMessage {
    /// "What time is it?", sent at the prober's wall time `sent_at`
    /// (microseconds since the epoch).
    Probe {
        /// The prober's wall time when it sent the probe.
        sent_at: i64,
    },
    /// The answer, sent at once.
    Echo {
        /// The probe's `sent_at`, echoed.
        probe_sent_at: i64,
        /// The answerer's wall time when it answered.
        replied_at: i64,
    },
}

/// A decoded body.
#[derive(Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// A foca packet.
    Swim(&'a [u8]),
    /// A control message.
    Control(Control),
    /// A clock probe or echo.
    Clock(ClockMessage),
}

impl Body<'_> {
    /// Decodes a body; `None` when it is neither kind.
    pub fn decode(bytes: &[u8]) -> Option<Body<'_>> {
        match bytes.split_first()? {
            (&SWIM, rest) => Some(Body::Swim(rest)),
            (&CONTROL, rest) => match postcard::take_from_bytes::<Control>(rest) {
                Ok((control, [])) => Some(Body::Control(control)),
                _ => None,
            },
            (&CLOCK, rest) => match postcard::take_from_bytes::<ClockMessage>(rest) {
                Ok((clock, [])) => Some(Body::Clock(clock)),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The body of a foca packet.
pub fn encode_swim(packet: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(packet.len() + 1);
    body.push(SWIM);
    body.extend_from_slice(packet);
    body
}

/// The body of a control message.
pub fn encode_control(control: &Control) -> Vec<u8> {
    let mut body = vec![CONTROL];
    body.extend(postcard::to_stdvec(control).expect("control messages serialize"));
    body
}

/// The body of a clock message.
pub fn encode_clock(clock: &ClockMessage) -> Vec<u8> {
    let mut body = vec![CLOCK];
    body.extend(postcard::to_stdvec(clock).expect("clock messages serialize"));
    body
}

/// Splits encoded metadata into chunks.
pub fn chunk_metadata(host_id: HostId, stamp: MetadataStamp, encoded: &[u8]) -> Vec<Control> {
    let pieces: Vec<&[u8]> = encoded.chunks(METADATA_CHUNK_BYTES).collect();
    let count = pieces.len() as u16;
    pieces
        .into_iter()
        .enumerate()
        .map(|(index, data)| {
            Control::Metadata(MetadataChunk {
                host_id,
                stamp,
                index: index as u16,
                count,
                data: data.to_vec(),
            })
        })
        .collect()
}

/// The gossip bodies that carry an encoded metadata record (its chunks), to
/// seal with an [`Envelope`](crate::envelope::Envelope): for tools and tests
/// that speak gossip directly (a forger, in the tests that refuse one).
pub fn metadata_bodies(host_id: HostId, stamp: MetadataStamp, encoded: &[u8]) -> Vec<Vec<u8>> {
    chunk_metadata(host_id, stamp, encoded)
        .iter()
        .map(encode_control)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::Generation;

    #[test]
    fn bodies_round_trip_and_garbage_is_refused() {
        assert_eq!(Body::decode(&encode_swim(b"abc")), Some(Body::Swim(b"abc")));
        let control = Control::Pull(vec![HostId::from_u128(3)]);
        assert_eq!(
            Body::decode(&encode_control(&control)),
            Some(Body::Control(control))
        );
        for clock in [
            ClockMessage::Probe { sent_at: i64::MIN },
            ClockMessage::Echo {
                probe_sent_at: 1_700_000_000_000_000,
                replied_at: -1,
            },
        ] {
            assert_eq!(
                Body::decode(&encode_clock(&clock)),
                Some(Body::Clock(clock))
            );
        }
        let mut trailing = encode_clock(&ClockMessage::Probe { sent_at: 5 });
        trailing.push(0);
        assert_eq!(Body::decode(&trailing), None);
        assert_eq!(Body::decode(&[CLOCK]), None);
        assert_eq!(Body::decode(&[]), None);
        assert_eq!(Body::decode(&[7, 1, 2]), None);
        assert_eq!(Body::decode(&[CONTROL, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn a_full_digest_fits_in_a_packet() {
        let stamp = MetadataStamp {
            generation: Generation(u64::MAX),
            version: u64::MAX,
        };
        let digest = Control::Digest(
            (0..DIGEST_ENTRIES_PER_PACKET as u128)
                .map(|h| (HostId::from_u128(h), stamp))
                .collect(),
        );
        assert!(encode_control(&digest).len() <= 1400);
        let chunk = &chunk_metadata(HostId::from_u128(1), stamp, &[0xff; 5000])[0];
        assert!(encode_control(chunk).len() <= 1400);
    }
}
