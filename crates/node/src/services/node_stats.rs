//! What `tpstats`, `proxyhistograms` and `tablestats` show, read from the
//! node's metrics ([`ringstore_metrics::NodeMetrics`]) and storage,
//! through the metrics page's host ([`MetricsHost`]).
//!
//! Each function takes the host in its `Arc`, as the `Admin` service
//! holds it, though none spawns: that service still holds the whole
//! context and passes `&self.context`; once it is generic too, these can
//! take `&impl MetricsHost`.

use std::sync::Arc;

use ringstore_metrics::{CoordinatorOp, Expired, LatencySummary, LocalOp, Stage};
use ringstore_proto::v1 as pb;

use crate::error::{NodeError, Result};
use crate::metrics::MetricsHost;

/// Every stage's numbers and the drop counts, as `tpstats` lists them.
pub async fn tp_stats(host: &Arc<impl MetricsHost>) -> Result<pb::TpStatsResponse> {
    let host = host.as_ref();
    // The sampled stages (hints, streams) are refreshed by a render.
    crate::metrics::page(host).await?;
    let metrics = host.metrics();
    let stages = Stage::ALL
        .iter()
        .map(|&stage| {
            let (active, pending, completed) = metrics.stage_numbers(stage);
            pb::StageStats {
                name: stage.label().to_string(),
                active,
                pending,
                completed,
            }
        })
        .collect();
    let gossip = host.membership().stats().await.unwrap_or_default();
    let c = host.hints().counters;
    let dropped = [
        (
            "GOSSIP",
            gossip.dropped_malformed
                + gossip.dropped_foreign_cluster
                + gossip.dropped_bad_auth
                + gossip.dropped_replay
                + gossip.swim_errors
                + gossip.metadata_rejected,
        ),
        (
            "HINT",
            c.dropped_over_cap
                + c.dropped_expired
                + c.dropped_outside_window
                + c.dropped_corrupt
                + c.dropped_keyspace
                + c.dropped_refused,
        ),
        ("MUTATION", metrics.expired_count(Expired::Mutation)),
        (
            "CLIENT_REQUEST",
            metrics.expired_count(Expired::ClientRequest),
        ),
    ]
    .into_iter()
    .map(|(message_type, dropped)| pb::DroppedMessages {
        message_type: message_type.to_string(),
        dropped,
    })
    .collect();
    Ok(pb::TpStatsResponse { stages, dropped })
}

/// The coordinator's read and write latency percentiles.
pub fn proxy_histograms(host: &Arc<impl MetricsHost>) -> pb::ProxyHistogramsResponse {
    let metrics = host.metrics();
    pb::ProxyHistogramsResponse {
        read: Some(percentiles(
            &metrics.coordinator_summary(CoordinatorOp::Read),
        )),
        write: Some(percentiles(
            &metrics.coordinator_summary(CoordinatorOp::Write),
        )),
    }
}

/// Each keyspace's (or only `keyspace`'s) size and local request numbers;
/// the sizes from the store's live counts. A `keyspace` named but not
/// held (unknown or dropped) is `NOT_FOUND`.
pub async fn table_stats(
    host: &Arc<impl MetricsHost>,
    keyspace: &str,
) -> Result<pb::TableStatsResponse> {
    let host = host.as_ref();
    // One size per keyspace that holds data (not dropped).
    let sizes = crate::metrics::keyspace_sizes(host);
    if !keyspace.is_empty() && !sizes.iter().any(|k| k.name == keyspace) {
        return Err(NodeError::KeyspaceNotFound(keyspace.to_string()));
    }
    let metrics = host.metrics();
    let keyspaces = sizes
        .into_iter()
        .filter(|k| keyspace.is_empty() || k.name == keyspace)
        .map(|k| pb::KeyspaceStats {
            reads: Some(percentiles(
                &metrics.keyspace_summary(&k.name, LocalOp::Read),
            )),
            writes: Some(percentiles(
                &metrics.keyspace_summary(&k.name, LocalOp::Write),
            )),
            name: k.name,
            keys: k.keys,
            bytes: k.bytes,
            tombstones: k.tombstones,
        })
        .collect();
    Ok(pb::TableStatsResponse { keyspaces })
}

/// A summary's wire form, in microseconds.
fn percentiles(summary: &LatencySummary) -> pb::LatencyPercentiles {
    let micros = |seconds: Option<f64>| seconds.map_or(0.0, |s| s * 1e6);
    pb::LatencyPercentiles {
        count: summary.count,
        p50_micros: micros(summary.percentile(0.50)),
        p75_micros: micros(summary.percentile(0.75)),
        p95_micros: micros(summary.percentile(0.95)),
        p98_micros: micros(summary.percentile(0.98)),
        p99_micros: micros(summary.percentile(0.99)),
        min_micros: micros(summary.min()),
        max_micros: micros(summary.max()),
        mean_micros: micros(summary.mean()),
    }
}
