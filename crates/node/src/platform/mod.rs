//! What a node takes from the machine it runs on: its sockets, its clock
//! and its disk.
//!
//! # Design
//! A real node takes the operating system's ([`Platform::os`]): UDP and TCP
//! sockets, the system clock, sled on its data directory. A deterministic
//! simulation of a whole cluster (`crates/simulation`) runs the same node
//! code on one thread with a simulated network, clock and disk, and gives
//! each node a [`Platform`] made of those. Everything else — membership,
//! the coordinator, hints, streaming, schema, repair — is the same code in
//! both, which is the point: the simulation tries the real node.
//!
//! # Invariants
//! - Every socket the node opens comes from its [`Network`]: gossip, the
//!   client and internode servers, and its calls to peers.
//! - Every wall-clock reading goes through the node's
//!   [`WallClock`](crate::clock::WallClock), built on [`Platform::clock`].
//! - Its storage engine, and the files of its commit log and runs, come
//!   from its [`Disk`].
//!
//! # Caveats
//! - The optional `GET /metrics` port needs the operating system's
//!   network; a node on another network refuses a metrics address.
//! - The node's files besides the store's (its identity, snapshots) are
//!   read and written with `std::fs` on every platform.

mod network;

use std::sync::Arc;

use ringstore_membership::{Clock, SystemClock};
use ringstore_storage::{Engine, FileSystem};

pub use network::{Accepted, Connection, Keepalive, Listener, Network, Transport};

/// The sockets, clock and disk a node runs on. See the module docs.
pub struct Platform {
    /// Where its sockets come from.
    pub network: Network,
    /// Its wall and monotonic time (before the test offset).
    pub clock: Arc<dyn Clock>,
    /// Where its storage engine comes from.
    pub disk: Disk,
}

impl Platform {
    /// The operating system's sockets and clock, and sled on the data
    /// directory: what `ringstore server` runs on.
    pub fn os() -> Platform {
        Platform {
            network: Network::Os,
            clock: SystemClock::shared(),
            disk: Disk::Sled,
        }
    }
}

/// Where a node's storage engine and the store's own files come from.
#[derive(Clone)]
pub enum Disk {
    /// sled in `DATA_DIR/db`, and the commit log and runs beside it on the
    /// operating system's file system.
    Sled,
    /// A simulation's disk, which outlives the node: an engine standing in
    /// for sled, and a file system for the commit log and the runs (the
    /// store's own durability code, run for real).
    Simulated {
        /// The engine standing in for sled.
        engine: Arc<dyn Engine>,
        /// Where the commit log and runs are kept.
        files: Arc<dyn FileSystem>,
    },
}
