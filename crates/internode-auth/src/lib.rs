//! Proof that an internode call comes from the member it names, is meant
//! for the node that receives it, and carries the messages that member
//! sent — nothing else.
//!
//! Gossip admits a member (its packets are sealed with the cluster secret,
//! its records signed with its own key: see `ringstore-membership`); this
//! crate makes every call on the internode gRPC port prove it comes from
//! such a member. The port otherwise takes schema pushes, replica writes,
//! hints and range streams from anyone who can reach it.
//!
//! # Protocol
//!
//! Caller `A` and callee `B` share a key only they can compute,
//! `K = pair_key(A, B)` (an X25519 agreement of their identity keys, see
//! `ringstore-identity`). Every call carries one metadata entry,
//! [`PROOF_HEADER`]:
//!
//! ```text
//! v2.<caller A, 32 hex>.<callee B, 32 hex>.<issued at, ms since the epoch>.<nonce, 32 hex>.<tag, 64 hex>
//! tag = HMAC-SHA256(K, "ringstore-internode-v2" | len(method) | method | A | B | issued | nonce)
//! ```
//!
//! and every gRPC message of its request body, unary or streamed, is
//! followed by a tag ([`messages`]):
//!
//! ```text
//! message tag = HMAC-SHA256(K, "ringstore-internode-message-v2" | nonce | sequence number | flag | message)
//! ```
//!
//! So a proof names its method (a proof for `PullSchema` cannot open a
//! `PushSchema`), its destination (it is refused by any other node, whose
//! key with `A` differs anyway), and it cannot carry another body: each
//! message is bound to the call's nonce and its place in the call, so a
//! message cannot be changed, dropped from the middle, reordered, moved to
//! another call, or injected into a long-lived stream.
//!
//! The receiver ([`Verifier`]) accepts a proof only if it names the
//! receiver, its caller is a member the receiver knows (and has not
//! removed: the node's directory answers that, and the key), its tag
//! verifies, it was issued within `max_skew` of the receiver's clock, and
//! its `(issued, nonce)` has not been seen before ([`ReplayCache`]).
//!
//! Everything here is sans-IO: keys, clock readings and nonces are
//! arguments, so tests are deterministic. The tonic glue (a tower layer on
//! the whole `Internode` service, a signing channel, the bodies that add
//! and check message tags) lives in `ringstore-node`.
//!
//! # Caveats
//!
//! - Responses are not tagged: a man in the middle could change what a
//!   callee answers. Internode TLS (`server_encryption`) covers that, and
//!   hides the traffic.
//! - A stream cut short looks like a stream that ended: the messages before
//!   the cut are authentic, and none is lost silently (each is answered).
//! - Clocks must agree within `max_skew` (60 s by default).

#![deny(missing_docs)]

mod error;
pub mod messages;
mod proof;
mod replay;
mod verifier;

pub use error::Refusal;
pub use messages::{MessageOpener, MessageSealer, MessageSplitter};
pub use proof::{Nonce, PROOF_HEADER, Proof};
pub use replay::ReplayCache;
pub use verifier::{Admitted, DEFAULT_MAX_SKEW_MS, DEFAULT_REPLAY_CAPACITY, Verifier};
