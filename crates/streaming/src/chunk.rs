//! Stream chunks: bounded groups of cells, cut only between tokens, with
//! their checksums. Pure.

use ringstore_cell::Cell;
use ringstore_placement::Token;

/// The size of a cell on the wire for streaming purposes: its key and its
/// cell's canonical bytes. `plan` estimates and `netstats` counts in this unit.
pub fn entry_bytes(key: &[u8], cell: &Cell) -> u64 {
    (key.len() + cell.canonical_len()) as u64
}

/// A running CRC-32 over stream entries (key length, key, the cell's
/// [`Cell::canonical_bytes`], which do not depend on the format the sender
/// stores cells in, so nodes of two builds stream to each other),
/// and their count and size.
#[derive(Clone, Default)]
pub struct EntryChecksum {
    hasher: crc32fast::Hasher,
    entries: u64,
    bytes: u64,
}

impl EntryChecksum {
    /// Adds one entry, given its cell's [`Cell::canonical_bytes`]: the
    /// encoding is the costly part, so each side does it once per cell.
    pub fn add(&mut self, key: &[u8], encoded_cell: &[u8]) {
        self.hasher.update(&(key.len() as u32).to_le_bytes());
        self.hasher.update(key);
        self.hasher.update(encoded_cell);
        self.entries += 1;
        self.bytes += (key.len() + encoded_cell.len()) as u64;
    }

    /// The entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Their size ([`entry_bytes`]).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The checksum of the entries added so far.
    pub fn value(&self) -> u32 {
        self.hasher.clone().finalize()
    }
}

impl std::fmt::Debug for EntryChecksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntryChecksum")
            .field("entries", &self.entries)
            .field("bytes", &self.bytes)
            .field("value", &format_args!("{:08x}", self.value()))
            .finish()
    }
}

/// A chunk ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    /// Keys and cells, in token order.
    pub entries: Vec<(Vec<u8>, Cell)>,
    /// The token of the last entry: everything up to it has been sent.
    pub last_token: Token,
    /// The entries' size ([`entry_bytes`]).
    pub bytes: u64,
    /// The entries' CRC-32 ([`EntryChecksum`]).
    pub checksum: u32,
}

/// Groups token-ordered entries into chunks of about `max_bytes` (a chunk
/// ends at the first token boundary at or past the limit; one entry larger
/// than the limit makes a chunk of its own), checksumming each chunk and the
/// whole stream as it goes.
pub struct Chunker {
    max_bytes: u64,
    current: Vec<(Vec<u8>, Cell)>,
    chunk_sum: EntryChecksum,
    total: EntryChecksum,
    last_token: Option<Token>,
}

impl Chunker {
    /// A chunker of `max_bytes` chunks.
    pub fn new(max_bytes: u64) -> Chunker {
        Chunker {
            max_bytes,
            current: Vec::new(),
            chunk_sum: EntryChecksum::default(),
            total: EntryChecksum::default(),
            last_token: None,
        }
    }

    /// Adds the next entry; returns a full chunk when this entry starts a new one.
    pub fn push(&mut self, token: Token, key: Vec<u8>, cell: Cell) -> Option<Chunk> {
        let full = self.chunk_sum.bytes() >= self.max_bytes && self.last_token != Some(token);
        let ready = if full { self.take() } else { None };
        let encoded = cell.canonical_bytes();
        self.chunk_sum.add(&key, &encoded);
        self.total.add(&key, &encoded);
        self.current.push((key, cell));
        self.last_token = Some(token);
        ready
    }

    /// The checksum, count and size of every entry pushed so far.
    pub fn total(&self) -> &EntryChecksum {
        &self.total
    }

    /// The last, partial chunk, if any entries are left.
    pub fn finish(&mut self) -> Option<Chunk> {
        self.take()
    }

    fn take(&mut self) -> Option<Chunk> {
        let last_token = self.last_token?;
        if self.current.is_empty() {
            return None;
        }
        let sum = std::mem::take(&mut self.chunk_sum);
        Some(Chunk {
            entries: std::mem::take(&mut self.current),
            last_token,
            bytes: sum.bytes(),
            checksum: sum.value(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_cell::Timestamp;

    fn cell(n: usize) -> Cell {
        Cell::live(Timestamp(1), vec![7; n])
    }

    #[test]
    fn chunks_are_bounded_and_never_split_a_token() {
        let mut chunker = Chunker::new(100);
        let mut chunks = Vec::new();
        // Tokens 0..20, two keys per token, 30-byte values.
        for t in 0..20i64 {
            for k in 0..2u8 {
                chunks.extend(chunker.push(Token(t), vec![k, t as u8], cell(30)));
            }
        }
        chunks.extend(chunker.finish());
        assert_eq!(chunker.total().entries(), 40);
        let total: usize = chunks.iter().map(|c| c.entries.len()).sum();
        assert_eq!(total, 40);
        for chunk in &chunks {
            assert!(
                chunk.bytes < 100 + 2 * entry_bytes(&[0, 0], &cell(30)),
                "{}",
                chunk.bytes
            );
            // Both keys of the last token are in the chunk.
            let last = chunk.last_token.0 as u8;
            let of_last = chunk.entries.iter().filter(|(k, _)| k[1] == last).count();
            assert_eq!(of_last, 2, "a token's cells stay together");
        }
        assert!(chunks.len() > 5);
    }

    #[test]
    fn an_oversized_entry_is_a_chunk_of_its_own() {
        let mut chunker = Chunker::new(10);
        assert!(chunker.push(Token(1), b"a".to_vec(), cell(100)).is_none());
        let first = chunker.push(Token(2), b"b".to_vec(), cell(1)).unwrap();
        assert_eq!(first.entries.len(), 1);
        let last = chunker.finish().unwrap();
        assert_eq!(last.last_token, Token(2));
        assert_eq!(chunker.total().entries(), 2);
        assert_eq!(chunker.total().bytes(), first.bytes + last.bytes);
    }

    #[test]
    fn the_checksum_sees_every_byte_and_the_order() {
        let a = (b"a".to_vec(), cell(3));
        let b = (b"b".to_vec(), cell(3));
        let sum = |entries: &[(Vec<u8>, Cell)]| {
            let mut sum = EntryChecksum::default();
            for (key, cell) in entries {
                sum.add(key, &cell.canonical_bytes());
            }
            sum.value()
        };
        let ab = sum(&[a.clone(), b.clone()]);
        assert_ne!(ab, sum(&[b.clone(), a.clone()]));
        let mut changed = b.clone();
        changed.1 = Cell::live(Timestamp(2), vec![7; 3]);
        assert_ne!(ab, sum(&[a.clone(), changed]));
        // A chunk's checksum is the same sum over its entries.
        let mut chunker = Chunker::new(1 << 20);
        chunker.push(Token(1), a.0.clone(), a.1.clone());
        chunker.push(Token(2), b.0.clone(), b.1.clone());
        assert_eq!(chunker.finish().unwrap().checksum, ab);
    }
}
