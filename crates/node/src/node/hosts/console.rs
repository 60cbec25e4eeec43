//! The context as the web console's host ([`ConsoleHost`]): each answer is
//! the one the matching CLI command gets, from the same service function
//! (`services::admin`, `services::topology`, `services::repair`).

use std::sync::Arc;

use ringstore_metrics::CoordinatorOp;
use ringstore_placement::{HostId, Ring};
use ringstore_proto::v1 as pb;
use ringstore_storage::Timestamp;

use crate::console::{ConsoleHost, TrafficSample};
use crate::context::NodeContext;
use crate::error::Result;
use crate::services::{admin, repair, topology};

impl ConsoleHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn info(&self) -> Result<pb::InfoResponse> {
        admin::info(self)
    }

    fn status(&self) -> Result<pb::StatusResponse> {
        admin::status(self, "")
    }

    fn ring(&self) -> Arc<Ring> {
        self.view().ring.clone()
    }

    fn streams(&self) -> pb::NetStatsResponse {
        topology::net_stats(self)
    }

    fn repair_status(&self) -> pb::RepairStatusResponse {
        repair::repair_status(self)
    }

    fn hints(&self) -> pb::HintsResponse {
        admin::hints(self)
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn traffic(&self) -> TrafficSample {
        TrafficSample {
            at: self.started.elapsed(),
            reads: self.metrics.coordinator_summary(CoordinatorOp::Read),
            writes: self.metrics.coordinator_summary(CoordinatorOp::Write),
        }
    }
}
