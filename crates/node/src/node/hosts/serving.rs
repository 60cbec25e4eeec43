//! The context as the hosts of what stops the node serving: drain
//! ([`DrainHost`]) and the disk failure policy ([`DiskFailureHost`]); and
//! of what checks a client's request before it is coordinated
//! ([`ClientHost`]).

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{ClusterView, MembershipHandle};
use ringstore_metrics::NodeMetrics;
use ringstore_placement::HostId;
use ringstore_storage::{Store, Timestamp};
use tokio::sync::watch;

use crate::config::DiskFailurePolicy;
use crate::context::NodeContext;
use crate::disk_failure::DiskFailureHost;
use crate::drain::DrainHost;
use crate::error::Result;
use crate::services::client_host::{ClientHost, ClientSettings};
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

impl ClientHost for NodeContext {
    fn next_timestamp(&self) -> Timestamp {
        self.clock.next()
    }

    fn check_serving(&self) -> Result<()> {
        NodeContext::check_serving(self)
    }

    fn check_clock(&self) -> Result<()> {
        NodeContext::check_clock(self)
    }

    fn client_settings(&self) -> ClientSettings {
        let config = &self.config;
        ClientSettings {
            max_value_bytes: config.max_value_bytes,
            max_batch_mutations: config.max_batch_mutations,
            max_batch_bytes: config.max_batch_bytes,
            batch_concurrency: config.batch_concurrency,
            max_client_timestamp_skew: Duration::from_secs(
                config.max_client_timestamp_skew_seconds,
            ),
            max_clock_offset: Duration::from_millis(config.max_clock_offset_ms),
            ignore_client_deadlines: config.test_ignore_client_deadlines,
        }
    }
}
