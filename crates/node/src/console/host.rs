//! What the console reads of the node: [`ConsoleHost`].

use std::sync::Arc;

use ringstore_placement::{HostId, Ring};
use ringstore_proto::v1 as pb;
use ringstore_storage::Timestamp;

use crate::console::traffic::TrafficSample;
use crate::error::Result;

/// What the console reads of the running node, and nothing more. The
/// answers are those of the CLI commands named.
pub trait ConsoleHost: Send + Sync {
    /// This node's host id.
    fn host_id(&self) -> HostId;
    /// This node, as `ringstore info` shows it.
    fn info(&self) -> Result<pb::InfoResponse>;
    /// Every member, with primary ownership, as `ringstore status` lists
    /// them (this node's gossip view).
    fn status(&self) -> Result<pb::StatusResponse>;
    /// The ring of this node's gossip view (`Normal` and `Leaving`
    /// members' tokens; joining members are not in it yet).
    fn ring(&self) -> Arc<Ring>;
    /// This node's streams, as `ringstore netstats` shows them.
    fn streams(&self) -> pb::NetStatsResponse;
    /// The repair schedule and coverage, as `ringstore repair status`
    /// shows them.
    fn repair_status(&self) -> pb::RepairStatusResponse;
    /// The hints this node holds, as `ringstore hints` shows them.
    fn hints(&self) -> pb::HintsResponse;
    /// The node's clock now (the one repairs are stamped with).
    fn now(&self) -> Timestamp;
    /// The coordinator's request counts and latency histograms now.
    fn traffic(&self) -> TrafficSample;
}
