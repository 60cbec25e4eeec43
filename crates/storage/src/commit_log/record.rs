//! The commit log's bytes: a segment header, then sections, one per synced
//! batch, each a sync marker and records checksummed with the segment's
//! nonce.
//!
//! # Format (all integers little-endian)
//! - Segment header, [`HEADER_LEN`] bytes: magic `RSCLOG02`, the segment's
//!   sequence number (u64), its nonce (u64), a CRC32 of those 24 bytes (u32),
//!   four zero bytes.
//! - Section: a sync marker, [`MARKER_LEN`] bytes: the length of the
//!   section's records (u32) and a CRC32 of `nonce ++ offset ++ length`
//!   (u32), where `offset` (u64) is the marker's place in the file; then the
//!   records. The writer writes one section per batch and syncs it before it
//!   writes the next.
//! - Record: payload length (u32), CRC32 of `nonce ++ payload` (u32),
//!   payload. The payload is the keyspace id (16 bytes), the key's length
//!   (u32), the key, and the encoded [`Cell`].
//!
//! Segments of the first format (`RSCLOG01`: records straight after the
//! header, no markers) are still read, so a log left by an older node
//! replays.
//!
//! # Why a nonce
//! Segment files are recycled: a file whose records are all flushed to the
//! engine gets a new header and is overwritten from the start. Behind the
//! last record written since, the file still holds records of its previous
//! life. They were checksummed with the previous nonce, so they fail the
//! check and mark the end of the segment, as zeros (a new file) or a torn
//! write (a crash) do.
//!
//! # Why sync markers
//! A record that fails its checksum is either a torn tail (the crash came
//! before its sync ended, so it was never acknowledged) or damage to synced
//! bytes (a bad disk), which loses acknowledged writes. Without markers the
//! two look alike and both end the segment, hiding every record behind the
//! damage. With them, damage is what a valid section *follows*: the writer
//! began that later section only after the damaged one was synced. Replay
//! then skips the rest of the damaged section (or, if the damage hit a
//! marker, looks ahead for the next valid one), replays what follows, and
//! counts the damage ([`SegmentRecords::damaged`]). A failure in the last
//! section is a torn tail, as before. (Cassandra's commit log has sync
//! markers for the same reason.)

use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

/// The bytes of a segment header.
pub(crate) const HEADER_LEN: usize = 32;
/// The bytes before a record's payload.
pub(crate) const RECORD_OVERHEAD: usize = 8;
/// The bytes of a sync marker.
pub(crate) const MARKER_LEN: usize = 8;
/// The magic of the current format, with sync markers.
const MAGIC: &[u8; 8] = b"RSCLOG02";
/// The magic of the first format: records straight after the header.
const MAGIC_WITHOUT_MARKERS: &[u8; 8] = b"RSCLOG01";

/// How a segment's records are laid out, from its header's magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Sections, each a sync marker and the records of one synced batch:
    /// what the log writes.
    Sections,
    /// Records one after the other (the first format): only read.
    Records,
}

/// A segment's identity: its place in the log's order, and the nonce of this
/// use of its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// Increases with every segment the log opens.
    pub(crate) sequence: u64,
    /// Random, new each time a file is (re)used.
    pub(crate) nonce: u64,
    /// How the records behind the header are laid out (its magic).
    pub(crate) layout: Layout,
}

impl SegmentHeader {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[..8].copy_from_slice(match self.layout {
            Layout::Sections => MAGIC,
            Layout::Records => MAGIC_WITHOUT_MARKERS,
        });
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
        let layout = match &header[..8] {
            magic if magic == MAGIC => Layout::Sections,
            magic if magic == MAGIC_WITHOUT_MARKERS => Layout::Records,
            _ => return None,
        };
        if crc32fast::hash(&header[..24]) != crc {
            return None;
        }
        Some(SegmentHeader {
            sequence: u64::from_le_bytes(header[8..16].try_into().ok()?),
            nonce: u64::from_le_bytes(header[16..24].try_into().ok()?),
            layout,
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

/// The sync marker of a section of `len` bytes of records, written at
/// `offset` of the segment whose nonce is `nonce`.
pub(crate) fn encode_marker(nonce: u64, offset: u64, len: usize) -> [u8; MARKER_LEN] {
    let len = u32::try_from(len).expect("a section is one batch, far below 4 GiB");
    let mut marker = [0u8; MARKER_LEN];
    marker[..4].copy_from_slice(&len.to_le_bytes());
    marker[4..].copy_from_slice(&marker_crc(nonce, offset, len).to_le_bytes());
    marker
}

fn marker_crc(nonce: u64, offset: u64, len: u32) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&nonce.to_le_bytes());
    hasher.update(&offset.to_le_bytes());
    hasher.update(&len.to_le_bytes());
    hasher.finalize()
}

/// The records of the section whose marker is at `at`, if a valid marker
/// of this segment is there and its records lie within `bytes`.
fn section_at(bytes: &[u8], at: usize, nonce: u64) -> Option<&[u8]> {
    let marker = bytes.get(at..at + MARKER_LEN)?;
    let len = u32::from_le_bytes(marker[..4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(marker[4..].try_into().expect("4 bytes"));
    if len == 0 {
        return None; // zeros: a cheap no before the checksum
    }
    let records = bytes.get(at + MARKER_LEN..at + MARKER_LEN + len as usize)?;
    (marker_crc(nonce, at as u64, len) == crc).then_some(records)
}

/// The offset of the first valid section after `from` whose first record
/// holds too: where replay goes on after a damaged marker. `None` when
/// there is none, as behind the last section (zeros, a torn write, a
/// previous life of the file).
fn next_section(bytes: &[u8], from: usize, nonce: u64) -> Option<usize> {
    (from..bytes.len().saturating_sub(MARKER_LEN)).find(|&at| {
        section_at(bytes, at, nonce).is_some_and(|records| payload_at(records, 0, nonce).is_some())
    })
}

/// What reading a segment's records found.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SegmentRecords {
    /// The valid records, in order.
    pub(crate) records: Vec<LogRecord>,
    /// Where they end: the offset after the last whole valid section (or
    /// record, in the first format).
    pub(crate) end: usize,
    /// Records whose checksum held but whose payload did not decode (a bug
    /// or an unknown format version): skipped, and counted here.
    pub(crate) undecodable: usize,
    /// Damaged places that a valid section follows: synced bytes that no
    /// longer read back, each losing the rest of its section (see "Why sync
    /// markers"). A torn tail is not counted.
    pub(crate) damaged: usize,
}

/// The records of the segment `bytes` (header included) whose header is
/// `header`: every valid section's records, skipping damage that a valid
/// section follows, up to the end of the last valid section.
pub(crate) fn decode_records(bytes: &[u8], header: &SegmentHeader) -> SegmentRecords {
    let mut found = SegmentRecords {
        end: HEADER_LEN.min(bytes.len()),
        ..SegmentRecords::default()
    };
    let nonce = header.nonce;
    if header.layout == Layout::Records {
        let body = bytes.get(found.end..).unwrap_or_default();
        found.end += records_prefix(body, nonce, &mut found);
        return found;
    }
    let mut at = found.end;
    // Damage that no valid section has followed yet: a torn tail until one
    // does.
    let mut pending_damage = false;
    loop {
        let Some(section) = section_at(bytes, at, nonce) else {
            // A damaged marker, or the end: go on only from a later section.
            let Some(later) = next_section(bytes, at + 1, nonce) else {
                break;
            };
            (at, pending_damage) = (later, true);
            continue;
        };
        found.damaged += usize::from(pending_damage);
        pending_damage = !read_records(section, nonce, &mut found);
        at += MARKER_LEN + section.len();
        if !pending_damage {
            found.end = at;
        }
    }
    found
}

/// Reads the records of one section into `found`; whether all of it was
/// valid (else the records before the first invalid one were read).
fn read_records(section: &[u8], nonce: u64, found: &mut SegmentRecords) -> bool {
    records_prefix(section, nonce, found) == section.len()
}

/// Reads records from the start of `bytes` into `found`, up to the first
/// that is cut short or fails its checksum; the bytes they take.
fn records_prefix(bytes: &[u8], nonce: u64, found: &mut SegmentRecords) -> usize {
    let mut at = 0;
    while let Some(payload) = payload_at(bytes, at, nonce) {
        match decode_payload(payload) {
            Some(record) => found.records.push(record),
            None => found.undecodable += 1,
        }
        at += RECORD_OVERHEAD + payload.len();
    }
    at
}

/// The payload of the record at `at` of `bytes`, if one is whole there
/// and its checksum holds.
fn payload_at(bytes: &[u8], at: usize, nonce: u64) -> Option<&[u8]> {
    let overhead = bytes.get(at..at + RECORD_OVERHEAD)?;
    let len = u32::from_le_bytes(overhead[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(overhead[4..].try_into().expect("4 bytes"));
    let payload = bytes.get(at + RECORD_OVERHEAD..at + RECORD_OVERHEAD + len)?;
    (len > 0 && record_crc(nonce, payload) == crc).then_some(payload)
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
    use ringstore_cell::Timestamp;

    fn cell(version: i64) -> Cell {
        Cell::live(Timestamp(version), format!("value {version}").into_bytes())
    }

    fn header(nonce: u64, layout: Layout) -> SegmentHeader {
        SegmentHeader {
            sequence: 7,
            nonce,
            layout,
        }
    }

    /// Sealed records of `ks`, one after the other.
    fn records(ks: KeyspaceId, nonce: u64, records: &[(&[u8], Cell)]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (key, cell) in records {
            let start = bytes.len();
            encode_record(&mut bytes, ks, key, cell);
            assert_eq!(record_len(&bytes[start..]), bytes.len() - start);
            seal_record(&mut bytes[start..], nonce);
        }
        bytes
    }

    /// A segment as the writer lays it out: one section per synced batch.
    /// Its bytes, its keyspace, and where each section's marker is.
    fn segment(nonce: u64, batches: &[&[(&[u8], Cell)]]) -> (Vec<u8>, KeyspaceId, Vec<usize>) {
        let ks = KeyspaceId::random();
        let mut bytes = header(nonce, Layout::Sections).encode().to_vec();
        let mut markers = Vec::new();
        for batch in batches {
            let body = records(ks, nonce, batch);
            markers.push(bytes.len());
            bytes.extend_from_slice(&encode_marker(nonce, bytes.len() as u64, body.len()));
            bytes.extend_from_slice(&body);
        }
        (bytes, ks, markers)
    }

    fn keys(found: &SegmentRecords) -> Vec<&[u8]> {
        found.records.iter().map(|r| r.key.as_slice()).collect()
    }

    /// Three sections: "a" and "b", then "c", then "d".
    fn three_sections(nonce: u64) -> (Vec<u8>, Vec<usize>) {
        let (bytes, _, markers) = segment(
            nonce,
            &[
                &[(b"a", cell(1)), (b"b", cell(2))],
                &[(b"c", cell(3))],
                &[(b"d", cell(4))],
            ],
        );
        (bytes, markers)
    }

    #[test]
    fn records_round_trip_and_end_at_zeros() {
        let (mut bytes, ks, _) = segment(
            42,
            &[
                &[(b"a", cell(1))],
                &[(b"bb", Cell::deletion(Timestamp(2), Timestamp(9)))],
            ],
        );
        let end = bytes.len();
        bytes.extend_from_slice(&[0u8; 100]);
        let decoded = SegmentHeader::decode(&bytes).unwrap();
        assert_eq!(decoded, header(42, Layout::Sections));
        let found = decode_records(&bytes, &decoded);
        assert_eq!((found.end, found.undecodable, found.damaged), (end, 0, 0));
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
        let (old, ..) = segment(
            1,
            &[
                &[(b"old1", cell(1)), (b"old2", cell(2))],
                &[(b"old3", cell(3))],
            ],
        );
        let (new, ..) = segment(2, &[&[(b"new", cell(4))]]);
        // The new life overwrote the start of the file; the old tail remains.
        let mut bytes = old.clone();
        bytes[..new.len()].copy_from_slice(&new);
        let found = decode_records(&bytes, &header(2, Layout::Sections));
        assert_eq!(keys(&found), [b"new"]);
        assert_eq!((found.end, found.damaged), (new.len(), 0));
    }

    #[test]
    fn a_torn_tail_ends_the_segment_and_is_not_damage() {
        let (bytes, markers) = three_sections(5);
        let last = *markers.last().unwrap();
        for cut in HEADER_LEN..bytes.len() {
            let found = decode_records(&bytes[..cut], &header(5, Layout::Sections));
            assert!(found.records.len() < 4, "cut at {cut}");
            assert!(found.end <= cut, "cut at {cut}");
            assert_eq!(found.damaged, 0, "cut at {cut}");
        }
        // Damage in the last section, which no section follows, is a torn tail.
        for at in last..bytes.len() {
            let mut torn = bytes.clone();
            torn[at] ^= 0x40;
            let found = decode_records(&torn, &header(5, Layout::Sections));
            assert_eq!(keys(&found), [b"a", b"b", b"c"], "flipped byte {at}");
            assert_eq!((found.end, found.damaged), (last, 0), "flipped byte {at}");
        }
    }

    #[test]
    fn damage_before_a_valid_section_skips_only_its_own_section_and_is_counted() {
        let (bytes, markers) = three_sections(5);
        // Any byte of the first section, marker or records, then of the second.
        for at in markers[0]..markers[2] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            let found = decode_records(&damaged, &header(5, Layout::Sections));
            let expected: &[&[u8]] = match at {
                // The first section's marker, or its first record.
                _ if at
                    < markers[0] + MARKER_LEN + record_len(&bytes[markers[0] + MARKER_LEN..]) =>
                {
                    &[b"c", b"d"]
                }
                // Its second record: the first was read before it.
                _ if at < markers[1] => &[b"a", b"c", b"d"],
                _ => &[b"a", b"b", b"d"],
            };
            assert_eq!(keys(&found), expected, "flipped byte {at}");
            assert_eq!(found.damaged, 1, "flipped byte {at}");
            assert_eq!(found.end, bytes.len(), "flipped byte {at}");
        }
    }

    #[test]
    fn segments_of_the_first_format_still_replay() {
        let ks = KeyspaceId::random();
        let mut bytes = header(9, Layout::Records).encode().to_vec();
        bytes.extend_from_slice(&records(ks, 9, &[(b"a", cell(1)), (b"b", cell(2))]));
        let end = bytes.len();
        bytes.extend_from_slice(&[0u8; 64]);
        let decoded = SegmentHeader::decode(&bytes).unwrap();
        assert_eq!(decoded.layout, Layout::Records);
        let found = decode_records(&bytes, &decoded);
        assert_eq!(keys(&found), [b"a", b"b"]);
        assert_eq!(found.end, end);
    }

    #[test]
    fn a_zeroed_or_torn_header_is_no_header() {
        assert_eq!(SegmentHeader::decode(&[0u8; 64]), None);
        assert_eq!(SegmentHeader::decode(&[0u8; 10]), None);
        let mut encoded = header(2, Layout::Sections).encode();
        encoded[9] ^= 1;
        assert_eq!(SegmentHeader::decode(&encoded), None);
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
            for layout in [Layout::Sections, Layout::Records] {
                let _ = decode_records(&bytes, &header(3, layout));
            }
        }
    }
}
