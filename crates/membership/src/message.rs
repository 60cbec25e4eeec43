//! The bodies carried inside envelopes: foca's SWIM packets and ringstore's
//! metadata anti-entropy messages.

use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};

use crate::metadata::MetadataStamp;

/// First body byte of a foca packet; the rest is foca's own encoding.
const SWIM: u8 = 0;
/// First body byte of a [`Control`] message; the rest is postcard.
const CONTROL: u8 = 1;

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

/// A decoded body.
#[derive(Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// A foca packet.
    Swim(&'a [u8]),
    /// A control message.
    Control(Control),
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
