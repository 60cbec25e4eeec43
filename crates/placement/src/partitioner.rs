//! The Murmur3 partitioner: which token a key has.

use crate::error::{PlacementError, Result};
use crate::murmur3::cassandra_murmur3_x64_128;
use crate::token::Token;

/// Cassandra's `Murmur3Partitioner`: the token of a key is the first 64 bits
/// (h1) of Cassandra's MurmurHash3 x64_128 with seed 0, read as a signed
/// integer, with `i64::MIN` mapped to `i64::MAX` so that `Token::MIN` is never a
/// key's token. Bit-exact with Cassandra for every non-empty key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Murmur3Partitioner;

impl Murmur3Partitioner {
    /// The token of `key`. The empty key is refused (Cassandra maps it to the
    /// minimum token, which owns nothing; ringstore does not store it).
    pub fn token(key: &[u8]) -> Result<Token> {
        if key.is_empty() {
            return Err(PlacementError::EmptyKey);
        }
        let (h1, _) = cassandra_murmur3_x64_128(key, 0);
        Ok(normalize(h1 as i64))
    }
}

fn normalize(h1: i64) -> Token {
    if h1 == i64::MIN {
        Token::MAX
    } else {
        Token(h1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_cassandra_tokens() {
        assert_eq!(
            Murmur3Partitioner::token(b"a").unwrap(),
            Token(-8839064797231613815)
        );
        assert_eq!(
            Murmur3Partitioner::token(b"hello").unwrap(),
            Token(-3758069500696749310)
        );
        assert_eq!(
            Murmur3Partitioner::token(&[0x80]).unwrap(),
            Token(-5284281814142962636)
        );
    }

    #[test]
    fn empty_key_is_refused() {
        assert!(matches!(
            Murmur3Partitioner::token(b""),
            Err(PlacementError::EmptyKey)
        ));
    }

    #[test]
    fn minimum_hash_maps_to_maximum_token() {
        assert_eq!(normalize(i64::MIN), Token::MAX);
        assert_eq!(normalize(-1), Token(-1));
    }
}
