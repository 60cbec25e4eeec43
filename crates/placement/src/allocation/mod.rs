//! Choosing a new host's tokens.
//!
//! Two allocators, as in Cassandra:
//! - [`random_tokens`]: uniformly random tokens (Cassandra's legacy default).
//!   Simple, but with few tokens per host ownership is badly skewed.
//! - [`balanced_tokens`]: tokens chosen one at a time, each where it best evens
//!   out the *replicated* (effective) ownership of the keyspace strategy it is
//!   given — the idea behind Cassandra's
//!   `allocate_tokens_for_local_replication_factor`. See [`balanced`] for the
//!   algorithm.
//!
//! A host's weight is its token count: a host with `weight × num_tokens` tokens
//! is expected to own `weight` times as much as one with `num_tokens` (the
//! balanced allocator aims every host's ownership per token at the same value,
//! as Cassandra does). [`tokens_for_weight`] turns a weight into a count.

pub mod balanced;
mod random;

pub use balanced::balanced_tokens;
pub use random::random_tokens;

use std::num::NonZeroU32;

/// How many tokens a host of `weight` gets when a weight-1 host gets `num_tokens`.
pub fn tokens_for_weight(num_tokens: NonZeroU32, weight: NonZeroU32) -> usize {
    num_tokens.get() as usize * weight.get() as usize
}
