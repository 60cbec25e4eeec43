//! The order-preserving encoding of data keys: `token (8 bytes) ++ key`.
//!
//! The token's bytes are [`Token::to_ordered_bytes`] (big-endian with the sign
//! bit flipped), so unsigned byte order of data keys is token order, then key
//! byte order among keys that share a token. A token range is therefore at
//! most two contiguous byte ranges of a data tree — two only when it wraps
//! past `Token::MAX`.
//!
//! # Invariants
//! - `decode(encode(t, k)) == (t, k)` for every token and non-empty key.
//! - `encode(t1, k1) < encode(t2, k2)` ⇔ `(t1, k1) < (t2, k2)`.
//! - A data key lies in one of [`token_range_scans`]`(r)` ⇔ `r.contains(t)`.

use std::ops::Bound;

use ringstore_placement::{Token, TokenRange};

use crate::error::{Result, StorageError};

/// The length of the token prefix of a data key.
pub(crate) const TOKEN_LEN: usize = 8;

/// The data key of `key`, whose token is `token`.
pub(crate) fn encode_data_key(token: Token, key: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(TOKEN_LEN + key.len());
    bytes.extend_from_slice(&token.to_ordered_bytes());
    bytes.extend_from_slice(key);
    bytes
}

/// The token and key of a data key. Data keys always carry a non-empty key,
/// so anything of 8 bytes or fewer is corrupt.
pub(crate) fn decode_data_key(bytes: &[u8]) -> Result<(Token, &[u8])> {
    match bytes.split_first_chunk::<TOKEN_LEN>() {
        Some((token, key)) if !key.is_empty() => Ok((Token::from_ordered_bytes(*token), key)),
        _ => Err(StorageError::CorruptKey {
            reason: format!("{} bytes is too short for a token and a key", bytes.len()),
        }),
    }
}

/// One contiguous scan of a data tree: the keys from `from` (included) to
/// `to` (excluded; `None` for the end of the tree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ByteRange {
    from: [u8; TOKEN_LEN],
    to: Option<[u8; TOKEN_LEN]>,
}

impl ByteRange {
    /// The scan's bounds, as [`Tree::range`](crate::Tree::range) takes them.
    pub(crate) fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        let to = match &self.to {
            Some(to) => Bound::Excluded(&to[..]),
            None => Bound::Unbounded,
        };
        (Bound::Included(&self.from[..]), to)
    }
}

/// The scans, in token order, that together cover exactly the data keys whose
/// tokens `range` contains: one, or two for a range that wraps.
pub(crate) fn token_range_scans(range: TokenRange) -> Vec<ByteRange> {
    range
        .to_inclusive_pieces()
        .into_iter()
        .map(|(from, to)| ByteRange {
            from: from.to_ordered_bytes(),
            // Every key of token `to` sorts before the bare prefix of `to + 1`.
            to: (to != Token::MAX).then(|| to.advance(1).to_ordered_bytes()),
        })
        .collect()
}

/// The owned bounds of one contiguous scan of data keys.
pub(crate) type OwnedBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The bounds of one contiguous scan of the data keys strictly after the row
/// `(after, after_key)` — after every row of token `after` when `after_key`
/// is `None` — up to and including every row of token `last`; `None` when no
/// data key can lie there. Never wraps: a scan resumed in token order.
pub(crate) fn after_row_bounds(
    after: Token,
    after_key: Option<&[u8]>,
    last: Token,
) -> Option<OwnedBounds> {
    let from = match after_key {
        Some(key) if after <= last => Bound::Excluded(encode_data_key(after, key)),
        None if after < last => Bound::Included(after.advance(1).to_ordered_bytes().to_vec()),
        _ => return None,
    };
    let to = match last {
        Token::MAX => Bound::Unbounded,
        last => Bound::Excluded(last.advance(1).to_ordered_bytes().to_vec()),
    };
    Some((from, to))
}

#[cfg(test)]
mod tests {
    use std::ops::RangeBounds;

    use super::*;
    use proptest::prelude::*;

    fn in_scans(scans: &[ByteRange], data_key: &[u8]) -> bool {
        scans
            .iter()
            .any(|scan| RangeBounds::<[u8]>::contains(&scan.bounds(), data_key))
    }

    #[test]
    fn data_keys_decode_to_their_token_and_key() {
        let bytes = encode_data_key(Token(-42), b"user:1");
        assert_eq!(bytes.len(), 14);
        assert_eq!(
            decode_data_key(&bytes).unwrap(),
            (Token(-42), &b"user:1"[..])
        );
    }

    #[test]
    fn data_keys_too_short_to_hold_a_key_are_corrupt() {
        assert!(matches!(
            decode_data_key(&[1, 2, 3]),
            Err(StorageError::CorruptKey { .. })
        ));
        assert!(decode_data_key(&Token(0).to_ordered_bytes()).is_err());
    }

    #[test]
    fn a_wrapping_range_needs_two_scans_and_a_plain_one_needs_one() {
        assert_eq!(
            token_range_scans(TokenRange::new(Token(0), Token(10))).len(),
            1
        );
        assert_eq!(
            token_range_scans(TokenRange::new(Token(10), Token(0))).len(),
            2
        );
        assert_eq!(
            token_range_scans(TokenRange::new(Token(7), Token(7))).len(),
            1
        );
    }

    #[test]
    fn scans_include_the_end_token_and_exclude_the_start_token() {
        let scans = token_range_scans(TokenRange::new(Token(0), Token(10)));
        assert!(!in_scans(&scans, &encode_data_key(Token(0), b"\xff\xff")));
        assert!(in_scans(&scans, &encode_data_key(Token(1), b"\0")));
        assert!(in_scans(
            &scans,
            &encode_data_key(Token(10), b"\xff\xff\xff")
        ));
        assert!(!in_scans(&scans, &encode_data_key(Token(11), b"\0")));
    }

    #[test]
    fn a_range_ending_at_the_max_token_scans_to_the_end_of_the_tree() {
        let scans = token_range_scans(TokenRange::new(Token(0), Token::MAX));
        assert!(in_scans(&scans, &encode_data_key(Token::MAX, b"\xff")));
        let wrapping = token_range_scans(TokenRange::new(Token::MAX, Token(0)));
        assert_eq!(wrapping.len(), 1);
        assert!(!in_scans(&wrapping, &encode_data_key(Token::MAX, b"k")));
        assert!(in_scans(&wrapping, &encode_data_key(Token::MIN, b"k")));
    }

    fn any_token() -> impl Strategy<Value = Token> {
        prop_oneof![
            any::<i64>().prop_map(Token),
            (-3i64..3).prop_map(Token),
            Just(Token::MIN),
            Just(Token::MAX),
            (0u64..3).prop_map(|d| Token::MAX.advance(d)),
        ]
    }

    proptest! {
        #[test]
        fn data_key_order_is_token_order_then_key_order(
            t1 in any_token(), k1 in proptest::collection::vec(any::<u8>(), 1..6),
            t2 in any_token(), k2 in proptest::collection::vec(any::<u8>(), 1..6),
        ) {
            let encoded = encode_data_key(t1, &k1).cmp(&encode_data_key(t2, &k2));
            prop_assert_eq!(encoded, (t1, &k1).cmp(&(t2, &k2)));
        }

        /// Fuzz: any bytes decode to a token and key that encode back to
        /// them, or to a `CorruptKey` error; never a panic. More cases:
        /// `PROPTEST_CASES=100000 cargo test -p ringstore-storage key_encoding`.
        #[test]
        fn arbitrary_bytes_decode_as_a_data_key_that_re_encodes_to_them_or_as_an_error(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            match decode_data_key(&bytes) {
                Ok((token, key)) => prop_assert_eq!(encode_data_key(token, key), bytes),
                Err(error) => {
                    prop_assert!(matches!(error, StorageError::CorruptKey { .. }), "{error:?}");
                    prop_assert!(bytes.len() <= TOKEN_LEN);
                }
            }
        }

        #[test]
        fn resumed_scans_cover_exactly_the_rows_after_the_resume_point(
            after in any_token(), last in any_token(), token in any_token(),
            after_key in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..4)),
            key in proptest::collection::vec(any::<u8>(), 1..4),
        ) {
            let data_key = encode_data_key(token, &key);
            let inside = after_row_bounds(after, after_key.as_deref(), last)
                .is_some_and(|bounds| RangeBounds::<Vec<u8>>::contains(&bounds, &data_key));
            let after_point = match &after_key {
                Some(k) => (token, &key) > (after, k),
                None => token > after,
            };
            prop_assert_eq!(inside, after_point && token <= last);
        }

        #[test]
        fn scans_cover_exactly_the_tokens_the_range_contains(
            start in any_token(), end in any_token(), token in any_token(),
            key in proptest::collection::vec(any::<u8>(), 1..6),
        ) {
            let range = TokenRange::new(start, end);
            let scans = token_range_scans(range);
            prop_assert_eq!(in_scans(&scans, &encode_data_key(token, &key)), range.contains(token));
            prop_assert!(scans.windows(2).all(|w| w[0].to.is_some_and(|to| to <= w[1].from)));
        }
    }
}
