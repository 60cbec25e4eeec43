//! The context as the hosts of what stops the node serving: drain
//! ([`DrainHost`]) and the disk failure policy ([`DiskFailureHost`]).

use std::sync::Arc;

use ringstore_membership::{ClusterView, MembershipHandle};
use ringstore_metrics::NodeMetrics;
use ringstore_placement::HostId;
use ringstore_storage::Store;
use tokio::sync::watch;

use crate::config::DiskFailurePolicy;
use crate::context::NodeContext;
use crate::disk_failure::DiskFailureHost;
use crate::drain::DrainHost;
use crate::serving::Serving;

impl DrainHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn view(&self) -> Arc<ClusterView> {
        NodeContext::view(self)
    }

    fn serving(&self) -> &watch::Sender<Serving> {
        &self.serving
    }

    fn write_timeout_ms(&self) -> u64 {
        self.config.timeouts.write_ms
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }
}

impl DiskFailureHost for NodeContext {
    fn store(&self) -> &Store {
        &self.store
    }

    fn disk_failure_policy(&self) -> DiskFailurePolicy {
        self.config.storage.disk_failure_policy
    }

    fn serving(&self) -> &watch::Sender<Serving> {
        &self.serving
    }

    fn request_stop(&self) {
        self.stop_requested.send_replace(true);
    }
}
