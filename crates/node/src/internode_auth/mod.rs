//! Internode authentication on the wire: every call this node makes to a
//! peer carries a proof made with the key only the two of them share, and
//! every message of its body a tag ([`SignedChannel`]); the internode server
//! refuses, with `UNAUTHENTICATED`, every call whose proof is missing,
//! wrong, for another node, stale or replayed, or whose caller is not a
//! member (unknown to gossip, removed or departed), and ends a call at the
//! first message whose tag does not verify ([`InternodeAuthLayer`]). A
//! long-lived stream also checks at each message that its caller is still
//! a member ([`Caller`]).
//!
//! The layer wraps the whole `Internode` service (it sees the HTTP/2 request
//! and its body, not the decoded messages), so an RPC added later is
//! covered without a line of code. The proofs, message tags, clock check
//! and replay cache are the sans-IO `ringstore-internode-auth` crate; the members and
//! their keys come from gossip ([`PeerDirectory`]); this module reads the
//! clock, draws nonces, and moves headers and bytes. Without a cluster
//! secret both halves are pass-throughs (a node only starts so on loopback,
//! or `--insecure`: see [`crate::security`]).

mod body;
mod channel;
mod directory;
mod layer;

pub use channel::SignedChannel;
pub use directory::PeerDirectory;
pub use layer::{Authenticated, Caller, InternodeAuthLayer, is_not_member};

use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock in milliseconds since the Unix epoch (0 before it).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
