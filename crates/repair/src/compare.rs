//! Finding where replicas' trees differ without shipping them whole.
//!
//! A [`TreeComparison`] walks the replicas' trees of one range from the root
//! down, a few levels per round: each round asks every replica for the same
//! node hashes (the descendants, [`LEVELS_PER_ROUND`] levels down, of the
//! nodes that differed in the previous round) and keeps those on which the
//! replicas disagree. It ends at the leaves with the differing leaves, turned
//! into token ranges (adjacent ones merged). Identical replicas cost one
//! round of roots; a few differing rows cost a few hashes per level.

use ringstore_placement::TokenRange;

use crate::error::RepairError;
use crate::merkle::{first_leaf, leaf_range};

/// Levels descended per round: 16 hashes asked under each differing node.
pub const LEVELS_PER_ROUND: u8 = 4;

/// What the comparison needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareStep {
    /// Ask every replica for the hashes of these nodes, in this order, and
    /// pass the answers to [`TreeComparison::record`].
    AskNodes(Vec<usize>),
    /// The comparison is over: the token ranges whose rows differ on some
    /// replica (empty when the trees are identical).
    Done(Vec<TokenRange>),
}

/// The comparison of the trees of one range on several replicas.
#[derive(Clone, Debug)]
pub struct TreeComparison {
    range: TokenRange,
    depth: u8,
    /// The level of the nodes in `frontier`.
    level: u8,
    /// Nodes at `level` on which the replicas disagree.
    frontier: Vec<usize>,
    /// The nodes asked for in the current round, if any.
    asked: Vec<usize>,
}

impl TreeComparison {
    /// Starts from the replicas' roots (one per replica, all trees of
    /// `depth` over `range`).
    pub fn new(range: TokenRange, depth: u8, roots: &[u64]) -> TreeComparison {
        let differ = roots.windows(2).any(|pair| pair[0] != pair[1]);
        TreeComparison {
            range,
            depth,
            level: 0,
            frontier: if differ { vec![0] } else { Vec::new() },
            asked: Vec::new(),
        }
    }

    /// The next step: nodes to ask for, or the differing ranges.
    pub fn next_step(&mut self) -> CompareStep {
        if self.frontier.is_empty() || self.level == self.depth {
            return CompareStep::Done(self.differing_ranges());
        }
        let down = LEVELS_PER_ROUND.min(self.depth - self.level);
        self.asked = self
            .frontier
            .iter()
            .flat_map(|&node| descendants(node, down))
            .collect();
        self.level += down;
        CompareStep::AskNodes(self.asked.clone())
    }

    /// Takes every replica's hashes of the nodes last asked for (in the
    /// order asked), keeping the nodes on which they disagree.
    pub fn record(&mut self, answers: &[Vec<u64>]) -> Result<(), RepairError> {
        for (replica, answer) in answers.iter().enumerate() {
            if answer.len() != self.asked.len() {
                return Err(RepairError::WrongAnswer {
                    replica,
                    got: answer.len(),
                    wanted: self.asked.len(),
                });
            }
        }
        self.frontier = (0..self.asked.len())
            .filter(|&i| answers.windows(2).any(|pair| pair[0][i] != pair[1][i]))
            .map(|i| self.asked[i])
            .collect();
        self.asked.clear();
        Ok(())
    }

    /// The token ranges of the differing nodes at the current level (the
    /// leaves once the walk is over), adjacent ones merged.
    fn differing_ranges(&self) -> Vec<TokenRange> {
        let mut ranges: Vec<TokenRange> = Vec::new();
        for &node in &self.frontier {
            let Some(range) = node_range(self.range, self.depth, self.level, node) else {
                continue;
            };
            match ranges.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => ranges.push(range),
            }
        }
        ranges
    }
}

/// The descendants of `node`, `down` levels below it, in order.
fn descendants(node: usize, down: u8) -> impl Iterator<Item = usize> {
    let span = 1usize << down;
    // The first descendant `down` levels below node i is (i+1)·2^down − 1.
    let first = (node + 1) * span - 1;
    first..first + span
}

/// The token range of `node` at `level` of a tree of `depth` over `range`:
/// the union of its leaves' ranges, or `None` if they hold no token.
fn node_range(range: TokenRange, depth: u8, level: u8, node: usize) -> Option<TokenRange> {
    let below = depth - level;
    let position = node - first_leaf(level);
    let first = position << below;
    let leaves =
        (first..first + (1usize << below)).filter_map(|leaf| leaf_range(range, depth, leaf));
    leaves.reduce(|whole, leaf| TokenRange::new(whole.start, leaf.end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{MerkleTree, TreeBuilder};
    use ringstore_placement::Token;

    fn tree(rows: &[(i64, u64)], depth: u8) -> MerkleTree {
        let mut builder = TreeBuilder::new(TokenRange::new(Token(0), Token(1 << 20)), depth);
        for &(token, hash) in rows {
            builder.add(Token(token), hash, 1);
        }
        builder.finish()
    }

    /// Runs a comparison of `trees` to its end; the differing ranges and the
    /// hashes asked for per replica.
    fn compare(trees: &[MerkleTree]) -> (Vec<TokenRange>, usize) {
        let roots: Vec<u64> = trees.iter().map(MerkleTree::root).collect();
        let mut comparison = TreeComparison::new(trees[0].range(), trees[0].depth(), &roots);
        let mut asked = 0;
        loop {
            match comparison.next_step() {
                CompareStep::Done(ranges) => return (ranges, asked),
                CompareStep::AskNodes(nodes) => {
                    asked += nodes.len();
                    let answers: Vec<Vec<u64>> = trees
                        .iter()
                        .map(|t| nodes.iter().map(|&n| t.node(n).unwrap()).collect())
                        .collect();
                    comparison.record(&answers).unwrap();
                }
            }
        }
    }

    #[test]
    fn identical_trees_need_only_their_roots() {
        let rows: Vec<(i64, u64)> = (1..500).map(|i| (i * 2000, i as u64 * 7919)).collect();
        let trees = [tree(&rows, 9), tree(&rows, 9), tree(&rows, 9)];
        assert_eq!(compare(&trees), (Vec::new(), 0));
    }

    #[test]
    fn the_walk_ends_at_the_leaves_holding_the_differing_rows() {
        let rows: Vec<(i64, u64)> = (1..500).map(|i| (i * 2000, i as u64 * 7919)).collect();
        let mut changed = rows.clone();
        changed[100].1 = 1;
        let mut missing = rows.clone();
        missing.remove(300);
        let trees = [tree(&rows, 9), tree(&changed, 9), tree(&missing, 9)];
        let (ranges, asked) = compare(&trees);
        assert_eq!(ranges.len(), 2, "{ranges:?}");
        assert!(ranges[0].contains(Token(rows[100].0)));
        assert!(ranges[1].contains(Token(rows[300].0)));
        for range in &ranges {
            // One leaf each: 2^20 tokens over 512 leaves.
            assert_eq!(range.start.distance_to(range.end), 2048);
        }
        // Two paths of 9 levels, 16 hashes per differing node per round.
        assert!(asked <= 2 * 3 * 16, "asked for {asked} hashes");
    }

    #[test]
    fn adjacent_differing_leaves_become_one_range() {
        let whole = TokenRange::new(Token(0), Token(1 << 20));
        let a = tree(&[(1, 1), (4097, 2)], 8);
        let b = tree(&[(1, 9), (4097, 9)], 8);
        let (ranges, _) = compare(&[a, b]);
        assert_eq!(ranges, vec![TokenRange::new(whole.start, Token(8192))]);
    }

    #[test]
    fn a_tree_of_depth_zero_compares_by_its_root() {
        let (ranges, asked) = compare(&[tree(&[(5, 1)], 0), tree(&[(5, 2)], 0)]);
        assert_eq!(ranges, vec![TokenRange::new(Token(0), Token(1 << 20))]);
        assert_eq!(asked, 0);
    }

    #[test]
    fn a_short_answer_is_an_error() {
        let mut comparison = TreeComparison::new(TokenRange::new(Token(0), Token(99)), 4, &[1, 2]);
        let CompareStep::AskNodes(nodes) = comparison.next_step() else {
            panic!("expected a question");
        };
        assert_eq!(nodes.len(), 16);
        assert_eq!(
            comparison.record(&[vec![0; 16], vec![0; 3]]),
            Err(RepairError::WrongAnswer {
                replica: 1,
                got: 3,
                wanted: 16
            })
        );
    }
}
