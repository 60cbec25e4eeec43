//! Internode authentication on the wire: every call this node makes to a
//! peer carries a proof of the cluster secret ([`SignedChannel`]), and the
//! internode server refuses, with `UNAUTHENTICATED`, every call whose proof
//! is missing, wrong, stale or replayed, or whose caller has left the cluster
//! ([`InternodeAuthLayer`]). A stream is one call: its proof is checked
//! when it opens, and the layer leaves the caller in the request
//! ([`Caller`]) so that a long-lived stream can end once its caller has
//! left.
//!
//! The layer wraps the whole `Internode` service (it sees the HTTP/2 request,
//! not the decoded message), so an RPC added later is covered without a line
//! of code. The proofs themselves, the clock check and the replay cache are
//! the sans-IO `ringstore-auth` crate; this module only reads the clock,
//! draws nonces, and moves headers. Without a cluster secret both halves are
//! pass-throughs and the node warns at start that its internode port is open.

mod channel;
mod layer;

pub use channel::{CallSigner, SignedChannel};
pub use layer::{Authenticated, Caller, InternodeAuthLayer};

use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since the Unix epoch (0 before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
