//! The set of linearized operations, and Lowe's cache of configurations
//! (that set, with the register state it leaves) already explored.
//!
//! The set is a bitset over the key's operations with a Zobrist hash kept
//! up to date on every change (each operation has a fixed random 64-bit
//! key; the set's hash is the XOR of its members' keys), so probing the
//! cache costs one hash-map lookup and, on a hit, one comparison of the
//! bitset; nothing is allocated except the entry itself, appended to an
//! arena of words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// SplitMix64's finaliser: a fixed, well-spread 64-bit key per input.
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The operations linearized so far, by index.
pub(crate) struct Linearized {
    words: Vec<u64>,
    hash: u64,
}

impl Linearized {
    /// None of `ops` operations.
    pub(crate) fn new(ops: usize) -> Linearized {
        Linearized {
            words: vec![0; ops.div_ceil(64)],
            hash: 0,
        }
    }

    /// Adds or removes `op` (it flips: callers add what is absent and
    /// remove what is present).
    pub(crate) fn flip(&mut self, op: usize) {
        self.words[op / 64] ^= 1 << (op % 64);
        self.hash ^= mix(op as u64);
    }
}

/// Hashes a `u64` that is already a hash: as itself.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

const NONE: u32 = u32::MAX;

/// Lowe's cache: every configuration (set of linearized operations,
/// register state) the search has entered. Entering one again cannot
/// succeed where the first visit failed (what remains to linearize and the
/// state it starts from are the same), so the search skips it.
pub(crate) struct Cache {
    words: usize,
    /// The first entry with a configuration hash.
    first: HashMap<u64, u32, BuildHasherDefault<Identity>>,
    /// Per entry: the next entry with the same hash, its state, and (in
    /// `arena`, `words` apiece) its set.
    next: Vec<u32>,
    states: Vec<u32>,
    arena: Vec<u64>,
}

impl Cache {
    /// An empty cache for sets over `ops` operations.
    pub(crate) fn new(ops: usize) -> Cache {
        Cache {
            words: ops.div_ceil(64),
            first: HashMap::default(),
            next: Vec::new(),
            states: Vec::new(),
            arena: Vec::new(),
        }
    }

    /// Records the configuration; `false` if it was already there.
    pub(crate) fn insert(&mut self, set: &Linearized, state: u32) -> bool {
        let hash = set.hash ^ mix(u64::from(state) ^ 0x5bd1_e995_0000_0000);
        let head = self.first.get(&hash).copied().unwrap_or(NONE);
        let mut entry = head;
        while entry != NONE {
            let index = entry as usize;
            let words = &self.arena[index * self.words..(index + 1) * self.words];
            if self.states[index] == state && words == set.words.as_slice() {
                return false;
            }
            entry = self.next[index];
        }
        let Some(index) = u32::try_from(self.states.len())
            .ok()
            .filter(|&index| index != NONE)
        else {
            // Four billion entries are far past any budget; refuse to
            // cache rather than wrap (the search stays correct, only slower).
            return true;
        };
        self.next.push(head);
        self.states.push(state);
        self.arena.extend_from_slice(&set.words);
        self.first.insert(hash, index);
        true
    }

    /// How many configurations it holds.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }
}
