//! Proof that an internode call comes from a holder of the cluster secret.
//!
//! Gossip packets are sealed with an HMAC of the cluster secret
//! (`ringstore-membership`'s envelope); this crate does the same for the
//! internode gRPC port, which otherwise takes schema pushes, replica writes,
//! hints and range streams from anyone who can reach it.
//!
//! # Protocol
//!
//! The caller adds one metadata entry, [`PROOF_HEADER`], to every internode
//! call:
//!
//! ```text
//! v1.<caller host id, 32 hex>.<issued at, ms since the epoch>.<nonce, 32 hex>.<tag, 64 hex>
//! tag = HMAC-SHA256(K, "ringstore-internode-v1" | len(method) | method | caller | issued | nonce)
//! K   = HMAC-SHA256(cluster secret, "ringstore internode rpc key v1")
//! ```
//!
//! `method` is the gRPC path (`/ringstore.v1.Internode/Apply`), so a proof
//! for a harmless call (`PullSchema`) cannot be moved to a harmful one
//! (`PushSchema`). `K` is derived from the secret rather than being the secret, so a
//! weakness in one use (gossip tags) does not carry over to the other.
//!
//! The receiver ([`Verifier`]) accepts a proof only if its tag verifies,
//! it was issued within `max_skew` of the receiver's clock (either way), and
//! its `(issued, nonce)` has not been seen before: the [`ReplayCache`]
//! remembers every accepted pair until it is older than `max_skew`, after
//! which the clock check refuses it anyway. A full cache forgets its oldest
//! entries and raises a floor below which everything is refused, so memory
//! stays bounded and a replay is never accepted; the price under an extreme
//! call rate is refusing honest calls delayed past the floor.
//!
//! Everything here is sans-IO: the clock reading and the nonce are
//! arguments, so tests are deterministic. The tonic glue (a tower layer on
//! the whole `Internode` service, and a signing channel) lives in
//! `ringstore-node`.
//!
//! # Caveats
//!
//! - The proof covers the method, not the request body: an attacker who can
//!   intercept and *hold back* a call can substitute its body within the
//!   skew window. Against an active man in the middle, use TLS for
//!   internode traffic as well (`internode_encryption = "all"`).
//! - Every holder of the secret is trusted alike: the caller's host id is a
//!   claim checked against membership (removed or departed nodes are
//!   refused), not a per-node identity. Mutual TLS gives per-node identities.
//! - Clocks must agree within `max_skew` (60 s by default).

#![deny(missing_docs)]

mod error;
mod key;
mod proof;
mod replay;
mod verifier;

pub use error::Refusal;
pub use key::InternodeKey;
pub use proof::{Nonce, PROOF_HEADER, Proof};
pub use replay::ReplayCache;
pub use verifier::{DEFAULT_MAX_SKEW_MS, DEFAULT_REPLAY_CAPACITY, Verifier};
