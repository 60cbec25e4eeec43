//! The JSON the console's API answers, one type per endpoint (see the
//! module docs of [`crate::console`] for the endpoints). Field names carry
//! their unit; tokens are decimal strings (a JSON number would be rounded
//! by JavaScript and `jq`).

use serde::Serialize;

/// The two letters `ringstore status` prints for a node: `U`p or `D`own,
/// then `N`ormal, `J`oining or `L`eaving (`LEFT` counts as leaving) from
/// its gossiped state name (`NORMAL`, `JOINING`, …).
pub fn status_letters(up: bool, state: &str) -> String {
    let status = if up { 'U' } else { 'D' };
    let state = match state {
        "JOINING" => 'J',
        "LEAVING" | "LEFT" => 'L',
        _ => 'N',
    };
    format!("{status}{state}")
}

/// `GET /api/v1/`: what can be asked.
#[derive(Clone, Debug, Serialize)]
pub struct EndpointList {
    /// Every endpoint's path, with what it answers.
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint of the API.
#[derive(Clone, Debug, Serialize)]
pub struct Endpoint {
    /// Its path (`/api/v1/nodes`).
    pub path: &'static str,
    /// What it answers, in a line.
    pub describes: &'static str,
}

/// `GET /api/v1/node`: the node serving the console.
#[derive(Clone, Debug, Serialize)]
pub struct NodeView {
    /// Its host id (a UUID).
    pub host_id: String,
    /// The cluster's name.
    pub cluster_name: String,
    /// Its data center.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Its gossiped state: `NORMAL`, `JOINING`, `LEAVING`.
    pub state: String,
    /// Seconds since the process started.
    pub uptime_seconds: u64,
    /// Live data it stores, in bytes.
    pub load_bytes: u64,
    /// Its software version.
    pub software_version: String,
    /// The schema version it holds.
    pub schema_version: String,
    /// Hints it holds for other nodes.
    pub hints_pending: u64,
    /// Its clock minus its live peers' (their median), in milliseconds.
    pub clock_offset_ms: Option<f64>,
    /// Whether that offset is beyond `max_clock_offset` (it then refuses
    /// to coordinate writes).
    pub clock_skewed: bool,
    /// Why its storage stopped, when it did (else empty).
    pub storage_failure: String,
}

/// `GET /api/v1/nodes`: every member, as `ringstore status` lists them.
#[derive(Clone, Debug, Serialize)]
pub struct NodesView {
    /// The ring's epoch in this node's view.
    pub ring_epoch: u64,
    /// The ring's checksum (equal on nodes that agree on the ring).
    pub ring_checksum: u64,
    /// The members, by data center then address; none that left or was
    /// removed.
    pub nodes: Vec<NodeRow>,
}

/// One member in [`NodesView`].
#[derive(Clone, Debug, Serialize)]
pub struct NodeRow {
    /// Its host id (a UUID).
    pub host_id: String,
    /// Its client address (`host:port`).
    pub address: String,
    /// The letters `ringstore status` prints: `UN`, `DN`, `UJ`, `UL`, …
    pub status: String,
    /// Whether this node's failure detector has it up.
    pub up: bool,
    /// Its gossiped state: `NORMAL`, `JOINING`, `LEAVING`.
    pub state: String,
    /// Its data center.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Live data it stores, in bytes, as it last gossiped.
    pub load_bytes: u64,
    /// Its tokens (vnodes).
    pub tokens: u32,
    /// Its primary ownership of the token space, 0 to 1.
    pub ownership: f64,
    /// Its clock minus this node's, in milliseconds, as gossip estimates
    /// it (none: not measured yet).
    pub clock_offset_ms: Option<f64>,
    /// The uncertainty of that estimate, in milliseconds.
    pub clock_uncertainty_ms: Option<f64>,
    /// Its software version.
    pub version: String,
    /// The schema version it gossips.
    pub schema_version: String,
    /// Whether it is the node serving the console.
    pub local: bool,
}

/// `GET /api/v1/ring`: the token ranges of the ring and their owners.
#[derive(Clone, Debug, Serialize)]
pub struct RingView {
    /// The ring's epoch in this node's view.
    pub epoch: u64,
    /// The ring's checksum.
    pub checksum: u64,
    /// One range per token, in token order; together they cover the
    /// ring once (empty before the first node took tokens).
    pub ranges: Vec<RangeArc>,
    /// The hosts owning ranges, in host id order.
    pub owners: Vec<RingOwner>,
}

/// One token range `(start_token, end_token]` and its primary owner.
#[derive(Clone, Debug, Serialize)]
pub struct RangeArc {
    /// The token before the range (exclusive), a decimal string.
    pub start_token: String,
    /// The range's last token (inclusive), which its owner holds.
    pub end_token: String,
    /// Where the range starts, as a fraction of the ring from its lowest
    /// token (`-2^63`), 0 to 1; the range ends at `start_fraction +
    /// fraction`, past 1 when it wraps.
    pub start_fraction: f64,
    /// Its share of the token space, 0 to 1.
    pub fraction: f64,
    /// The host id of its primary owner.
    pub owner: String,
}

/// A host owning ranges in [`RingView`].
#[derive(Clone, Debug, Serialize)]
pub struct RingOwner {
    /// Its host id.
    pub host_id: String,
    /// Its client address, when this node's gossip knows it.
    pub address: Option<String>,
    /// Its data center.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Its tokens on the ring.
    pub token_count: usize,
    /// Its primary ownership, 0 to 1.
    pub ownership: f64,
}

/// `GET /api/v1/streams`: this node's stream sessions.
#[derive(Clone, Debug, Serialize)]
pub struct StreamsView {
    /// This node's mode (`NORMAL`, `JOINING`, `LEAVING`).
    pub mode: String,
    /// The node-wide stream throttle in MiB/s (0: unthrottled).
    pub stream_throughput_mib_per_sec: u64,
    /// Running sessions and the last finished ones, oldest first.
    pub streams: Vec<StreamRow>,
}

/// One stream session in [`StreamsView`].
#[derive(Clone, Debug, Serialize)]
pub struct StreamRow {
    /// What it is for: `bootstrap`, `decommission`, `repair <id>`, …
    pub operation: String,
    /// `receiving` (this node pulls) or `sending` (the peer pulls).
    pub direction: String,
    /// The peer's host id.
    pub peer_host_id: String,
    /// The peer's client address, when known (else empty).
    pub peer_address: String,
    /// The keyspace streamed.
    pub keyspace: String,
    /// Ranges completed.
    pub ranges_done: u32,
    /// Ranges it covers.
    pub ranges_total: u32,
    /// Bytes moved so far.
    pub bytes_done: u64,
    /// Bytes it is expected to move (an estimate until it is done).
    pub bytes_total: u64,
    /// Bytes per second over the last few seconds.
    pub bytes_per_second: f64,
    /// `bytes_done / bytes_total`, 0 to 1 (1 once done).
    pub progress: f64,
    /// Seconds left at the current rate, while running with a known rate.
    pub eta_seconds: Option<f64>,
    /// `running`, `done` or `failed: <reason>`.
    pub state: String,
}

/// `GET /api/v1/repair`: the repair schedule and what it has covered.
#[derive(Clone, Debug, Serialize)]
pub struct RepairView {
    /// The scheduler's mode: `off` or `continuous`.
    pub schedule: String,
    /// The scheduler's interval, in seconds.
    pub schedule_interval_seconds: u64,
    /// When tombstones may be purged: `repair`, `timeout` or `disabled`.
    pub tombstone_gc: String,
    /// The job running, or the last one run since this node started.
    pub current: Option<RepairJob>,
    /// Every range the scheduler covers on this node.
    pub ranges: Vec<RepairRange>,
}

/// A repair job in [`RepairView`].
#[derive(Clone, Debug, Serialize)]
pub struct RepairJob {
    /// Its id.
    pub id: String,
    /// `running`, `finished` or `failed`.
    pub state: String,
    /// Ranges repaired.
    pub ranges_done: u32,
    /// Ranges that failed.
    pub ranges_failed: u32,
    /// Ranges it covers.
    pub ranges_total: u32,
    /// Seconds left, estimated, while it runs.
    pub eta_seconds: Option<f64>,
    /// Whether it only compares (repairs nothing).
    pub dry_run: bool,
}

/// One scheduled range in [`RepairView`].
#[derive(Clone, Debug, Serialize)]
pub struct RepairRange {
    /// Its keyspace.
    pub keyspace: String,
    /// The token before the range (exclusive), a decimal string.
    pub start_token: String,
    /// Its last token (inclusive), a decimal string.
    pub end_token: String,
    /// Seconds since it was last repaired by this node's clock (none:
    /// never).
    pub seconds_since_repair: Option<f64>,
    /// Whether its last repair is older than its keyspace's gc grace.
    pub overdue: bool,
}

/// `GET /api/v1/hints`: the hints this node holds.
#[derive(Clone, Debug, Serialize)]
pub struct HintsView {
    /// Whether hints are stored at all.
    pub enabled: bool,
    /// Whether their delivery is paused.
    pub paused: bool,
    /// The delivery throttle, in KiB/s per target (0: unthrottled).
    pub throttle_kib: u64,
    /// Hints stored since the node started.
    pub stored: u64,
    /// Hints delivered since the node started.
    pub replayed: u64,
    /// Hints pending, per target, in host id order.
    pub targets: Vec<HintTarget>,
}

/// The hints pending for one target in [`HintsView`].
#[derive(Clone, Debug, Serialize)]
pub struct HintTarget {
    /// The target's host id.
    pub host_id: String,
    /// Its client address, when gossip still knows it (else empty).
    pub address: String,
    /// Hints pending for it.
    pub hints: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// `GET /api/v1/traffic`: coordinated requests over the last minutes.
#[derive(Clone, Debug, Serialize)]
pub struct TrafficView {
    /// How often a sample is taken, in seconds.
    pub sample_every_seconds: f64,
    /// How many intervals are kept at most.
    pub kept_intervals: usize,
    /// One point per interval, oldest first.
    pub points: Vec<TrafficPoint>,
}

/// The requests this node coordinated over one interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrafficPoint {
    /// How long ago the interval ended, in seconds.
    pub seconds_ago: f64,
    /// The interval's length, in seconds.
    pub interval_seconds: f64,
    /// Reads of one key per second.
    pub reads_per_second: f64,
    /// Writes of one key per second.
    pub writes_per_second: f64,
    /// The reads' median latency, in milliseconds (none: no reads).
    pub read_p50_ms: Option<f64>,
    /// The reads' 99th percentile, in milliseconds.
    pub read_p99_ms: Option<f64>,
    /// The writes' median latency, in milliseconds (none: no writes).
    pub write_p50_ms: Option<f64>,
    /// The writes' 99th percentile, in milliseconds.
    pub write_p99_ms: Option<f64>,
}

/// The body of every error answer.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_letters_are_those_of_status() {
        assert_eq!(status_letters(true, "NORMAL"), "UN");
        assert_eq!(status_letters(false, "NORMAL"), "DN");
        assert_eq!(status_letters(true, "JOINING"), "UJ");
        assert_eq!(status_letters(false, "LEAVING"), "DL");
        assert_eq!(status_letters(true, "LEFT"), "UL");
        assert_eq!(status_letters(true, ""), "UN");
    }
}
