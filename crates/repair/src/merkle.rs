//! A Merkle tree over one token range of one replica.
//!
//! The range is cut into `2^depth` leaves of (almost) equal token width; a
//! leaf's hash is the XOR of the [`row_hash`](crate::row_hash)es of its
//! rows (0 for an empty leaf), and an inner node's hash is a hash of its two
//! children's (0 when both are 0, so empty subtrees agree whatever their
//! shape). Two replicas that hold the same rows in a range build the same
//! tree; a row that differs changes its leaf and every node above it.
//!
//! Nodes are numbered as in a binary heap: the root is 0, the children of
//! `i` are `2i + 1` and `2i + 2`, and the leaves are the last `2^depth`.
//!
//! Leaf `i` holds the tokens whose offset into the range (the distance from
//! the range's exclusive start, minus one) times `2^depth` divided by the
//! range's width rounds down to `i`; [`MerkleTree::leaf_range`] gives it as
//! a token range, and the ranges of all leaves tile the tree's range.

use ringstore_placement::{Token, TokenRange};
use xxhash_rust::xxh3::xxh3_64;

/// The deepest tree built: 65,536 leaves, 1 MiB of node hashes.
pub const MAX_DEPTH: u8 = 16;

/// The depth of the tree to build over `range` when its replicas hold
/// about `rows` rows there: ⌈log2 rows⌉, so that a leaf holds about one row
/// (as Cassandra sizes its trees by the estimated partitions), capped at
/// [`MAX_DEPTH`] and at the range's width. A deeper tree would name hardly
/// fewer rows per differing leaf, but every tree costs 16 bytes per leaf
/// to build and keep, and most ranges of a small keyspace hold a few rows.
pub fn depth_for(range: TokenRange, rows: u64) -> u8 {
    // ⌈log2 rows⌉ for rows ≥ 1: the bits of rows − 1.
    let wanted = 64 - (rows.max(1) - 1).leading_zeros();
    capped_depth(range, u8::try_from(wanted).unwrap_or(MAX_DEPTH))
}

/// `depth` capped at [`MAX_DEPTH`] and at the width of `range` (a leaf
/// spans at least one token).
fn capped_depth(range: TokenRange, depth: u8) -> u8 {
    depth.min(MAX_DEPTH).min(width(range).ilog2() as u8)
}

/// The number of tokens in `range` (2^64 for the whole ring).
fn width(range: TokenRange) -> u128 {
    if range.is_full_ring() {
        1u128 << 64
    } else {
        u128::from(range.start.distance_to(range.end))
    }
}

/// The hash of an inner node from its children's.
fn combine(left: u64, right: u64) -> u64 {
    if left == 0 && right == 0 {
        return 0;
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&left.to_le_bytes());
    bytes[8..].copy_from_slice(&right.to_le_bytes());
    xxh3_64(&bytes)
}

/// A finished tree: every node's hash, and how many rows and bytes went in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
    range: TokenRange,
    depth: u8,
    /// `2^(depth+1) - 1` hashes in heap order.
    nodes: Vec<u64>,
    rows: u64,
    bytes: u64,
}

/// Builds a [`MerkleTree`] from the rows of its range, in any order.
#[derive(Clone, Debug)]
pub struct TreeBuilder {
    range: TokenRange,
    depth: u8,
    width: u128,
    leaves: Vec<u64>,
    rows: u64,
    bytes: u64,
}

impl TreeBuilder {
    /// A builder for `range` with `2^depth` leaves (`depth` capped at
    /// [`MAX_DEPTH`] and at the range's width).
    pub fn new(range: TokenRange, depth: u8) -> TreeBuilder {
        let width = width(range);
        let depth = capped_depth(range, depth);
        TreeBuilder {
            range,
            depth,
            width,
            leaves: vec![0; 1 << depth],
            rows: 0,
            bytes: 0,
        }
    }

    /// The depth the tree will have.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// Adds one row with its [`row_hash`](crate::row_hash) and size. A token
    /// outside the range is ignored (the caller scans the range, so it
    /// never passes one) and reported as `false`.
    pub fn add(&mut self, token: Token, hash: u64, bytes: u64) -> bool {
        let Some(leaf) = leaf_of(self.range, self.depth, self.width, token) else {
            return false;
        };
        self.leaves[leaf] ^= hash;
        self.rows += 1;
        self.bytes += bytes;
        true
    }

    /// The tree.
    pub fn finish(self) -> MerkleTree {
        let first_leaf = (1usize << self.depth) - 1;
        let mut nodes = vec![0; first_leaf];
        nodes.extend_from_slice(&self.leaves);
        for index in (0..first_leaf).rev() {
            nodes[index] = combine(nodes[2 * index + 1], nodes[2 * index + 2]);
        }
        MerkleTree {
            range: self.range,
            depth: self.depth,
            nodes,
            rows: self.rows,
            bytes: self.bytes,
        }
    }
}

/// The leaf of `token` in a tree of `depth` over `range`, if it lies in it.
fn leaf_of(range: TokenRange, depth: u8, width: u128, token: Token) -> Option<usize> {
    if !range.contains(token) {
        return None;
    }
    // `contains` holds, so the distance is in 1..=width (0 means a full turn).
    let distance = match range.start.distance_to(token) {
        0 => 1u128 << 64,
        d => u128::from(d),
    };
    let offset = distance - 1;
    Some(((offset << depth) / width) as usize)
}

impl MerkleTree {
    /// The range it covers.
    pub fn range(&self) -> TokenRange {
        self.range
    }

    /// Its depth: it has `2^depth` leaves.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// The root's hash (0 for an empty range).
    pub fn root(&self) -> u64 {
        self.nodes[0]
    }

    /// The hash of node `index`, if the tree has it.
    pub fn node(&self, index: usize) -> Option<u64> {
        self.nodes.get(index).copied()
    }

    /// The rows that went in.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The bytes of the rows that went in (as the caller counted them).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The index of the first leaf.
    pub fn first_leaf(&self) -> usize {
        first_leaf(self.depth)
    }

    /// The token range of leaf `leaf` (0-based among the leaves), or `None`
    /// when it holds no token (a range narrower than its leaf count).
    pub fn leaf_range(&self, leaf: usize) -> Option<TokenRange> {
        leaf_range(self.range, self.depth, leaf)
    }
}

/// The node index of the first leaf of a tree of `depth`.
pub fn first_leaf(depth: u8) -> usize {
    (1usize << depth) - 1
}

/// The token range of leaf `leaf` of a tree of `depth` over `range`, or
/// `None` when it holds no token.
pub fn leaf_range(range: TokenRange, depth: u8, leaf: usize) -> Option<TokenRange> {
    let width = width(range);
    // Leaf `i` holds the offsets `o` with `floor(o * 2^d / width) == i`,
    // that is `ceil(i * width / 2^d) <= o < ceil((i + 1) * width / 2^d)`.
    let low = |i: u128| (i * width).div_ceil(1u128 << depth);
    let (from, to) = (low(leaf as u128), low(leaf as u128 + 1));
    if from >= to {
        return None;
    }
    // Offsets `from..to` are the tokens `(start + from, start + to]`.
    let start = range.start.advance(from as u64);
    let end = range.start.advance(to as u64);
    Some(TokenRange::new(start, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn range(start: i64, end: i64) -> TokenRange {
        TokenRange::new(Token(start), Token(end))
    }

    fn build(range: TokenRange, depth: u8, rows: &[(i64, u64)]) -> MerkleTree {
        let mut builder = TreeBuilder::new(range, depth);
        for &(token, hash) in rows {
            builder.add(Token(token), hash, 1);
        }
        builder.finish()
    }

    #[test]
    fn equal_rows_give_equal_trees_and_one_changed_row_changes_its_path() {
        let r = range(-1000, 1000);
        let rows = [(-999, 11), (-5, 22), (0, 33), (1000, 44)];
        let a = build(r, 3, &rows);
        assert_eq!(a, build(r, 3, &[(1000, 44), (0, 33), (-5, 22), (-999, 11)]));
        let mut changed = rows;
        changed[2].1 = 34;
        let b = build(r, 3, &changed);
        assert_ne!(a.root(), b.root());
        let differing: Vec<usize> = (0..a.nodes.len())
            .filter(|&i| a.node(i) != b.node(i))
            .collect();
        // The leaf of token 0 and its ancestors: one per level.
        assert_eq!(differing.len(), 4);
        let leaf = differing[3] - a.first_leaf();
        assert!(a.leaf_range(leaf).unwrap().contains(Token(0)));
    }

    #[test]
    fn empty_trees_agree_at_any_depth_and_rows_outside_are_refused() {
        let r = range(0, 100);
        assert_eq!(build(r, 0, &[]).root(), 0);
        assert_eq!(build(r, 5, &[]).root(), 0);
        let mut builder = TreeBuilder::new(r, 2);
        assert!(!builder.add(Token(0), 7, 1));
        assert!(!builder.add(Token(101), 7, 1));
        assert!(builder.add(Token(100), 7, 1));
        assert_eq!(builder.finish().rows(), 1);
    }

    #[test]
    fn depth_stops_at_the_limit_and_at_the_range_width() {
        assert_eq!(TreeBuilder::new(range(0, 0), 99).depth(), MAX_DEPTH);
        assert_eq!(TreeBuilder::new(range(0, 4), 9).depth(), 2);
    }

    #[test]
    fn a_tree_is_as_deep_as_its_rows_need_within_the_limits() {
        let ring = range(0, 0);
        let depths: Vec<u8> = [0, 1, 2, 3, 4, 5, 1000, 1024, 1025]
            .map(|rows| depth_for(ring, rows))
            .to_vec();
        assert_eq!(depths, [0, 0, 1, 2, 2, 3, 10, 10, 11]);
        assert_eq!(depth_for(ring, u64::MAX), MAX_DEPTH);
        assert_eq!(depth_for(range(0, 4), 1000), 2, "capped by the width");
    }

    proptest! {
        #[test]
        fn leaves_tile_the_range_and_each_token_lands_in_its_leaf(
            start in any::<i64>(),
            width in 1u64..,
            depth in 0u8..=MAX_DEPTH,
            probes in proptest::collection::vec(any::<u64>(), 1..20),
        ) {
            let r = TokenRange::new(Token(start), Token(start).advance(width));
            let builder = TreeBuilder::new(r, depth);
            let depth = builder.depth();
            let full = width == 0 || r.is_full_ring();
            prop_assume!(!full);
            // Consecutive non-empty leaves meet end to start and cover the range.
            let leaves: Vec<TokenRange> = (0..1usize << depth)
                .filter_map(|leaf| leaf_range(r, depth, leaf))
                .collect();
            prop_assert_eq!(leaves[0].start, r.start);
            prop_assert_eq!(leaves[leaves.len() - 1].end, r.end);
            for pair in leaves.windows(2) {
                prop_assert_eq!(pair[0].end, pair[1].start);
            }
            for probe in probes {
                let token = r.start.advance(1 + probe % width);
                let leaf = leaf_of(r, depth, width as u128, token).unwrap();
                prop_assert!(leaf_range(r, depth, leaf).unwrap().contains(token));
            }
        }
    }

    #[test]
    fn the_whole_ring_splits_into_halves_at_depth_one() {
        let whole = range(i64::MIN, i64::MIN);
        let left = leaf_range(whole, 1, 0).unwrap();
        let right = leaf_range(whole, 1, 1).unwrap();
        assert_eq!(left, range(i64::MIN, 0));
        assert_eq!(right, range(0, i64::MIN));
        assert_eq!(leaf_range(whole, 0, 0).unwrap(), whole);
    }
}
