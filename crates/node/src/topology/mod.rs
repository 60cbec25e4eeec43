//! Topology changes: bootstrap, replace, decommission, removenode, cleanup,
//! keyspace alters, and the movement plans that preview them.
//!
//! # Design
//! A change is announced in gossip before any data moves: the joining node
//! gossips `Joining` with its tokens (a replacement also names the node it
//! replaces), a leaving node `Leaving`, a node running `removenode` the dead
//! node it is removing. From that metadata every node derives the same
//! *pending ring* ([`ClusterView::pending_ring`](ringstore_membership::ClusterView)),
//! and coordinators send each write to the key's pending replicas too,
//! waiting for one more ack per pending replica (see
//! [`coordinator`](crate::coordinator)). After `ring_delay`, and once every
//! live node has confirmed that it holds the announcement
//! ([`wait_until_announced`](waits::wait_until_announced)), the ranges move
//! ([`transfers()`](transfers::transfers)): each receiver
//! pulls each range it gains from the replica that loses it
//! ([`streaming`](crate::streaming)). Only then does the
//! change complete in gossip (`Normal`, `Left`, removed), and the pending
//! ring becomes the ring. A write acknowledged at any point is therefore on
//! the old replicas (and streamed) or on the new ones (written directly).
//!
//! One range movement at a time: a node does not start one while gossip
//! shows another under way ([`ClusterView::movements`](ringstore_membership::ClusterView::movements));
//! a joining node waits its turn, `decommission` and `removenode` are
//! refused with the movement that is in the way.
//!
//! # Caveats
//! - Two nodes starting a movement within one gossip round of each other may
//!   both proceed; the placement stays consistent (both pending sets are
//!   written), but the estimate of each is off.
//! - A node that dies while it joins or leaves stays so in gossip; restart
//!   it (it resumes) or remove it.
//!
//! # Files
//! - `join.rs`: a fresh node's join (waiting for its turn, choosing
//!   tokens), deciding by `join_turn.rs` (pure: who goes next, which tokens
//!   a new cluster's cohort takes), then `bootstrap.rs` (streaming what it
//!   gains; also replacement and resuming).
//! - `decommission.rs`, `removenode.rs`, `cleanup.rs`: the other changes;
//!   `proposals.rs`: before a dead node leaves (removenode, replace), every
//!   survivor of its ranges finishes its compare-and-sets there.
//! - `alter.rs`: a keyspace's replication changed on an unchanged ring,
//!   moved the same way (announce, stream, commit, clean up).
//! - `transfers.rs`: who fetches which range from whom, and having them do
//!   it; `preview.rs`: the movement plans of `plan`.
//! - `waits.rs`: the waits between steps; `catch_up.rs`: the wait until
//!   this node holds every member record its peers hold, before data moves;
//!   `movement.rs`: the checks before a movement starts and the wait once
//!   it is announced; `persisted.rs`: what a node keeps across restarts
//!   (tokens, an unfinished bootstrap, takeovers).
//! - `host.rs`: [`TopologyHost`](host::TopologyHost), what the changes need
//!   from the running node (the streaming host, settings, gossip, the
//!   schema, and repair and hint hand-off as methods); the node implements
//!   it, so no topology module names its context.
//!
//! This file holds only pure checks of a view or a ring (repair asks
//! [`movements_under_way`] too) and imports nothing of the node but the
//! error folder (which imports nothing of it either), so that what imports
//! it is not drawn into a circle through the node's context types.

pub mod alter;
pub mod bootstrap;
pub mod catch_up;
pub mod cleanup;
pub mod decommission;
pub mod host;
pub mod join;
pub mod join_turn;
pub mod movement;
pub mod persisted;
pub mod preview;
pub mod proposals;
pub mod removenode;
pub mod transfers;
pub mod waits;

use std::collections::BTreeMap;

use ringstore_membership::ClusterView;
use ringstore_placement::{ReplicationStrategy, Ring};

use crate::error::MovementsUnderway;

/// The range movements live nodes of `view` show under way (joins,
/// leaves, removals, replacements), for an error or a log line; `None` if
/// none.
pub fn movements_under_way(view: &ClusterView) -> Option<MovementsUnderway> {
    let ring = view.movements();
    (!ring.is_empty()).then(|| MovementsUnderway {
        ring,
        alters: Vec::new(),
    })
}

/// Whether `ring` has enough nodes for `strategy`: its replication factor in
/// all (SimpleStrategy), or in each data center it names (NTS).
pub fn strategy_fits(ring: &Ring, strategy: &ReplicationStrategy) -> bool {
    let mut per_dc: BTreeMap<String, u32> = BTreeMap::new();
    for host in ring.hosts() {
        *per_dc.entry(host.location.dc.to_string()).or_default() += 1;
    }
    match strategy {
        ReplicationStrategy::Simple { rf } => (ring.hosts().len() as u32) >= rf.get(),
        ReplicationStrategy::NetworkTopology { rf_per_dc } => rf_per_dc
            .iter()
            .all(|(dc, rf)| per_dc.get(dc.as_str()).copied().unwrap_or(0) >= *rf),
    }
}
