//! The commit log's bytes: a segment header, then records, each checksummed
//! with the segment's nonce.
//!
//! # Format (all integers little-endian)
//! - Segment header, [`HEADER_LEN`] bytes: magic `RSCLOG01`, the segment's
//!   sequence number (u64), its nonce (u64), a CRC32 of those 24 bytes (u32),
//!   four zero bytes.
//! - Record: payload length (u32), CRC32 of `nonce ++ payload` (u32),
//!   payload. The payload is the keyspace id (16 bytes), the key's length
//!   (u32), the key, and the encoded [`Cell`].
//!
//! # Why a nonce
//! Segment files are recycled: a file whose records are all flushed to the
//! engine gets a new header and is overwritten from the start. Behind the
//! last record written since, the file still holds records of its previous
//! life. They were checksummed with the previous nonce, so they fail the
//! check and mark the end of the segment, as zeros (a new file) or a torn
//! write (a crash) do.

use crate::cell::Cell;
use crate::keyspace::KeyspaceId;

/// The bytes of a segment header.
pub(crate) const HEADER_LEN: usize = 32;
/// The bytes before a record's payload.
pub(crate) const RECORD_OVERHEAD: usize = 8;
const MAGIC: &[u8; 8] = b"RSCLOG01";

/// A segment's identity: its place in the log's order, and the nonce of this
/// use of its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// Increases with every segment the log opens.
    pub(crate) sequence: u64,
    /// Random, new each time a file is (re)used.
    pub(crate) nonce: u64,
}

impl SegmentHeader {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[..8].copy_from_slice(MAGIC);
        bytes[8..16].copy_from_slice(&self.sequence.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.nonce.to_le_bytes());
        let crc = crc32fast::hash(&bytes[..24]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// The header at the start of `bytes`, or `None` when there is none: a
    /// file cut short, zeros (a file being created when the node crashed) or
    /// a header torn by a crash. Such a file holds no record written since
    /// its header was last replaced, because the log syncs a header before
    /// writing any record behind it.
    pub(crate) fn decode(bytes: &[u8]) -> Option<SegmentHeader> {
        let header = bytes.get(..HEADER_LEN)?;
        let crc = u32::from_le_bytes(header[24..28].try_into().ok()?);
        if &header[..8] != MAGIC || crc32fast::hash(&header[..24]) != crc {
            return None;
        }
        Some(SegmentHeader {
            sequence: u64::from_le_bytes(header[8..16].try_into().ok()?),
            nonce: u64::from_le_bytes(header[16..24].try_into().ok()?),
        })
    }
}

/// One logged write: the cell that won at `key` of keyspace `ks`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LogRecord {
    pub(crate) ks: KeyspaceId,
    pub(crate) key: Vec<u8>,
    pub(crate) cell: Cell,
}

/// Appends the record of `(ks, key, cell)` to `out`, its checksum not yet
/// set: the log's writer seals it ([`seal_record`]) once it knows the
/// segment, and so the nonce, the record goes to.
pub(crate) fn encode_record(out: &mut Vec<u8>, ks: KeyspaceId, key: &[u8], cell: &Cell) {
    let start = out.len();
    out.extend_from_slice(&[0u8; RECORD_OVERHEAD]);
    out.extend_from_slice(ks.0.as_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    cell.encode_into(out);
    let payload_len = (out.len() - start - RECORD_OVERHEAD) as u32;
    out[start..start + 4].copy_from_slice(&payload_len.to_le_bytes());
}

/// The length of the record that starts `bytes` (overhead included), which
/// [`encode_record`] wrote.
pub(crate) fn record_len(bytes: &[u8]) -> usize {
    let len: [u8; 4] = bytes[..4]
        .try_into()
        .expect("a record starts with its length");
    RECORD_OVERHEAD + u32::from_le_bytes(len) as usize
}

/// Sets the checksum of `record` (one whole record of [`encode_record`])
/// for the segment whose nonce is `nonce`.
pub(crate) fn seal_record(record: &mut [u8], nonce: u64) {
    let crc = record_crc(nonce, &record[RECORD_OVERHEAD..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
}

fn record_crc(nonce: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&nonce.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// What reading a segment's records found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SegmentRecords {
    /// The valid records, in order.
    pub(crate) records: Vec<LogRecord>,
    /// Where they end: the offset of the first byte that is not a valid
    /// record of this segment.
    pub(crate) end: usize,
    /// Records whose checksum held but whose payload did not decode (a bug
    /// or an unknown format version): skipped, and counted here.
    pub(crate) undecodable: usize,
}

/// The records of the segment `bytes` (header included) whose nonce is
/// `nonce`: every record from the header on, up to the first that is cut
/// short or fails its checksum.
pub(crate) fn decode_records(bytes: &[u8], nonce: u64) -> SegmentRecords {
    let mut found = SegmentRecords {
        end: HEADER_LEN.min(bytes.len()),
        ..SegmentRecords::default()
    };
    let mut at = found.end;
    while let Some(overhead) = bytes.get(at..at + RECORD_OVERHEAD) {
        let len = u32::from_le_bytes(overhead[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(overhead[4..].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(at + RECORD_OVERHEAD..at + RECORD_OVERHEAD + len) else {
            break;
        };
        if len == 0 || record_crc(nonce, payload) != crc {
            break;
        }
        match decode_payload(payload) {
            Some(record) => found.records.push(record),
            None => found.undecodable += 1,
        }
        at += RECORD_OVERHEAD + len;
        found.end = at;
    }
    found
}

fn decode_payload(payload: &[u8]) -> Option<LogRecord> {
    let ks = uuid::Uuid::from_slice(payload.get(..16)?).ok()?;
    let key_len = u32::from_le_bytes(payload.get(16..20)?.try_into().ok()?) as usize;
    let key = payload.get(20..20 + key_len)?.to_vec();
    let cell = Cell::decode(payload.get(20 + key_len..)?).ok()?;
    Some(LogRecord {
        ks: KeyspaceId(ks),
        key,
        cell,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::Timestamp;

    fn cell(version: i64) -> Cell {
        Cell::live(Timestamp(version), format!("value {version}").into_bytes())
    }

    fn segment(nonce: u64, records: &[(&[u8], Cell)]) -> (Vec<u8>, KeyspaceId) {
        let ks = KeyspaceId::random();
        let mut bytes = SegmentHeader { sequence: 7, nonce }.encode().to_vec();
        for (key, cell) in records {
            let start = bytes.len();
            encode_record(&mut bytes, ks, key, cell);
            assert_eq!(record_len(&bytes[start..]), bytes.len() - start);
            seal_record(&mut bytes[start..], nonce);
        }
        (bytes, ks)
    }

    #[test]
    fn records_round_trip_and_end_at_zeros() {
        let (mut bytes, ks) = segment(
            42,
            &[
                (b"a", cell(1)),
                (b"bb", Cell::deletion(Timestamp(2), Timestamp(9))),
            ],
        );
        let end = bytes.len();
        bytes.extend_from_slice(&[0u8; 100]);
        assert_eq!(
            SegmentHeader::decode(&bytes),
            Some(SegmentHeader {
                sequence: 7,
                nonce: 42
            })
        );
        let found = decode_records(&bytes, 42);
        assert_eq!(found.end, end);
        assert_eq!(found.undecodable, 0);
        assert_eq!(
            found.records,
            vec![
                LogRecord {
                    ks,
                    key: b"a".to_vec(),
                    cell: cell(1)
                },
                LogRecord {
                    ks,
                    key: b"bb".to_vec(),
                    cell: Cell::deletion(Timestamp(2), Timestamp(9))
                },
            ]
        );
    }

    #[test]
    fn records_of_a_previous_use_of_the_file_are_not_replayed() {
        let (old, _) = segment(
            1,
            &[(b"old1", cell(1)), (b"old2", cell(2)), (b"old3", cell(3))],
        );
        let (new, ks) = segment(2, &[(b"new", cell(4))]);
        // The new life overwrote the start of the file; the old tail remains.
        let mut bytes = old.clone();
        bytes[..new.len()].copy_from_slice(&new);
        let found = decode_records(&bytes, 2);
        assert_eq!(
            found.records,
            vec![LogRecord {
                ks,
                key: b"new".to_vec(),
                cell: cell(4)
            }]
        );
        assert_eq!(found.end, new.len());
    }

    #[test]
    fn a_torn_or_damaged_record_ends_the_segment() {
        let (bytes, _) = segment(5, &[(b"a", cell(1)), (b"b", cell(2))]);
        for cut in HEADER_LEN..bytes.len() {
            let found = decode_records(&bytes[..cut], 5);
            assert!(found.records.len() < 2, "cut at {cut}");
            assert!(found.end <= cut);
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        assert_eq!(decode_records(&flipped, 5).records.len(), 1);
    }

    #[test]
    fn a_zeroed_or_torn_header_is_no_header() {
        assert_eq!(SegmentHeader::decode(&[0u8; 64]), None);
        assert_eq!(SegmentHeader::decode(&[0u8; 10]), None);
        let mut header = SegmentHeader {
            sequence: 1,
            nonce: 2,
        }
        .encode();
        header[9] ^= 1;
        assert_eq!(SegmentHeader::decode(&header), None);
    }

    #[test]
    fn garbage_never_panics() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = SegmentHeader::decode(&bytes);
            let _ = decode_records(&bytes, 3);
        }
    }
}
