//! Tokens, the positions on the ring, and the ranges between them.

use std::fmt;
use std::str::FromStr;

use crate::error::{PlacementError, Result};

/// A position on the token ring: a signed 64-bit integer, as in Cassandra's
/// `Murmur3Partitioner`.
///
/// The ring runs from `Token::MIN` (`i64::MIN`, never the token of a key) to
/// `Token::MAX` and wraps around. Ordering is the numeric order of the `i64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Token(pub i64);

impl Token {
    /// The smallest token; Cassandra's `Murmur3Partitioner.MINIMUM`. No key hashes to it.
    pub const MIN: Token = Token(i64::MIN);
    /// The largest token.
    pub const MAX: Token = Token(i64::MAX);

    /// The token's value.
    pub fn value(self) -> i64 {
        self.0
    }

    /// The clockwise distance from `self` to `to`, in token units: `to - self` modulo 2^64.
    /// The distance from a token to itself is 0.
    pub fn distance_to(self, to: Token) -> u64 {
        (to.0 as u64).wrapping_sub(self.0 as u64)
    }

    /// The token `steps` units clockwise of `self`, wrapping past `Token::MAX`.
    pub fn advance(self, steps: u64) -> Token {
        Token((self.0 as u64).wrapping_add(steps) as i64)
    }

    /// The byte encoding whose lexicographic order is the token order: the
    /// big-endian bytes with the sign bit flipped. Storage keys start with it so
    /// that a token range is one range scan.
    pub fn to_ordered_bytes(self) -> [u8; 8] {
        ((self.0 as u64) ^ (1 << 63)).to_be_bytes()
    }

    /// The inverse of [`Token::to_ordered_bytes`].
    pub fn from_ordered_bytes(bytes: [u8; 8]) -> Token {
        Token((u64::from_be_bytes(bytes) ^ (1 << 63)) as i64)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for Token {
    type Err = PlacementError;

    fn from_str(s: &str) -> Result<Token> {
        s.trim()
            .parse::<i64>()
            .map(Token)
            .map_err(|source| PlacementError::InvalidToken {
                text: s.to_string(),
                source,
            })
    }
}

/// Parses a comma-separated token list such as `initial_token: -9000,0,9000`.
/// Empty items are refused, and so are duplicates.
pub fn parse_token_list(text: &str) -> Result<Vec<Token>> {
    let tokens = text
        .split(',')
        .map(str::parse)
        .collect::<Result<Vec<Token>>>()?;
    let mut sorted = tokens.clone();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(PlacementError::DuplicateTokenInList { token: pair[0] });
    }
    Ok(tokens)
}

/// The number of distinct tokens on the ring, 2^64, as a float for fractions.
pub const RING_SIZE: f64 = 18_446_744_073_709_551_616.0;

/// A range of the ring `(start, end]`: exclusive start, inclusive end, clockwise
/// from `start` to `end`, wrapping past `Token::MAX` when `end <= start`.
///
/// `start == end` is the whole ring (the range of a one-token ring), as in Cassandra.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenRange {
    /// Exclusive start.
    pub start: Token,
    /// Inclusive end.
    pub end: Token,
}

impl TokenRange {
    /// The range `(start, end]`.
    pub fn new(start: Token, end: Token) -> TokenRange {
        TokenRange { start, end }
    }

    /// Whether the range covers the whole ring.
    pub fn is_full_ring(&self) -> bool {
        self.start == self.end
    }

    /// Whether the range passes `Token::MAX` and continues from `Token::MIN`.
    pub fn wraps(&self) -> bool {
        self.end <= self.start
    }

    /// Whether `token` lies in `(start, end]`.
    pub fn contains(&self, token: Token) -> bool {
        if self.is_full_ring() {
            true
        } else if self.wraps() {
            token > self.start || token <= self.end
        } else {
            token > self.start && token <= self.end
        }
    }

    /// The number of tokens in the range, as a fraction of the whole ring (0, 1].
    pub fn fraction(&self) -> f64 {
        if self.is_full_ring() {
            1.0
        } else {
            self.start.distance_to(self.end) as f64 / RING_SIZE
        }
    }

    /// The range as at most two non-wrapping pieces `[from, to]` of inclusive
    /// bounds, in token order: what a storage range scan needs.
    pub fn to_inclusive_pieces(&self) -> Vec<(Token, Token)> {
        if self.is_full_ring() {
            return vec![(Token::MIN, Token::MAX)];
        }
        if !self.wraps() {
            return vec![(self.start.advance(1), self.end)];
        }
        let mut pieces = vec![(Token::MIN, self.end)];
        if self.start != Token::MAX {
            pieces.push((self.start.advance(1), Token::MAX));
        }
        pieces
    }
}

impl TokenRange {
    /// The range of the inclusive piece `[first, last]` (`first <= last`).
    fn from_inclusive(first: Token, last: Token) -> TokenRange {
        TokenRange::new(first.advance(u64::MAX), last)
    }

    /// The tokens in both `self` and `other`, as at most two ranges in
    /// token order (none when they do not overlap).
    pub fn intersection(&self, other: &TokenRange) -> Vec<TokenRange> {
        let mut pieces = Vec::new();
        for (a_first, a_last) in self.to_inclusive_pieces() {
            for (b_first, b_last) in other.to_inclusive_pieces() {
                let (first, last) = (a_first.max(b_first), a_last.min(b_last));
                if first <= last {
                    pieces.push((first, last));
                }
            }
        }
        pieces.sort();
        pieces
            .into_iter()
            .map(|(first, last)| TokenRange::from_inclusive(first, last))
            .collect()
    }
}

impl fmt::Display for TokenRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}]", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_bytes_sort_like_tokens() {
        let tokens = [i64::MIN, -5, -1, 0, 1, 77, i64::MAX].map(Token);
        let mut encoded: Vec<[u8; 8]> = tokens.iter().map(|t| t.to_ordered_bytes()).collect();
        encoded.sort();
        let decoded: Vec<Token> = encoded.into_iter().map(Token::from_ordered_bytes).collect();
        assert_eq!(decoded, tokens);
    }

    #[test]
    fn wrapping_range_contains_both_ends_of_the_ring() {
        let range = TokenRange::new(Token(100), Token(-100));
        assert!(range.wraps());
        assert!(range.contains(Token::MAX));
        assert!(range.contains(Token::MIN));
        assert!(range.contains(Token(-100)));
        assert!(!range.contains(Token(100)));
        assert!(!range.contains(Token(0)));
    }

    #[test]
    fn range_excludes_start_and_includes_end() {
        let range = TokenRange::new(Token(0), Token(10));
        assert!(!range.contains(Token(0)));
        assert!(range.contains(Token(1)));
        assert!(range.contains(Token(10)));
        assert!(!range.contains(Token(11)));
        assert_eq!(range.to_inclusive_pieces(), vec![(Token(1), Token(10))]);
    }

    #[test]
    fn full_ring_range_has_fraction_one() {
        let range = TokenRange::new(Token(5), Token(5));
        assert!(range.is_full_ring());
        assert_eq!(range.fraction(), 1.0);
        assert!(range.contains(Token(5)));
    }

    #[test]
    fn wrapping_range_splits_into_two_scans() {
        let range = TokenRange::new(Token(100), Token(-100));
        assert_eq!(
            range.to_inclusive_pieces(),
            vec![(Token::MIN, Token(-100)), (Token(101), Token::MAX)]
        );
        let half = TokenRange::new(Token(0), Token::MIN);
        assert!((half.fraction() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn token_list_parses_negative_tokens_and_refuses_duplicates() {
        assert_eq!(
            parse_token_list("-9000, 0,9000").unwrap(),
            vec![Token(-9000), Token(0), Token(9000)]
        );
        assert!(matches!(
            parse_token_list("1,2,1"),
            Err(PlacementError::DuplicateTokenInList { token: Token(1) })
        ));
        assert!(matches!(
            parse_token_list("1,,2"),
            Err(PlacementError::InvalidToken { .. })
        ));
    }

    #[test]
    fn intersections_of_plain_wrapping_and_whole_ranges() {
        let r = |a: i64, b: i64| TokenRange::new(Token(a), Token(b));
        assert_eq!(r(0, 100).intersection(&r(50, 200)), vec![r(50, 100)]);
        assert_eq!(r(0, 100).intersection(&r(100, 200)), vec![]);
        assert_eq!(r(0, 100).intersection(&r(7, 7)), vec![r(0, 100)]);
        assert_eq!(
            r(100, -100).intersection(&r(-200, 200)),
            vec![r(-200, -100), r(100, 200)]
        );
        // Pieces touching the ends of the ring keep them.
        let whole = r(5, 5).intersection(&r(100, -100));
        assert_eq!(whole, vec![r(i64::MAX, -100), r(100, i64::MAX)]);
        assert!(whole[0].contains(Token::MIN) && !whole[0].contains(Token::MAX));
        assert_eq!(r(5, 5).intersection(&r(9, 9)), vec![r(i64::MAX, i64::MAX)]);
    }
}
