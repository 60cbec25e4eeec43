//! The stored form of an [`AcceptorState`], for the system keyspace.
//!
//! ```text
//! format 1: 1 | flags | [promised (16)] | [accepted ballot (16) | [cell length (4, BE) | cell]]
//!             | [committed (16)] | crc32 (4, BE)
//! ```
//! A ballot is `micros (8, BE) | tiebreak (8, BE)`; the cell is
//! [`Cell::encode`]'s bytes (which check themselves too). The CRC-32
//! (crc32fast) covers every byte before it. Flags say which optional parts
//! are present. Decoding never panics: any byte string is a state or a
//! [`StateDamage`].

use ringstore_cell::Cell;

use crate::acceptor::{AcceptorState, Proposal};
use crate::ballot::Ballot;
use crate::error::{Result, StateDamage};

/// The first byte of an encoded acceptor state: its format version.
pub const STATE_FORMAT: u8 = 1;
const HAS_PROMISED: u8 = 1;
const HAS_ACCEPTED: u8 = 2;
const ACCEPTED_HAS_CELL: u8 = 4;
const HAS_COMMITTED: u8 = 8;
const KNOWN_FLAGS: u8 = HAS_PROMISED | HAS_ACCEPTED | ACCEPTED_HAS_CELL | HAS_COMMITTED;
const CRC_LEN: usize = 4;

impl AcceptorState {
    /// Encodes in the current format (see `state_codec.rs`).
    pub fn encode(&self) -> Vec<u8> {
        let mut flags = 0;
        let mut body = Vec::new();
        if let Some(promised) = self.promised {
            flags |= HAS_PROMISED;
            promised.encode_into(&mut body);
        }
        if let Some(accepted) = &self.accepted {
            flags |= HAS_ACCEPTED;
            accepted.ballot.encode_into(&mut body);
            if let Some(cell) = &accepted.cell {
                flags |= ACCEPTED_HAS_CELL;
                let encoded = cell.encode();
                // A cell is far below 4 GiB (values are bounded by the node);
                // saturate rather than wrap, so a giant one fails to decode.
                let len = u32::try_from(encoded.len()).unwrap_or(u32::MAX);
                body.extend_from_slice(&len.to_be_bytes());
                body.extend_from_slice(&encoded);
            }
        }
        if let Some(committed) = self.committed {
            flags |= HAS_COMMITTED;
            committed.encode_into(&mut body);
        }
        let mut bytes = Vec::with_capacity(2 + body.len() + CRC_LEN);
        bytes.push(STATE_FORMAT);
        bytes.push(flags);
        bytes.extend_from_slice(&body);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        bytes
    }

    /// Decodes a state written by [`encode`](AcceptorState::encode); damaged
    /// or foreign bytes are a
    /// [`PaxosError::CorruptState`](crate::PaxosError::CorruptState).
    pub fn decode(bytes: &[u8]) -> Result<AcceptorState> {
        Ok(decode(bytes)?)
    }
}

/// Takes a ballot off the front of `rest`.
fn ballot(rest: &mut &[u8], part: &'static str) -> std::result::Result<Ballot, StateDamage> {
    let (ballot, tail) = Ballot::decode(rest).ok_or(StateDamage::Truncated(part))?;
    *rest = tail;
    Ok(ballot)
}

fn decode(bytes: &[u8]) -> std::result::Result<AcceptorState, StateDamage> {
    match bytes.first() {
        None => return Err(StateDamage::Truncated("format")),
        Some(&STATE_FORMAT) => {}
        Some(&other) => return Err(StateDamage::UnknownFormat(other)),
    }
    let (body, crc) = bytes
        .split_last_chunk::<CRC_LEN>()
        .filter(|(body, _)| body.len() >= 2)
        .ok_or(StateDamage::Truncated("checksum"))?;
    let stored = u32::from_be_bytes(*crc);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(StateDamage::Checksum { stored, computed });
    }
    let [_, flags, rest @ ..] = body else {
        return Err(StateDamage::Truncated("flags"));
    };
    let flags = *flags;
    if flags & !KNOWN_FLAGS != 0 || (flags & ACCEPTED_HAS_CELL != 0 && flags & HAS_ACCEPTED == 0) {
        return Err(StateDamage::UnknownFlags(flags));
    }
    let mut rest = rest;
    let promised = if flags & HAS_PROMISED != 0 {
        Some(ballot(&mut rest, "promised ballot")?)
    } else {
        None
    };
    let accepted = if flags & HAS_ACCEPTED != 0 {
        let accepted_ballot = ballot(&mut rest, "accepted ballot")?;
        let cell = if flags & ACCEPTED_HAS_CELL != 0 {
            let (len, tail) = rest
                .split_first_chunk::<4>()
                .ok_or(StateDamage::Truncated("cell length"))?;
            let len = usize::try_from(u32::from_be_bytes(*len))
                .map_err(|_| StateDamage::Truncated("cell"))?;
            if tail.len() < len {
                return Err(StateDamage::Truncated("cell"));
            }
            let (cell, tail) = tail.split_at(len);
            rest = tail;
            Some(Cell::decode(cell).map_err(StateDamage::Cell)?)
        } else {
            None
        };
        Some(Proposal {
            ballot: accepted_ballot,
            cell,
        })
    } else {
        None
    };
    let committed = if flags & HAS_COMMITTED != 0 {
        Some(ballot(&mut rest, "committed ballot")?)
    } else {
        None
    };
    if !rest.is_empty() {
        return Err(StateDamage::TrailingBytes(rest.len()));
    }
    Ok(AcceptorState {
        promised,
        accepted,
        committed,
    })
}
