//! The node's configuration: every setting, its default, and how a file,
//! environment variables and command-line flags combine.
//!
//! Precedence: flag > environment > file > default. All three sources are
//! merged as TOML tables before one typed deserialization, so every setting
//! can come from any source: `storage.durability` in the file is
//! `RINGSTORE_STORAGE__DURABILITY` in the environment (upper case, `__` for a
//! nested table; values are read as TOML when they parse, as text otherwise).
//! Unknown keys are errors, so a typo never passes silently.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ringstore_placement::Token;
use serde::Deserialize;

use crate::tls::{ClientEncryption, ServerEncryption};

/// Why the configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The merged settings do not parse.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// Everything a node needs to start. Defaults are those of a single local
/// node on 127.0.0.1 that starts a new cluster.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// The cluster's name. A node never joins a cluster of another name, and
    /// refuses a data directory created for another cluster.
    pub cluster_name: String,
    /// Where data, hints and the node record (`node.json`) live.
    pub data_dir: PathBuf,
    /// The client gRPC bind address (default port 7100/TCP).
    pub listen_address: SocketAddr,
    /// The internode gRPC bind address (default port 7101/TCP).
    pub internode_address: SocketAddr,
    /// The gossip bind address (default port 7000/UDP).
    pub gossip_address: SocketAddr,
    /// Whether the node serves `GET /metrics` (Prometheus) over HTTP.
    pub metrics_enabled: bool,
    /// The HTTP bind address of `GET /metrics`; unset: the client listen IP
    /// on port 7200/TCP.
    pub metrics_address: Option<SocketAddr>,
    /// Who may read `GET /metrics`, and over what (`[metrics_security]`).
    pub metrics_security: crate::metrics_http::security::MetricsSecurity,
    /// The client address others should use, if not the bind address (behind NAT, in docker).
    pub broadcast_client_address: Option<SocketAddr>,
    /// The internode address others should use, if not the bind address.
    pub broadcast_internode_address: Option<SocketAddr>,
    /// The gossip address others should use, if not the bind address.
    pub broadcast_gossip_address: Option<SocketAddr>,
    /// Gossip addresses to join through. Empty, or only this node: start a new cluster.
    pub seeds: Vec<SocketAddr>,
    /// This node's data center.
    pub dc: String,
    /// This node's rack.
    pub rack: String,
    /// Tokens (vnodes) for a node of weight 1, 1 to 1024. Chosen by the
    /// balanced allocator at first start unless `initial_token` is given.
    pub num_tokens: u32,
    /// This node's tokens, fixed by the operator; must number `num_tokens`.
    pub initial_token: Option<Vec<Token>>,
    /// The replication factor the balanced allocator balances for (in the
    /// node's DC), as Cassandra's `allocate_tokens_for_local_replication_factor`.
    pub allocate_tokens_for_local_replication_factor: u32,
    /// The cluster secret (at least 16 bytes): with it, gossip packets are
    /// authenticated (HMAC-SHA256) and internode calls must come from
    /// members (see `ringstore-internode-auth`). Without one, anyone who reaches the
    /// internode or gossip port can join the ring and change the schema and
    /// the data, so a node on a non-loopback address refuses to start
    /// without it unless `insecure` (see [`crate::security`]). Prefer
    /// `cluster_secret_file` or `RINGSTORE_CLUSTER_SECRET`: a flag shows in
    /// `ps`.
    pub cluster_secret: Option<SecretString>,
    /// A file holding the cluster secret (mode 0600): one per line, the
    /// first used to seal, every one accepted, so a secret is rotated
    /// without downtime; re-read by `ringstore reloadsecrets`. Excludes
    /// `cluster_secret`.
    pub cluster_secret_file: Option<PathBuf>,
    /// Start open on a non-loopback address without a cluster secret, on
    /// purpose (`--insecure`); logged loudly. Never in production.
    pub insecure: bool,
    /// TLS on the client port.
    pub client_encryption: ClientEncryption,
    /// TLS on internode gRPC.
    pub server_encryption: ServerEncryption,
    /// Storage settings.
    pub storage: StorageConfig,
    /// Request timeouts.
    pub timeouts: TimeoutConfig,
    /// The largest value accepted, in bytes (default 16 MiB).
    pub max_value_bytes: usize,
    /// How far ahead of this node's clock a client-supplied write timestamp
    /// may be, in seconds (default 300). Further is refused with
    /// `INVALID_ARGUMENT`: a timestamp from the future would win over every
    /// write and delete made until then.
    pub max_client_timestamp_skew_seconds: u64,
    /// The most this node's clock may be off from the majority of the live
    /// members, in milliseconds (default 500; as CockroachDB's
    /// `--max-offset`). Past it the node refuses to coordinate writes
    /// (`UNAVAILABLE`, naming its offset) until its clock is back: writes to
    /// one key further apart than this bound are ordered as they happened.
    /// Also how late a client write may be read after its client's deadline,
    /// or a replica write after its coordinator's, before it is refused
    /// ([`crate::deadline`]).
    pub max_clock_offset_ms: u64,
    /// For tests only: this node's wall clock reads this many milliseconds
    /// ahead of the system's (behind, if negative). Everything that reads
    /// the node's wall clock sees it (`RINGSTORE_TEST_CLOCK_OFFSET_MS`).
    /// Never set it in production.
    pub test_clock_offset_ms: i64,
    /// For tests only: answer `ReadMany` with `UNIMPLEMENTED`, as a node of a
    /// build from before it does, to test a rolling upgrade's mixed cluster
    /// (`RINGSTORE_TEST_WITHOUT_READ_MANY`). Never set it in production.
    pub test_without_read_many: bool,
    /// For tests only: answer `ApplyStream` with `UNIMPLEMENTED`, as a node
    /// of a build from before it does, to test a rolling upgrade's mixed
    /// cluster (`RINGSTORE_TEST_WITHOUT_APPLY_STREAM`). Never set it in
    /// production.
    pub test_without_apply_stream: bool,
    /// For tests only: stamp and apply client writes read after their
    /// client's deadline, as a build from before the check did, to show that
    /// the simulation and the process tests catch it
    /// (`RINGSTORE_TEST_IGNORE_CLIENT_DEADLINES`). Never set it in production.
    pub test_ignore_client_deadlines: bool,
    /// For tests only: send metadata digests this many seconds apart
    /// instead of every second (0 keeps the default), so that a test can
    /// show what a node learns without them
    /// (`RINGSTORE_TEST_METADATA_DIGEST_INTERVAL_SECONDS`). Never set it in
    /// production: a member's record then spreads only by pushes and pulls.
    pub test_metadata_digest_interval_seconds: u64,
    /// The most mutations one `Batch` request may carry (default 1,000).
    pub max_batch_mutations: usize,
    /// The most bytes of keys and values one `Batch` request may carry
    /// (default 16 MiB).
    pub max_batch_bytes: usize,
    /// How many of one batch's mutations are coordinated at once (default 32).
    pub batch_concurrency: usize,
    /// How long a fresh node watches gossip before choosing its tokens, so it
    /// sees the other nodes that are joining, and how long a node announcing
    /// a range movement waits before streaming, so every coordinator sends
    /// writes to the pending replicas (milliseconds).
    pub ring_delay_ms: u64,
    /// The failure-detection preset: `lan` (a dead node is seen down within
    /// about 10 s) or `relaxed` (three times as patient, for slow test machines).
    pub failure_detection: FailureDetection,
    /// Hinted handoff.
    pub hints: HintsConfig,
    /// The node-wide limit on the data it streams to others, in MiB/s (as
    /// Cassandra's `stream_throughput_outbound`; 0 = unthrottled; runtime:
    /// `setstreamthroughput`).
    pub stream_throughput_mib_per_sec: u64,
    /// Anti-entropy repair and tombstone garbage collection.
    pub repair: RepairConfig,
    /// Client authentication and authorization (`[auth]`).
    pub auth: crate::client_auth::config::AuthConfig,
    /// At a fresh node's first start: the dead node it replaces (its host id,
    /// or an IP address it used), whose tokens it takes over and whose data it
    /// streams from the surviving replicas.
    pub replace_address: Option<String>,
}

/// A setting that must never be shown: its `Debug` prints `SecretString(..)`,
/// so logging a whole configuration cannot leak it.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    /// The secret itself, for the code that uses it (never for display).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SecretString {
    fn from(secret: &str) -> SecretString {
        SecretString(secret.to_string())
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretString(..)")
    }
}

/// Hinted handoff settings, as Cassandra's.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HintsConfig {
    /// Whether this node stores hints for replicas it cannot reach (runtime:
    /// `disablehandoff` / `enablehandoff`).
    pub enabled: bool,
    /// No hints are stored for a replica seen down longer than this (seconds;
    /// 3 h). Past it, the replica needs a repair.
    pub max_hint_window_seconds: u64,
    /// Replay rate per node, in KiB/s (runtime-adjustable); 0 is unthrottled.
    pub hinted_handoff_throttle_kib: u64,
    /// The most hint bytes kept per target; past it the oldest are dropped.
    pub max_hint_bytes_per_target: u64,
    /// A hint older than its keyspace's `gc_grace_seconds` is never replayed:
    /// it could bring back data deleted since. This is the limit for hints of
    /// a keyspace this node's schema does not know (seconds; 10 days).
    pub gc_grace_seconds: u64,
}

impl Default for HintsConfig {
    fn default() -> Self {
        HintsConfig {
            enabled: true,
            max_hint_window_seconds: 3 * 3600,
            hinted_handoff_throttle_kib: 1024,
            max_hint_bytes_per_target: 1 << 30,
            gc_grace_seconds: 864_000,
        }
    }
}

/// Repair and garbage-collection settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RepairConfig {
    /// `off`, or `continuous`: the node repairs the ranges it is the primary
    /// replica of, each once per `interval_seconds`, one at a time.
    pub schedule: RepairSchedule,
    /// How often the scheduler repairs each range (seconds; 3 days, well
    /// under the default `gc_grace_seconds` of 10 days).
    pub interval_seconds: u64,
    /// When tombstones and expired cells may be purged: `repair` (after
    /// `gc_grace_seconds` and a successful repair that began after the
    /// deletion; the default), `timeout` (after `gc_grace_seconds`, as
    /// Cassandra) or `disabled`.
    pub tombstone_gc: ringstore_repair::TombstoneGc,
    /// With `tombstone_gc = "repair"`: how long after a deletion a repair
    /// must begin to let it be purged, covering writes still in flight
    /// (seconds; 1 hour, as ScyllaDB's `propagation_delay_in_seconds`).
    pub propagation_delay_seconds: u64,
    /// Seconds between background garbage-collection passes over this
    /// node's data (1 hour; 0 = only on `garbagecollect`).
    pub gc_interval_seconds: u64,
    /// Seconds between this node's automatic Paxos repairs (1 hour; 0 =
    /// only on `repair --paxos-only`): in every keyspace that holds
    /// compare-and-set state, unfinished proposals are finished and the
    /// state older than a new floor is purged, as Cassandra 4.1 repairs
    /// Paxos on its own.
    pub paxos_repair_interval_seconds: u64,
    /// The rate at which building repair trees reads this node's data, in
    /// MiB/s (as Cassandra's validation under `compaction_throughput`;
    /// 0 = unthrottled), so that repair leaves client requests room.
    pub validation_mib_per_sec: u64,
}

impl Default for RepairConfig {
    fn default() -> Self {
        RepairConfig {
            schedule: RepairSchedule::Off,
            interval_seconds: 3 * 24 * 3600,
            tombstone_gc: ringstore_repair::TombstoneGc::Repair,
            propagation_delay_seconds: 3600,
            gc_interval_seconds: 3600,
            paxos_repair_interval_seconds: 3600,
            validation_mib_per_sec: 16,
        }
    }
}

/// Whether the node repairs on its own.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RepairSchedule {
    /// Only `ringstore repair` repairs.
    Off,
    /// The built-in scheduler repairs continuously.
    Continuous,
}

impl RepairSchedule {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            RepairSchedule::Off => "off",
            RepairSchedule::Continuous => "continuous",
        }
    }
}

/// How writes are made durable.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DurabilityMode {
    /// A write is acknowledged only after the storage has synced it to disk;
    /// concurrent writes share one sync (group commit). Nothing acknowledged
    /// is lost on a crash.
    Batch,
    /// Writes are acknowledged at once and synced every `periodic_sync_ms`: a
    /// process crash can lose the acknowledged writes of the last period.
    Periodic,
}

/// What the node does once its storage has failed (see [`crate::disk_failure`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DiskFailurePolicy {
    /// Stop writes and gossip; keep the process up.
    #[default]
    Stop,
    /// Stop the process (with an error, so a supervisor restarts it).
    Die,
    /// Log it and keep serving.
    Ignore,
}

/// Storage settings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// sled's page cache, in MiB (sled may use several times this in RAM).
    pub cache_capacity_mb: u64,
    /// How writes are made durable.
    pub durability: DurabilityMode,
    /// The sync period in `periodic` mode, in milliseconds.
    pub periodic_sync_ms: u64,
    /// In `batch` mode, acknowledge a write once ringstore's own commit log
    /// (`<data_dir>/commitlog`) has it on disk, and flush sled only at
    /// checkpoints; `false` flushes sled before every acknowledgement
    /// instead (slower; for comparison). Either way nothing acknowledged is
    /// lost on a crash.
    pub commit_log: bool,
    /// The shortest time between two commit log syncs, in microseconds (0:
    /// sync as soon as the previous sync ends). Fewer, larger syncs for a
    /// wait of up to this per write.
    pub commit_log_sync_window_us: u64,
    /// What the node does once its storage has failed for good (a full
    /// disk): `stop` writes and gossip, `die`, or `ignore`.
    pub disk_failure_policy: DiskFailurePolicy,
}

/// Request timeouts, in milliseconds, as Cassandra's.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// How long a coordinator waits for write acknowledgements.
    pub write_ms: u64,
    /// How long a coordinator waits for read responses.
    pub read_ms: u64,
    /// How long a schema change waits for every live node to apply it.
    pub schema_ms: u64,
}

/// The failure-detection preset.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FailureDetection {
    /// Down within about 10 s.
    Lan,
    /// Three times as patient.
    Relaxed,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            cluster_name: "ringstore".into(),
            data_dir: PathBuf::from("./data"),
            listen_address: SocketAddr::from(([127, 0, 0, 1], 7100)),
            internode_address: SocketAddr::from(([127, 0, 0, 1], 7101)),
            gossip_address: SocketAddr::from(([127, 0, 0, 1], 7000)),
            metrics_enabled: true,
            metrics_address: None,
            metrics_security: Default::default(),
            broadcast_client_address: None,
            broadcast_internode_address: None,
            broadcast_gossip_address: None,
            seeds: Vec::new(),
            dc: "dc1".into(),
            rack: "rack1".into(),
            num_tokens: 16,
            initial_token: None,
            allocate_tokens_for_local_replication_factor: 3,
            cluster_secret: None,
            cluster_secret_file: None,
            insecure: false,
            client_encryption: ClientEncryption::default(),
            server_encryption: ServerEncryption::default(),
            storage: StorageConfig::default(),
            timeouts: TimeoutConfig::default(),
            max_value_bytes: 16 * 1024 * 1024,
            max_client_timestamp_skew_seconds: 300,
            max_clock_offset_ms: 500,
            test_clock_offset_ms: 0,
            test_without_read_many: false,
            test_without_apply_stream: false,
            test_ignore_client_deadlines: false,
            test_metadata_digest_interval_seconds: 0,
            max_batch_mutations: 1000,
            max_batch_bytes: 16 * 1024 * 1024,
            batch_concurrency: 32,
            ring_delay_ms: 3000,
            failure_detection: FailureDetection::Lan,
            hints: HintsConfig::default(),
            stream_throughput_mib_per_sec: 24,
            repair: RepairConfig::default(),
            auth: crate::client_auth::config::AuthConfig::default(),
            replace_address: None,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            cache_capacity_mb: 256,
            durability: DurabilityMode::Batch,
            periodic_sync_ms: 500,
            commit_log: true,
            commit_log_sync_window_us: 0,
            disk_failure_policy: DiskFailurePolicy::Stop,
        }
    }
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        TimeoutConfig {
            write_ms: 2000,
            read_ms: 5000,
            schema_ms: 10_000,
        }
    }
}

/// The default port of `GET /metrics` (HTTP).
pub const DEFAULT_METRICS_PORT: u16 = 7200;

/// The environment-variable prefix of settings.
pub const ENV_PREFIX: &str = "RINGSTORE_";

/// Variables with the prefix that are the CLI's (its node, its timeout,
/// its credentials), not node settings: a node ignores them, so a shell
/// that exports them for the CLI can still start a node.
pub const CLIENT_ENV_VARS: [&str; 5] = [
    "RINGSTORE_HOST",
    "RINGSTORE_REQUEST_TIMEOUT",
    "RINGSTORE_USER",
    "RINGSTORE_PASSWORD",
    "RINGSTORE_NEW_PASSWORD",
];

impl NodeConfig {
    /// Merges defaults, the file (if any), the `RINGSTORE_*` variables of
    /// `env` and the flag values (`dotted.key` → TOML value), in that
    /// order of increasing precedence, and checks the result.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: impl IntoIterator<Item = (String, toml::Value)>,
    ) -> Result<NodeConfig, ConfigError> {
        let mut table = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Invalid(format!("{}: {e}", path.display())))?
            }
            None => toml::Table::new(),
        };
        for (name, value) in env {
            if CLIENT_ENV_VARS.contains(&name.as_str()) {
                continue;
            }
            let Some(key) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let key = key.to_lowercase().replace("__", ".");
            set(&mut table, &key, parse_env_value(&key, &value));
        }
        for (key, value) in flags {
            set(&mut table, &key, value);
        }
        let config: NodeConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_string()))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |m: String| Err(ConfigError::Invalid(m));
        if self.cluster_name.trim().is_empty() {
            return invalid("cluster_name must not be empty".into());
        }
        if !(1..=1024).contains(&self.num_tokens) {
            return invalid(format!(
                "num_tokens must be 1 to 1024, not {}",
                self.num_tokens
            ));
        }
        if let Some(tokens) = &self.initial_token {
            if tokens.len() != self.num_tokens as usize {
                return invalid(format!(
                    "initial_token lists {} tokens but num_tokens is {}",
                    tokens.len(),
                    self.num_tokens
                ));
            }
            let mut sorted = tokens.clone();
            sorted.sort_unstable();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return invalid("initial_token lists a token twice".into());
            }
        }
        if self.allocate_tokens_for_local_replication_factor == 0 {
            return invalid(
                "allocate_tokens_for_local_replication_factor must be at least 1".into(),
            );
        }
        for (name, bind, broadcast) in [
            (
                "listen_address",
                self.listen_address,
                self.broadcast_client_address,
            ),
            (
                "internode_address",
                self.internode_address,
                self.broadcast_internode_address,
            ),
            (
                "gossip_address",
                self.gossip_address,
                self.broadcast_gossip_address,
            ),
        ] {
            if bind.ip().is_unspecified() && broadcast.is_none() {
                return invalid(format!(
                    "{name} {bind} binds every interface: set its broadcast address"
                ));
            }
        }
        self.client_encryption
            .check()
            .map_err(ConfigError::Invalid)?;
        self.server_encryption
            .check()
            .map_err(ConfigError::Invalid)?;
        if self.max_value_bytes == 0 {
            return invalid("max_value_bytes must be positive".into());
        }
        if self.max_batch_mutations == 0 || self.max_batch_bytes == 0 {
            return invalid("max_batch_mutations and max_batch_bytes must be positive".into());
        }
        if self.max_clock_offset_ms == 0 {
            return invalid("max_clock_offset_ms must be positive".into());
        }
        self.auth
            .check(self.listen_address, self.client_encryption.enabled)
            .map_err(ConfigError::Invalid)?;
        let client = &self.client_encryption;
        self.metrics_security
            .check(
                self.metrics_bind_address(),
                self.client_port_secured(),
                client.certificate.is_some() && client.private_key.is_some(),
            )
            .map_err(ConfigError::Invalid)?;
        if self.batch_concurrency == 0 {
            return invalid("batch_concurrency must be positive".into());
        }
        if self.timeouts.write_ms == 0 || self.timeouts.read_ms == 0 || self.timeouts.schema_ms == 0
        {
            return invalid("timeouts must be positive".into());
        }
        Ok(())
    }

    /// Where `GET /metrics` listens, or `None` when it is disabled: the
    /// configured address, else the client listen IP on port 7200.
    pub fn metrics_bind_address(&self) -> Option<SocketAddr> {
        self.metrics_enabled.then(|| {
            self.metrics_address.unwrap_or(SocketAddr::new(
                self.listen_address.ip(),
                DEFAULT_METRICS_PORT,
            ))
        })
    }

    /// Whether the client port asks for TLS or passwords (so `/metrics`
    /// must not be open to a network either).
    pub fn client_port_secured(&self) -> bool {
        self.client_encryption.enabled
            || self.auth.authenticator == crate::client_auth::config::Authenticator::Password
    }

    /// The client address other nodes and clients use.
    pub fn advertised_client_address(&self) -> SocketAddr {
        self.broadcast_client_address.unwrap_or(self.listen_address)
    }

    /// The internode address other nodes use.
    pub fn advertised_internode_address(&self) -> SocketAddr {
        self.broadcast_internode_address
            .unwrap_or(self.internode_address)
    }

    /// The gossip address other nodes use.
    pub fn advertised_gossip_address(&self) -> SocketAddr {
        self.broadcast_gossip_address.unwrap_or(self.gossip_address)
    }
}

/// An environment value as TOML, except for keys that are always text and
/// lists of addresses or tokens, which may be written bare and comma-separated.
fn parse_env_value(key: &str, value: &str) -> toml::Value {
    const LISTS: [&str; 2] = ["seeds", "initial_token"];
    if LISTS.contains(&key) && !value.trim_start().starts_with('[') {
        let items = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|item| match item.parse::<i64>() {
                Ok(n) => toml::Value::Integer(n),
                Err(_) => toml::Value::String(item.to_string()),
            })
            .collect();
        return toml::Value::Array(items);
    }
    let text_keys = [
        "cluster_name",
        "dc",
        "rack",
        "cluster_secret",
        "cluster_secret_file",
        "data_dir",
    ];
    if text_keys.contains(&key) {
        return toml::Value::String(value.to_string());
    }
    format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()))
}

/// Sets `dotted.key` in `table`, creating nested tables.
fn set(table: &mut toml::Table, key: &str, value: toml::Value) {
    match key.split_once('.') {
        None => {
            table.insert(key.to_string(), value);
        }
        Some((head, rest)) => {
            let entry = table
                .entry(head.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if !entry.is_table() {
                *entry = toml::Value::Table(toml::Table::new());
            }
            set(entry.as_table_mut().expect("a table"), rest, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_describe_a_local_single_node() {
        let config = NodeConfig::load(None, [], []).unwrap();
        assert_eq!(config, NodeConfig::default());
        assert_eq!(config.listen_address.port(), 7100);
        assert_eq!(config.storage.durability, DurabilityMode::Batch);
        assert_eq!(
            config.metrics_bind_address(),
            Some(SocketAddr::from(([127, 0, 0, 1], 7200)))
        );
    }

    #[test]
    fn the_metrics_endpoint_follows_the_listen_ip_unless_set_or_disabled() {
        let config = NodeConfig::load(
            None,
            env(&[("RINGSTORE_LISTEN_ADDRESS", "127.0.0.7:7100")]),
            [],
        )
        .unwrap();
        assert_eq!(
            config.metrics_bind_address(),
            Some(SocketAddr::from(([127, 0, 0, 7], 7200)))
        );
        let set = NodeConfig::load(
            None,
            env(&[("RINGSTORE_METRICS_ADDRESS", "127.0.0.8:9100")]),
            [],
        )
        .unwrap();
        assert_eq!(
            set.metrics_bind_address(),
            Some(SocketAddr::from(([127, 0, 0, 8], 9100)))
        );
        let off =
            NodeConfig::load(None, env(&[("RINGSTORE_METRICS_ENABLED", "false")]), []).unwrap();
        assert_eq!(off.metrics_bind_address(), None);
    }

    #[test]
    fn the_sample_config_file_parses_to_the_defaults() {
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/ringstore.toml");
        assert_eq!(
            NodeConfig::load(Some(&sample), [], []).unwrap(),
            NodeConfig::default()
        );
    }

    #[test]
    fn flags_beat_environment_which_beats_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ringstore.toml");
        std::fs::write(
            &file,
            "cluster_name = \"from-file\"\ndc = \"file-dc\"\nrack = \"file-rack\"\n[storage]\ndurability = \"periodic\"\n",
        )
        .unwrap();
        let config = NodeConfig::load(
            Some(&file),
            env(&[
                ("RINGSTORE_DC", "env-dc"),
                ("RINGSTORE_RACK", "env-rack"),
                ("RINGSTORE_STORAGE__PERIODIC_SYNC_MS", "250"),
                ("RINGSTORE_SEEDS", "127.0.0.11:7000,127.0.0.12:7000"),
                ("HOME", "/root"),
            ]),
            [("rack".to_string(), toml::Value::String("flag-rack".into()))],
        )
        .unwrap();
        assert_eq!(config.cluster_name, "from-file");
        assert_eq!(config.dc, "env-dc");
        assert_eq!(config.rack, "flag-rack");
        assert_eq!(config.storage.durability, DurabilityMode::Periodic);
        assert_eq!(config.storage.periodic_sync_ms, 250);
        assert_eq!(config.seeds.len(), 2);
    }

    #[test]
    fn the_cluster_secret_never_shows_in_debug_output() {
        let config =
            NodeConfig::load(None, env(&[("RINGSTORE_CLUSTER_SECRET", "hunter2")]), []).unwrap();
        assert_eq!(config.cluster_secret.as_ref().unwrap().expose(), "hunter2");
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn negative_initial_tokens_parse_from_the_environment() {
        let config = NodeConfig::load(
            None,
            env(&[
                ("RINGSTORE_NUM_TOKENS", "2"),
                ("RINGSTORE_INITIAL_TOKEN", "-9000,42"),
            ]),
            [],
        )
        .unwrap();
        assert_eq!(config.initial_token, Some(vec![Token(-9000), Token(42)]));
    }

    #[test]
    fn the_clis_variables_are_not_node_settings() {
        let config = NodeConfig::load(
            None,
            env(&[
                ("RINGSTORE_HOST", "127.0.0.12:7100"),
                ("RINGSTORE_REQUEST_TIMEOUT", "3"),
                ("RINGSTORE_USER", "alice"),
            ]),
            [],
        )
        .unwrap();
        assert_eq!(config.listen_address, NodeConfig::default().listen_address);
    }

    #[test]
    fn mistakes_are_clear_errors() {
        let unknown = NodeConfig::load(None, env(&[("RINGSTORE_NUM_TOKEN", "3")]), []).unwrap_err();
        assert!(unknown.to_string().contains("num_token"), "{unknown}");
        let count = NodeConfig::load(
            None,
            env(&[
                ("RINGSTORE_NUM_TOKENS", "3"),
                ("RINGSTORE_INITIAL_TOKEN", "1,2"),
            ]),
            [],
        )
        .unwrap_err();
        assert!(
            count.to_string().contains("initial_token lists 2 tokens"),
            "{count}"
        );
        let unspecified = NodeConfig::load(
            None,
            env(&[("RINGSTORE_LISTEN_ADDRESS", "0.0.0.0:7100")]),
            [],
        )
        .unwrap_err();
        assert!(
            unspecified.to_string().contains("broadcast"),
            "{unspecified}"
        );
        let no_ca = NodeConfig::load(
            None,
            env(&[
                ("RINGSTORE_SERVER_ENCRYPTION__INTERNODE_ENCRYPTION", "all"),
                ("RINGSTORE_SERVER_ENCRYPTION__CERTIFICATE", "/n.crt"),
                ("RINGSTORE_SERVER_ENCRYPTION__PRIVATE_KEY", "/n.key"),
            ]),
            [],
        )
        .unwrap_err();
        assert!(
            no_ca
                .to_string()
                .contains("server_encryption.ca is required"),
            "{no_ca}"
        );
        let mode = NodeConfig::load(
            None,
            env(&[("RINGSTORE_SERVER_ENCRYPTION__INTERNODE_ENCRYPTION", "dc")]),
            [],
        )
        .unwrap_err();
        assert!(mode.to_string().contains("unknown variant"), "{mode}");
        let missing =
            NodeConfig::load(Some(Path::new("/nonexistent/ringstore.toml")), [], []).unwrap_err();
        assert!(matches!(missing, ConfigError::Read { .. }));
    }
}
