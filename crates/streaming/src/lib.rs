//! Range streaming: copying every cell of a token range from one replica to
//! another while the cluster keeps serving — the parts that need no network.
//!
//! # What it does
//! Streams are always *pulled*: the receiving node calls the source's
//! `StreamRange` and stores what arrives. Whoever coordinates a topology
//! change (the joining node itself, or the node running `decommission` or
//! `removenode`) tells each receiver what to fetch and from whom. This crate
//! holds what both sides decide and keep; the node (`ringstore-node`,
//! `streaming/`) holds the thin async shells that do the gRPC and feed it.
//!
//! # Pieces
//! - **Chunks** ([`Chunker`], `chunk.rs`, pure): the source scans the range
//!   in token order and sends bounded chunks, each with a CRC-32 of its
//!   entries ([`EntryChecksum`]). A chunk never splits the cells of one
//!   token, so the last token of a stored chunk is an exact resume point. The
//!   final message carries the count and CRC of the whole stream, which the
//!   receiver checks before it calls the range done.
//! - **Fetching** ([`RangeFetcher`], `fetch.rs`, sans-IO): one range's fetch
//!   as a state machine driven by events (a chunk arrived, the stream ended,
//!   the source failed, a source was seen up or down, time passed) that
//!   answers with the next [`FetchAction`] (open a stream from a source at a
//!   token, wait until, apply a chunk and checkpoint it, record a
//!   checkpoint, done, give up). It picks the preferred source, retries with
//!   backoff, fails over to the next replica when a source is down or keeps
//!   failing, resumes from the checkpoint and verifies both checksums. Time
//!   is passed in, so its tests run on a simulated clock.
//! - **Checkpoints** ([`Checkpoints`], `checkpoint.rs`): after each chunk is
//!   durably applied the receiver records the range's resume point under the
//!   operation's name, in the store's meta tree, so an interrupted stream
//!   (source restart, network cut, receiver restart) continues where it
//!   stopped.
//! - **Operations** ([`StreamOperation`], `operation.rs`): bootstrap,
//!   replace, decommission and removenode, typed; their text form
//!   (`decommission:<host id>`) names the checkpoints and travels in
//!   requests, and is parsed once, at the edge.
//! - **Throttle** ([`StreamThrottle`], `throttle.rs`): one token bucket
//!   ([`ringstore_throttle::Throttle`]) per node, shared by every range it
//!   sends (`stream_throughput_mib_per_sec`, Cassandra's outbound throttle),
//!   adjustable at runtime.
//! - **Visibility** ([`Streams`], `registry.rs`): every stream, sending or
//!   receiving, has a progress record that `netstats` shows.
//! - **Estimates** ([`estimate_ranges`], `estimate.rs`): sampled per-range
//!   sizes, for `plan`.
//!
//! # Invariants
//! - A range is recorded [`Position::Done`] only after the whole stream's
//!   entry count and CRC matched what the source sent.
//! - A checkpoint only ever names a token whose cells (and all before it in
//!   the range) are durably applied: chunks end on token boundaries, and the
//!   checkpoint is written after the chunk is applied.
//! - A pass whose checksum fails is discarded whole: the checkpoint goes
//!   back to where that pass began.
//! - Applying a cell twice is harmless (cells merge by last-write-wins), so
//!   resuming never needs more precision than a token, and re-sending is
//!   always safe.
//! - Every persisted byte is versioned: checkpoint records start with a
//!   format byte.
//!
//! # Caveats
//! - Checkpoints are one record per operation, rewritten whole on every
//!   chunk: fine for the hundreds of ranges of a topology change, not for
//!   millions.
//! - A source seen down in the middle of a pass is not abandoned at once:
//!   the pass ends by itself (an error, or the idle timeout of the shell),
//!   and only the next pass chooses another source.
//! - The estimator samples the first keys of a range: skewed data (many
//!   tombstones in one spot) makes it less accurate.
//! - This crate knows nothing of gRPC: the node converts wire messages to
//!   [`Cell`](ringstore_cell::Cell)s and back at its edge.

#![deny(missing_docs)]

mod checkpoint;
mod chunk;
mod error;
mod estimate;
mod fetch;
mod operation;
mod registry;
mod throttle;

pub use checkpoint::{Checkpoints, Position};
pub use chunk::{Chunk, Chunker, EntryChecksum, entry_bytes};
pub use error::{FetchFailure, Result, StreamingError};
pub use estimate::{RangeEstimate, SAMPLE_KEYS, estimate_range, estimate_ranges};
pub use fetch::{FetchAction, FetchConfig, FetchEvent, FetchTotals, RangeFetcher};
pub use operation::{StreamOperation, UnknownOperation};
pub use registry::{Direction, Session, SessionInfo, SessionSnapshot, SessionState, Streams};
pub use throttle::StreamThrottle;
