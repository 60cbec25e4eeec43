//! Uniformly random tokens.

use std::collections::BTreeSet;

use rand::{Rng, RngExt};

use crate::error::{PlacementError, Result};
use crate::ring::Ring;
use crate::token::Token;

/// `count` distinct random tokens that no host of `ring` holds, sorted. Never
/// `Token::MIN`, which owns no key. The RNG is the caller's, so tests can seed it.
pub fn random_tokens(ring: &Ring, count: usize, rng: &mut impl Rng) -> Result<Vec<Token>> {
    let mut chosen = BTreeSet::new();
    let attempts = count.saturating_mul(16).max(64);
    for _ in 0..attempts {
        if chosen.len() == count {
            break;
        }
        let token = Token(rng.random());
        if token != Token::MIN && ring.tokens().binary_search(&token).is_err() {
            chosen.insert(token);
        }
    }
    if chosen.len() < count {
        return Err(PlacementError::RingFull { wanted: count });
    }
    Ok(chosen.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn random_tokens_are_distinct_sorted_and_seeded() {
        let ring = Ring::empty(0);
        let a = random_tokens(&ring, 256, &mut StdRng::seed_from_u64(7)).unwrap();
        let b = random_tokens(&ring, 256, &mut StdRng::seed_from_u64(7)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 256);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
    }
}
