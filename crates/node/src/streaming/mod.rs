//! Range streaming: copying every cell of a token range from one replica to
//! another while the cluster keeps serving.
//!
//! # Design
//! Streams are always *pulled*: the receiving node calls the source's
//! `StreamRange` and stores what arrives. Whoever coordinates a topology
//! change (the joining node itself, or the node running `decommission` or
//! `removenode`) tells each receiver what to fetch and from whom.
//!
//! - **Chunks** ([`chunk`]): the source scans the range in token order and
//!   sends bounded chunks, each with a CRC-32 of its entries. A chunk never
//!   splits the cells of one token, so the last token of a stored chunk is an
//!   exact resume point. The final message carries the count and CRC of the
//!   whole stream, which the receiver checks before it calls the range done.
//! - **Throttle** ([`throttle`]): one token bucket per node, shared by every
//!   range it sends (`stream_throughput_mib_per_sec`, Cassandra's outbound
//!   throttle), adjustable at runtime.
//! - **Checkpoints** ([`checkpoint`]): after each chunk is durably applied the
//!   receiver records the range's resume point under the operation's name, so
//!   an interrupted stream (source restart, network cut, receiver restart)
//!   continues where it stopped. Applying a cell twice is harmless (last
//!   write wins), so resuming never needs more precision than that.
//! - **Fetching** ([`fetch`]): a range is fetched from its preferred source
//!   (the replica losing it); a source that fails is retried with backoff,
//!   and one that is down or keeps failing gives way to the next replica, with
//!   a warning.
//! - **Visibility** ([`registry`]): every stream, sending or receiving, has a
//!   progress record that `netstats` shows.
//! - **Estimates** ([`estimate`]): sampled per-range sizes, for `plan`.

pub mod checkpoint;
pub mod chunk;
pub mod estimate;
pub mod fetch;
pub mod registry;
pub mod source;
pub mod throttle;
