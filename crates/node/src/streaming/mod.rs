//! Range streaming's async shells: the gRPC and storage I/O around
//! `ringstore-streaming`, which holds the decisions and the state (chunks
//! and checksums, checkpoints, the fetch state machine, the throttle, the
//! session registry, size estimates; its crate docs hold the design).
//!
//! - [`fetch`]: the receiving side. Drives one
//!   [`RangeFetcher`](ringstore_streaming::RangeFetcher) per range: opens
//!   `StreamRange` calls, converts the chunks from the wire, applies and
//!   checkpoints them, sleeps the backoffs.
//! - [`source`]: the sending side. Scans a range on the blocking pool,
//!   chunks it, and sends the chunks through the node's stream throttle.
//! - [`host`]: [`StreamHost`], what both sides need from the running node
//!   (its store, the view, internode clients, the stream registry and
//!   throttle); the node's context implements it, so neither side names
//!   the context.

pub mod fetch;
pub mod host;
pub mod source;

pub use host::StreamHost;
