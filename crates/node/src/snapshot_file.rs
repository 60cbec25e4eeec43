//! The snapshot file format: one keyspace's cells on one node, in token
//! order, checksummed. Pure encoding and decoding; [`crate::snapshots`]
//! does the file work.
//!
//! Layout (integers big-endian): the magic `RSNAP`, a format version byte
//! (1), the keyspace name (u16 length, UTF-8), then one record per key
//! (u32 key length, key, u32 cell length, the cell as storage encodes it,
//! its own version byte first), then a trailer: the record count (u64) and a
//! CRC-32 of every byte before the trailer (u32).

use ringstore_storage::Cell;

/// The file's first bytes.
const MAGIC: &[u8; 5] = b"RSNAP";
/// The format version this code writes and reads.
const VERSION: u8 = 1;
/// Record count and CRC-32.
pub const TRAILER_BYTES: usize = 12;

/// Why a snapshot file does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotFileError {
    /// Not a snapshot file, or one of another format version.
    #[error("not a ringstore snapshot file of format {VERSION}")]
    NotASnapshot,
    /// The bytes end before what they announce.
    #[error("truncated at byte {at}")]
    Truncated {
        /// Where the bytes ended.
        at: usize,
    },
    /// The checksum does not match: the file was damaged.
    #[error("checksum mismatch: the file is damaged")]
    Checksum,
    /// A record's cell does not decode.
    #[error("record {index} holds a corrupt cell: {reason}")]
    CorruptCell {
        /// The record's position.
        index: u64,
        /// Why.
        reason: String,
    },
    /// The trailer's record count differs from the records found.
    #[error("the trailer counts {expected} records but the file holds {found}")]
    Count {
        /// What the trailer says.
        expected: u64,
        /// What was found.
        found: u64,
    },
}

/// Encodes keyspace `name`'s `cells` (key, cell), in the order given.
pub fn encode<'a>(name: &str, cells: impl IntoIterator<Item = (&'a [u8], &'a Cell)>) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.push(VERSION);
    let name = name.as_bytes();
    bytes.extend_from_slice(&(name.len() as u16).to_be_bytes());
    bytes.extend_from_slice(name);
    let mut count = 0u64;
    for (key, cell) in cells {
        let cell = cell.encode();
        bytes.extend_from_slice(&(key.len() as u32).to_be_bytes());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(&(cell.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&cell);
        count += 1;
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&count.to_be_bytes());
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// A decoded snapshot file.
#[derive(Debug, PartialEq)]
pub struct SnapshotContents {
    /// The keyspace's name.
    pub keyspace: String,
    /// Its cells, by key, in file order.
    pub cells: Vec<(Vec<u8>, Cell)>,
}

/// Decodes a snapshot file, checking its checksum and count.
pub fn decode(bytes: &[u8]) -> Result<SnapshotContents, SnapshotFileError> {
    let body_end = bytes
        .len()
        .checked_sub(TRAILER_BYTES)
        .ok_or(SnapshotFileError::Truncated { at: bytes.len() })?;
    if !bytes.starts_with(MAGIC) || bytes.get(MAGIC.len()) != Some(&VERSION) {
        return Err(SnapshotFileError::NotASnapshot);
    }
    let (body, trailer) = bytes.split_at(body_end);
    let expected = u64::from_be_bytes(trailer[..8].try_into().expect("8 bytes"));
    let crc = u32::from_be_bytes(trailer[8..].try_into().expect("4 bytes"));
    if crc32fast::hash(body) != crc {
        return Err(SnapshotFileError::Checksum);
    }
    let mut reader = Reader {
        bytes: body,
        at: MAGIC.len() + 1,
    };
    let name_len = u16::from_be_bytes(reader.take(2)?.try_into().expect("2 bytes")) as usize;
    let keyspace = String::from_utf8_lossy(reader.take(name_len)?).into_owned();
    let mut cells = Vec::new();
    while reader.at < body.len() {
        let key = reader.chunk()?.to_vec();
        let index = cells.len() as u64;
        let cell = Cell::decode(reader.chunk()?).map_err(|e| SnapshotFileError::CorruptCell {
            index,
            reason: e.to_string(),
        })?;
        cells.push((key, cell));
    }
    if cells.len() as u64 != expected {
        return Err(SnapshotFileError::Count {
            expected,
            found: cells.len() as u64,
        });
    }
    Ok(SnapshotContents { keyspace, cells })
}

/// The record count of a snapshot file, from its trailer alone.
pub fn count_from_trailer(trailer: &[u8; TRAILER_BYTES]) -> u64 {
    u64::from_be_bytes(trailer[..8].try_into().expect("8 bytes"))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotFileError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(SnapshotFileError::Truncated { at: self.at })?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// A u32-length-prefixed chunk.
    fn chunk(&mut self) -> Result<&'a [u8], SnapshotFileError> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_storage::Timestamp;

    fn cells() -> Vec<(Vec<u8>, Cell)> {
        vec![
            (b"a".to_vec(), Cell::live(Timestamp(5), b"one".to_vec())),
            (b"b".to_vec(), Cell::tombstone(Timestamp(7))),
            (
                b"c".to_vec(),
                Cell::expiring(Timestamp(9), b"x".to_vec(), 60, Timestamp(9)),
            ),
        ]
    }

    fn encoded() -> Vec<u8> {
        let cells = cells();
        encode("ks", cells.iter().map(|(k, c)| (k.as_slice(), c)))
    }

    #[test]
    fn a_snapshot_decodes_to_the_cells_it_was_made_of() {
        let bytes = encoded();
        assert_eq!(
            decode(&bytes).unwrap(),
            SnapshotContents {
                keyspace: "ks".into(),
                cells: cells()
            }
        );
        let trailer: [u8; TRAILER_BYTES] = bytes[bytes.len() - TRAILER_BYTES..].try_into().unwrap();
        assert_eq!(count_from_trailer(&trailer), 3);
    }

    #[test]
    fn damaged_or_foreign_files_are_errors_not_panics() {
        let bytes = encoded();
        let mut flipped = bytes.clone();
        flipped[12] ^= 1;
        assert_eq!(decode(&flipped), Err(SnapshotFileError::Checksum));
        assert_eq!(
            decode(b"hello world, not a snapshot"),
            Err(SnapshotFileError::NotASnapshot)
        );
        assert!(matches!(
            decode(&bytes[..5]),
            Err(SnapshotFileError::Truncated { .. })
        ));
        for cut in 0..bytes.len() {
            assert!(
                decode(&bytes[..cut]).is_err(),
                "a file cut at {cut} decoded"
            );
        }
    }
}
