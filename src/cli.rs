//! The command line: every subcommand and its arguments (clap derive).

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use ringstore_placement::HostId;
use ringstore_replication::ConsistencyLevel;

/// Where the CLI looks for a node when neither `--host` nor `RINGSTORE_HOST`
/// says: the loopback address and client port that `ringstore server` binds
/// by default (`NodeConfig::default().listen_address`).
///
/// Why not the demo's first node (127.0.0.11:7100) instead: a single
/// `ringstore server` on defaults and `deploy/docker-compose.yml` (which
/// publishes node 1 on 127.0.0.1:7100) would then need `--host`, and the
/// demo is the one place that can easily meet the CLI where it looks. So the
/// demo passes connections to this address through to its first node
/// (`demo --cli-address`), and every way of running a node on one machine
/// answers `ringstore status` without flags.
pub const DEFAULT_HOST: &str = "127.0.0.1:7100";

/// ringstore: a Dynamo/Cassandra-style replicated key-value store.
#[derive(Debug, Parser)]
#[command(name = "ringstore", version, about, propagate_version = true)]
pub struct Cli {
    /// The node to talk to: its client address, an IP or a host name with
    /// the port (for every command but `server`, `token` and `demo`). The
    /// default is where `ringstore server` listens without settings, where
    /// the compose files publish node 1, and where `ringstore demo`
    /// accepts clients for its first node.
    #[arg(
        long,
        global = true,
        env = "RINGSTORE_HOST",
        default_value = DEFAULT_HOST,
        value_name = "HOST:PORT",
        value_parser = whole(parse_host_port)
    )]
    pub host: String,

    /// Connect over TLS, trusting this CA certificate (PEM) for the node's
    /// certificate, which must name the address connected to.
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// A client certificate (PEM) for nodes that require one (mutual TLS;
    /// with --client-key and --ca-cert).
    #[arg(long, global = true, value_name = "FILE", requires_all = ["client_key", "ca_cert"])]
    pub client_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM).
    #[arg(long, global = true, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,

    /// The user to log in as, on nodes with `authenticator = "password"`
    /// (every command but `server`, `token`, `demo` and `certs`).
    #[arg(long, global = true, env = "RINGSTORE_USER", value_name = "NAME")]
    pub user: Option<String>,

    /// The user's password. Prefer the environment variable, which keeps
    /// it out of the process list and the shell history.
    #[arg(
        long,
        global = true,
        env = "RINGSTORE_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD",
        requires = "user"
    )]
    pub password: Option<String>,

    /// How long a data command (put, get, delete, batch, scan) waits for
    /// each node's answer before it gives up on that node. The node is told
    /// too: a write it reads after then is refused, not applied late.
    #[arg(
        long,
        global = true,
        env = "RINGSTORE_REQUEST_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 12.0,
        value_parser = whole(parse_request_timeout)
    )]
    pub request_timeout: f64,

    /// How log lines are written to stderr: `text` for people, `json` (one
    /// object per line) for log collectors.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The format of log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (the default).
    Text,
    /// One JSON object per line: timestamp, level, target, message and fields.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node.
    Server(Box<ServerArgs>),
    /// Each node's state, load, tokens and ownership, per data center (as `nodetool status`).
    Status(StatusArgs),
    /// Every ring token with its owner, per data center (as `nodetool ring`).
    Ring,
    /// The node itself (as `nodetool info`).
    Info(InfoArgs),
    /// The node's software version (as `nodetool version`).
    Version,
    /// Syncs everything the node has written to disk (as `nodetool flush`;
    /// in `periodic` durability, what the next sync would have made durable).
    Flush,
    /// Refuses writes, syncs storage and stops gossip, so the node can be
    /// stopped for maintenance (as `nodetool drain`). Only a restart undoes it.
    Drain,
    /// Re-reads the node's cluster secret file and TLS files: one step of a
    /// rotation without restarts (see the book's Security chapter,
    /// `docs/src/security.md`).
    Reloadsecrets,
    /// Copies the node's cells of a keyspace (or of all), at one point in
    /// time, into DATA_DIR/snapshots/TAG/ (as `nodetool snapshot`).
    Snapshot(SnapshotArgs),
    /// Every snapshot on the node (as `nodetool listsnapshots`).
    Listsnapshots,
    /// Removes one snapshot (`-t TAG`) or all of them (`--all`), as
    /// `nodetool clearsnapshot`.
    Clearsnapshot(ClearSnapshotArgs),
    /// Applies the snapshot in the node's DATA_DIR/snapshots/TAG/ to its
    /// keyspaces of the same names, last write winning (as `nodetool
    /// refresh`); see the restore steps in `docs/src/operations/backups.md`.
    Restore(RestoreArgs),
    /// Work in flight and completed per stage, and dropped messages (as
    /// `nodetool tpstats`).
    Tpstats,
    /// The coordinator's read and write latency percentiles (as `nodetool
    /// proxyhistograms`).
    Proxyhistograms,
    /// Keys, bytes, tombstones and local read/write counts and latency per
    /// keyspace on this node (as `nodetool tablestats`).
    Tablestats(TablestatsArgs),
    /// Samples this node's local reads and writes of a keyspace for a while
    /// and lists the keys it saw most, with each count's margin of error
    /// (as `nodetool toppartitions`).
    Toppartitions(TopPartitionsArgs),
    /// The cluster's name, schema versions per node, node counts, data
    /// centers, releases and keyspaces (as `nodetool describecluster`).
    Describecluster,
    /// What gossip says of every member (as `nodetool gossipinfo`).
    Gossipinfo,
    /// Sets the log level of one module path, or of everything, at runtime
    /// (as `nodetool setlogginglevel`).
    Setlogginglevel(SetLoggingLevelArgs),
    /// The log filter in force (as `nodetool getlogginglevels`).
    Getlogginglevels,
    /// Every range of a keyspace with its replicas (as `nodetool describering`).
    Describering(KeyspaceArg),
    /// A key's replicas, one client address per line, in placement order.
    Getendpoints(KeyArgs),
    /// Write a value.
    Put(PutArgs),
    /// Read a value; prints it and a newline. Exit status 1 when not found.
    Get(ReadArgs),
    /// Delete a key.
    Delete(ReadArgs),
    /// Write a value only if the key's current value meets a condition
    /// (a lightweight transaction: linearizable, by Paxos among the key's
    /// replicas). Prints `applied`, or `not applied;` and what the key
    /// holds (exit status 1); an error whose outcome is unknown exits 4.
    Putif(PutIfArgs),
    /// Delete a key only if its current value meets a condition, as `putif`.
    Deleteif(DeleteIfArgs),
    /// Read a value linearizably (a SERIAL read, finishing any
    /// compare-and-set left half done); prints it as `get` does.
    Getserial(GetSerialArgs),
    /// A keyspace's live rows in token order, one `KEY VALUE` line each,
    /// following the node's pages.
    Scan(crate::commands::scan::ScanArgs),
    /// Every live row of a keyspace as JSON lines on standard output
    /// (key, value, timestamp, expiry), for `import`.
    Export(crate::commands::export::ExportArgs),
    /// Write the rows of an `export` file into a keyspace, keeping their
    /// timestamps and expiries.
    Import(crate::commands::import::ImportArgs),
    /// Apply mutations from a file or standard input, one per line
    /// (`put KEY VALUE [ttl=S] [timestamp=US]`, `delete KEY [timestamp=US]`).
    Batch(crate::commands::batch::BatchArgs),
    /// Create, list or drop keyspaces.
    #[command(subcommand)]
    Keyspace(KeyspaceCommand),
    /// Print the Murmur3 token of each key, one per line, in input order
    /// (the same tokens Cassandra's Murmur3Partitioner gives).
    Token(TokenArgs),
    /// The node's metrics in the Prometheus text format.
    Metrics,
    /// Pending hints per target, with the handoff counters.
    Hints,
    /// Start storing hints for unreachable replicas.
    Enablehandoff,
    /// Stop storing hints (writes to down replicas are then lost to them until repair).
    Disablehandoff,
    /// Stop delivering hints (they are kept).
    Pausehandoff,
    /// Resume delivering hints.
    Resumehandoff,
    /// Delete pending hints: for one target host id, or all.
    Truncatehints(TruncateHintsArgs),
    /// Set the hint replay rate in KiB/s (0 = unthrottled).
    Sethintedhandoffthrottlekb(ThrottleArgs),
    /// Stream this node's data to the nodes taking over its ranges, hand off
    /// its hints, and leave the ring; blocks until done (the node then stops).
    Decommission,
    /// Restore a dead node's replicas: the surviving replicas stream its ranges
    /// to their new owners, then it leaves the ring; blocks until done.
    Removenode(HostIdArg),
    /// Delete this node's local data of ranges it no longer replicates (run it
    /// on the old replicas after a node joins).
    Cleanup(CleanupArgs),
    /// Make every replica of a keyspace's ranges hold the same cells:
    /// compares Merkle trees, then copies only the rows that differ, newest
    /// version winning (as `nodetool repair`, for the whole ring); blocks
    /// until done and fails naming the ranges that could not be repaired.
    /// `repair status` shows the running repair and each range's history.
    Repair(RepairArgs),
    /// Purge this node's tombstones and expired cells that the
    /// `repair.tombstone_gc` rule allows, now (as `nodetool garbagecollect`).
    Garbagecollect(CleanupArgs),
    /// This node's mode, its streams and the stream throttle (as `nodetool netstats`).
    Netstats,
    /// Set this node's stream throttle in MiB/s (0 = unthrottled).
    Setstreamthroughput(StreamThroughputArgs),
    /// Print this node's stream throttle.
    Getstreamthroughput,
    /// What a topology change would stream and how ownership would shift,
    /// changing nothing.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Load a node with reads and writes and report throughput and latency
    /// (as cassandra-stress).
    Stress(StressArgs),
    /// Create, drop or list client users, or change a password (nodes with
    /// `authenticator = "password"`; needs admin on all keyspaces).
    #[command(subcommand)]
    User(UserCommand),
    /// Give a user a permission: `grant read on demo to alice` (`ALL` for
    /// every keyspace; permissions: read, write, schema, admin).
    Grant(GrantArgs),
    /// Take a permission back: `revoke read on demo from alice` (or `to`).
    Revoke(GrantArgs),
    /// Run a local cluster on loopback with a sample keyspace, until ctrl-c.
    Demo(DemoArgs),
    /// Make TLS certificates for tests and trials.
    #[command(subcommand)]
    Certs(CertsCommand),
}

/// `ringstore user ...`.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user with a password (from --new-password,
    /// RINGSTORE_NEW_PASSWORD, or the first line of standard input).
    Create {
        /// Its name: 1 to 64 letters, digits, `_ - . @`.
        name: String,
        /// A superuser holds every permission (creating one needs a superuser).
        #[arg(long)]
        superuser: bool,
        /// The password (prefer the environment variable or standard input).
        #[command(flatten)]
        new_password: NewPassword,
    },
    /// Drop a user and its grants.
    Drop {
        /// The user.
        name: String,
    },
    /// Every user, whether a superuser, and its grants.
    List,
    /// Change a user's password (your own, or anyone's with admin on all).
    Password {
        /// The user.
        name: String,
        /// The new password (prefer the environment variable or standard input).
        #[command(flatten)]
        new_password: NewPassword,
    },
}

/// A new password for `user create` and `user password`.
#[derive(Debug, Args)]
pub struct NewPassword {
    /// The new password; without it, RINGSTORE_NEW_PASSWORD, else the first
    /// line of standard input.
    #[arg(
        long = "new-password",
        env = "RINGSTORE_NEW_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub value: Option<String>,
}

/// Arguments of `ringstore grant` and `ringstore revoke`:
/// `PERMISSION on KEYSPACE to|from USER`.
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// `read`, `write`, `schema` or `admin`.
    #[arg(value_parser = whole(parse_permission))]
    pub permission: ringstore_client_auth::Permission,
    /// The word `on`.
    #[arg(value_parser = ["on", "ON"], hide_possible_values = true)]
    pub on: String,
    /// A keyspace, or `ALL` for every keyspace.
    pub keyspace: String,
    /// The word `to` (or `from`).
    #[arg(value_parser = ["to", "TO", "from", "FROM"], hide_possible_values = true)]
    pub to: String,
    /// The user (not `user`: that id is the global `--user`).
    #[arg(id = "grantee", value_name = "USER")]
    pub grantee: String,
}

fn parse_permission(text: &str) -> anyhow::Result<ringstore_client_auth::Permission> {
    Ok(text.parse()?)
}

/// `ringstore certs ...`.
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Write a new CA (`ca.crt`, `ca.key`), one certificate and key per
    /// node IP (`node-IP.crt`, `node-IP.key`, valid as server and client),
    /// and a client certificate (`client.crt`, `client.key`), all signed by
    /// the CA. Existing files are never overwritten.
    Create(CertsCreateArgs),
}

/// Arguments of `ringstore certs create`.
#[derive(Debug, Args)]
pub struct CertsCreateArgs {
    /// Where to write the files (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A node's IP address (its certificate's subject alternative name);
    /// repeat or comma-separate for several nodes.
    #[arg(long = "ip", value_name = "IP", value_delimiter = ',', required = true)]
    pub ips: Vec<std::net::IpAddr>,
    /// How long the certificates are valid, in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}

/// What `ringstore stress` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Puts of random keys.
    Write,
    /// Gets of random keys (run `write` first to fill them).
    Read,
    /// Puts and gets, `--read-ratio` of them gets.
    Mixed,
    /// An RPC that does no work: the transport's ceiling.
    Noop,
    /// Compare-and-sets (`PutIf`), each a counter's increment: the value
    /// the worker last saw for the key, plus one, if it is still there
    /// (the answer to one that did not apply says what is, for the next).
    /// Uncontended by default (each worker has keys of its own); with
    /// `--contended`, workers race on the same `--keys`.
    Cas,
}

/// Arguments of `ringstore stress`.
#[derive(Debug, Args)]
pub struct StressArgs {
    /// What to send.
    #[arg(value_enum)]
    pub workload: Workload,
    /// Stop after this many operations.
    #[arg(
        short = 'n',
        long = "operations",
        value_name = "N",
        conflicts_with = "duration"
    )]
    pub operations: Option<u64>,
    /// Stop after this long (`30s`, `2m`, or seconds).
    #[arg(long, value_name = "DURATION", value_parser = whole(parse_duration))]
    pub duration: Option<std::time::Duration>,
    /// Before the measured run, send the same load for this long and
    /// report none of it (`10s`, `1m`): the first seconds after connecting
    /// or after an idle spell pay for cold caches and connections, as
    /// cassandra-stress's warm-up keeps out of its figures.
    #[arg(long, value_name = "DURATION", value_parser = whole(parse_duration))]
    pub warmup: Option<std::time::Duration>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Keys are `key0` to `key{N-1}`, drawn by `--distribution`.
    #[arg(long, visible_alias = "keys", default_value_t = 100_000)]
    pub key_count: u64,
    /// For `cas`: every worker draws from all the keys, so workers race on
    /// them (with a few `--keys`: 1, 8). Without it, key i belongs to
    /// worker i mod `--concurrency` and no two compare-and-sets meet.
    #[arg(long)]
    pub contended: bool,
    /// For `cas`: which replicas vote in each key's Paxos rounds.
    #[arg(long, value_enum, default_value_t = SerialLevel::Serial)]
    pub serial: SerialLevel,
    /// For `cas`: the commit's consistency level (default `ANY`: in the
    /// background).
    #[arg(long, value_name = "LEVEL", value_parser = whole(parse_level))]
    pub commit: Option<ConsistencyLevel>,
    /// How keys are drawn: `uniform`; `zipf:S` (key i with probability
    /// proportional to 1/(i+1)^S, S > 0; zipf:1.2 puts about a fifth of the
    /// operations on key0 with 100,000 keys); `hotspot:P` (key0 with
    /// probability P, 0 < P <= 1, else uniform).
    #[arg(
        long,
        default_value = "uniform",
        value_name = "uniform|zipf:S|hotspot:P"
    )]
    pub distribution: crate::commands::stress::KeyDistribution,
    /// Open loop: send R operations per second on a fixed schedule
    /// (operation i is due at i/R s) and measure each latency from when it
    /// was due, not when it was sent, so a stalled server cannot hide the
    /// requests it delayed (coordinated omission, corrected as wrk2 and
    /// cassandra-stress do). `--concurrency` still bounds the requests in
    /// flight. Without it: closed loop, each worker sends when answered.
    #[arg(long, value_name = "OPS_PER_SEC")]
    pub rate: Option<crate::commands::stress::Rate>,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// The consistency level of every request.
    #[arg(long, default_value = "ONE", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// The keyspace; created if missing, with `--replication`.
    #[arg(long, default_value = "stress")]
    pub keyspace: String,
    /// The replication of a keyspace this command creates.
    #[arg(long, default_value = "SimpleStrategy:1")]
    pub replication: String,
    /// The speculative_retry of a keyspace this command creates (`none`,
    /// `20ms`, `p99`; the node's default, p99, if not given).
    #[arg(long, value_name = "none|N ms|pNN")]
    pub speculative_retry: Option<ringstore_replication::SpeculativeRetry>,
    /// For `mixed`: the fraction of operations that are reads.
    #[arg(long, default_value_t = 0.5)]
    pub read_ratio: f64,
    /// Print the final report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report to FILE: the summary, and throughput and
    /// p50/p99/p99.9 latency for each second of the run (one self-contained
    /// page, as cassandra-stress's graph).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Send each request to a replica of its key (the ring learned from
    /// `--host`, or from `--hosts`), not to `--host`.
    #[arg(long)]
    pub token_aware: bool,
    /// Spread the load over these coordinators (`HOST:PORT,HOST:PORT,…`):
    /// worker i sends to the (i mod N)-th. Default: `--host` alone. With
    /// `--token-aware`, the seeds the ring is learned from.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub hosts: Vec<String>,
    /// HTTP/2 connections to each node; requests take them in turn.
    #[arg(long, default_value_t = std::num::NonZeroUsize::MIN, value_name = "N")]
    pub connections: std::num::NonZeroUsize,
    /// Send the requests on one `Client/Pipeline` stream per connection,
    /// many in flight on each, instead of one unary call per request (no
    /// HTTP/2 stream per request; no token-aware routing or retries).
    #[arg(long, conflicts_with = "token_aware")]
    pub pipeline: bool,
    /// Threads that send and receive (the runtime's workers; default: one
    /// per core). On a machine the client shares with the servers it
    /// loads, `--threads 1` leaves them more of it, as `redis-benchmark`'s
    /// default single thread does.
    #[arg(long, value_name = "N")]
    pub threads: Option<std::num::NonZeroUsize>,
    /// The operations are meant to fail (a flood of bad logins, as
    /// `benches/login_flood.sh` sends): the run neither stops when its
    /// first 100 operations fail nor fails when none succeeded; the errors
    /// are counted by code as always.
    #[arg(long)]
    pub expect_errors: bool,
}

/// Arguments of `ringstore demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many nodes (one rack each, up to three racks).
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where the nodes keep their data (a fresh temporary directory by default).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The first node's loopback address; the others follow (127.0.0.11, .12, …).
    #[arg(long, default_value = "127.0.0.11")]
    pub first_address: std::net::Ipv4Addr,
    /// Secure the cluster: TLS on the client and internode ports, both
    /// mutual (nodes and clients present certificates from a test CA that
    /// `certs create` makes in DATA_DIR/certs), and a random cluster secret.
    #[arg(long)]
    pub tls: bool,
    /// Also require a user name and password (the password authenticator):
    /// the demo gives the superuser `cassandra` a random password, prints
    /// it, and keeps it in DATA_DIR/superuser-password for the next run.
    #[arg(long)]
    pub auth: bool,
    /// Also accept clients here, passed through to the first node, so that
    /// the CLI finds the demo without `--host` (the CLI's default host).
    /// Taken by something else, the demo says so and goes on without it.
    /// Not with `--tls`: the first node's certificate names its own address.
    #[arg(long, value_name = "HOST:PORT", default_value = DEFAULT_HOST)]
    pub cli_address: SocketAddr,
}

/// Parses `30s`, `2m`, `1h` or plain seconds.
fn parse_duration(text: &str) -> anyhow::Result<std::time::Duration> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_alphabetic()) {
        Some((at, _)) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .with_context(|| format!("{text:?} is not a duration like 30s, 2m or 1h"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => bail!("unknown unit {other:?} in {text:?}: use ms, s, m or h"),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        bail!("{text:?} must be a positive duration");
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Arguments of `ringstore server`. Every setting can also come from the
/// config file or a `RINGSTORE_*` environment variable; flags win over the
/// environment, which wins over the file.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// A TOML config file (see deploy/ringstore.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The cluster's name.
    #[arg(long)]
    pub cluster_name: Option<String>,
    /// Where the node keeps its data.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The client gRPC bind address (default 127.0.0.1:7100).
    #[arg(long, value_name = "IP:PORT")]
    pub listen_address: Option<SocketAddr>,
    /// The internode gRPC bind address (default 127.0.0.1:7101).
    #[arg(long, value_name = "IP:PORT")]
    pub internode_address: Option<SocketAddr>,
    /// The gossip UDP bind address (default 127.0.0.1:7000).
    #[arg(long, value_name = "IP:PORT")]
    pub gossip_address: Option<SocketAddr>,
    /// The HTTP bind address of `GET /metrics` (Prometheus; default: the
    /// listen IP, port 7200).
    #[arg(long, value_name = "IP:PORT")]
    pub metrics_address: Option<SocketAddr>,
    /// The client address to advertise, if not the bind address.
    #[arg(long, value_name = "IP:PORT")]
    pub broadcast_client_address: Option<SocketAddr>,
    /// The internode address to advertise, if not the bind address.
    #[arg(long, value_name = "IP:PORT")]
    pub broadcast_internode_address: Option<SocketAddr>,
    /// The gossip address to advertise, if not the bind address.
    #[arg(long, value_name = "IP:PORT")]
    pub broadcast_gossip_address: Option<SocketAddr>,
    /// Gossip addresses of seed nodes, comma-separated. Only this node, or
    /// none: start a new cluster.
    #[arg(long, value_delimiter = ',', value_name = "IP:PORT,...")]
    pub seeds: Option<Vec<SocketAddr>>,
    /// This node's data center.
    #[arg(long)]
    pub dc: Option<String>,
    /// This node's rack.
    #[arg(long)]
    pub rack: Option<String>,
    /// Tokens (vnodes) for this node.
    #[arg(long, value_name = "N")]
    pub num_tokens: Option<u32>,
    /// This node's tokens, comma-separated (may begin with `-`: `--initial-token=-9000,0`).
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        value_name = "T1,T2,..."
    )]
    pub initial_token: Option<Vec<i64>>,
    /// A file holding the cluster secret (one per line: the first seals,
    /// every one is accepted; `ringstore reloadsecrets` re-reads it).
    #[arg(long, value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// The cluster secret itself (at least 16 bytes). Every user of the
    /// machine sees it in `ps`: prefer --cluster-secret-file or the
    /// RINGSTORE_CLUSTER_SECRET variable.
    #[arg(long, value_name = "SECRET")]
    pub cluster_secret: Option<String>,
    /// Start without a cluster secret on a non-loopback address: open to
    /// anyone who reaches the node (logged as such). Never in production.
    #[arg(long)]
    pub insecure: bool,
}

/// Arguments of `ringstore truncatehints`.
#[derive(Debug, Args)]
pub struct TruncateHintsArgs {
    /// The target's host id; all targets when absent.
    pub host_id: Option<String>,
}

/// Arguments of `ringstore sethintedhandoffthrottlekb`.
#[derive(Debug, Args)]
pub struct ThrottleArgs {
    /// KiB per second.
    pub kib_per_second: u64,
}

/// Arguments of `setlogginglevel`.
#[derive(Debug, Args)]
pub struct SetLoggingLevelArgs {
    /// A module path (`ringstore_membership`, `ringstore_node::coordinator`);
    /// with no level after it, the level for every module.
    pub target: String,
    /// trace, debug, info, warn, error or off.
    pub level: Option<String>,
}

/// A `HOST:PORT` (an IP address, `[IPv6]`, or a host name such as a docker
/// service name), checked for its form here; it is resolved on connecting.
fn parse_host_port(text: &str) -> anyhow::Result<String> {
    if text.parse::<SocketAddr>().is_ok() {
        return Ok(text.to_string());
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        bail!("{text:?} has no port: give HOST:PORT, e.g. node1:7100");
    };
    if host.is_empty() || host.contains(':') {
        bail!("{text:?} is not HOST:PORT (an IPv6 address goes in brackets: [::1]:7100)");
    }
    port.parse::<u16>()
        .with_context(|| format!("{port:?} in {text:?} is not a port number"))?;
    Ok(text.to_string())
}

/// A node named by its host id, as `status` shows it.
#[derive(Debug, Args)]
pub struct HostIdArg {
    /// The node's host id (a UUID).
    #[arg(value_parser = whole(parse_host_id))]
    pub host_id: HostId,
}

/// A host id from its UUID text; checked here so that a typo fails before any
/// node is asked.
fn parse_host_id(text: &str) -> anyhow::Result<HostId> {
    text.parse().context(
        "not a UUID (host ids look like 292a6c7f-2063-484c-b54d-9015216f1750, as `status` shows them)",
    )
}

/// Arguments of `ringstore cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Clean only this keyspace; every keyspace when absent.
    pub keyspace: Option<String>,
}

/// Arguments of `ringstore repair`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RepairArgs {
    /// `status`: the running (or last) repair of the node and its schedule.
    #[command(subcommand)]
    pub command: Option<RepairCommand>,
    /// Repair only this keyspace; every keyspace when absent.
    pub keyspace: Option<String>,
    /// The sub-range's exclusive start token (with --end-token; as `-st`).
    #[arg(
        long,
        value_name = "TOKEN",
        allow_hyphen_values = true,
        requires = "end_token"
    )]
    pub start_token: Option<i64>,
    /// The sub-range's inclusive end token (with --start-token; as `-et`).
    #[arg(
        long,
        value_name = "TOKEN",
        allow_hyphen_values = true,
        requires = "start_token"
    )]
    pub end_token: Option<i64>,
    /// Only the replicas in the node's data center take part (nothing is
    /// recorded as repaired for garbage collection).
    #[arg(long)]
    pub dc_local: bool,
    /// Report the ranges that differ and their key counts; move nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Paxos repair only, on this node: finish the compare-and-sets its
    /// replica holds unfinished, then purge the Paxos state they no longer
    /// need (no data is compared).
    #[arg(long, conflicts_with_all = ["start_token", "end_token", "dc_local", "dry_run"])]
    pub paxos_only: bool,
}

/// `ringstore repair ...` subcommands.
#[derive(Debug, Subcommand)]
pub enum RepairCommand {
    /// The node's running or last repair (ranges done, bytes, ETA), the
    /// scheduler's settings, and when each range it looks after was last
    /// repaired.
    Status,
}

/// Arguments of `ringstore setstreamthroughput`.
#[derive(Debug, Args)]
pub struct StreamThroughputArgs {
    /// MiB per second, for all of the node's streams together; 0 = unthrottled.
    #[arg(value_name = "MIB_PER_SEC")]
    pub mib_per_second: u64,
}

/// `ringstore plan ...`: the topology change to plan.
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// A new node joining (bootstrapping) in a data center and rack.
    Join {
        /// The new node's data center.
        #[arg(long)]
        dc: String,
        /// The new node's rack.
        #[arg(long)]
        rack: String,
        /// The new node's tokens (vnodes); the asked node's num_tokens when absent.
        #[arg(long, value_name = "N")]
        num_tokens: Option<NonZeroU32>,
    },
    /// A live node decommissioning: it streams its own ranges away.
    Decommission(HostIdArg),
    /// A dead node removed: the surviving replicas stream its ranges.
    Removenode(HostIdArg),
    /// A keyspace's replication changed (`keyspace alter`).
    Alter {
        /// The keyspace.
        keyspace: String,
        /// The new replication: `SimpleStrategy:3` or
        /// `NetworkTopologyStrategy:dc1=3,dc2=2`.
        #[arg(long)]
        replication: String,
    },
}

/// Arguments of `ringstore status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Show effective ownership for this keyspace.
    pub keyspace: Option<String>,
}

/// Arguments of `ringstore info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// List every token.
    #[arg(short = 'T', long)]
    pub tokens: bool,
}

/// `snapshot [-t TAG] [KEYSPACE]`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The snapshot's name (default: the current time in milliseconds).
    #[arg(short = 't', long = "tag")]
    pub tag: Option<String>,
    /// Only this keyspace (default: every keyspace).
    pub keyspace: Option<String>,
}

/// `clearsnapshot (-t TAG | --all)`.
#[derive(Debug, Args)]
pub struct ClearSnapshotArgs {
    /// The snapshot to remove.
    #[arg(
        short = 't',
        long = "tag",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub tag: Option<String>,
    /// Remove every snapshot.
    #[arg(long)]
    pub all: bool,
}

/// `restore -t TAG [KEYSPACE]`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The snapshot, in the node's DATA_DIR/snapshots/TAG/.
    #[arg(short = 't', long = "tag")]
    pub tag: String,
    /// Only this keyspace's file (default: every file of the snapshot).
    pub keyspace: Option<String>,
}

/// `tablestats [KEYSPACE]`.
#[derive(Debug, Args)]
pub struct TablestatsArgs {
    /// Only this keyspace (default: every keyspace).
    pub keyspace: Option<String>,
}

/// `toppartitions KEYSPACE [--duration D] [-k N] [-s N] [-a reads,writes]`.
#[derive(Debug, Args)]
pub struct TopPartitionsArgs {
    /// The keyspace.
    pub keyspace: String,
    /// How long to sample (`10s`, `500ms`, `2m`; at most 10 minutes).
    #[arg(long, default_value = "10s", value_parser = whole(parse_duration))]
    pub duration: std::time::Duration,
    /// How many keys to list per operation.
    #[arg(short = 'k', long = "top", default_value_t = 10)]
    pub top: u32,
    /// Counters per operation (1 to 1024): closer to the number of
    /// distinct keys gives exacter counts.
    #[arg(short = 's', long, default_value_t = 256)]
    pub capacity: u32,
    /// What to sample.
    #[arg(
        short = 'a',
        long = "samplers",
        value_delimiter = ',',
        default_value = "writes,reads"
    )]
    pub samplers: Vec<SampledOperation>,
}

/// An operation `toppartitions` samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SampledOperation {
    /// Local writes.
    Writes,
    /// Local reads.
    Reads,
}

/// A keyspace argument.
#[derive(Debug, Args)]
pub struct KeyspaceArg {
    /// The keyspace.
    pub keyspace: String,
}

/// A keyspace and a key.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// The key is hex bytes.
    #[arg(long)]
    pub hex: bool,
}

/// A request timeout in seconds: positive, at most an hour.
fn parse_request_timeout(text: &str) -> anyhow::Result<f64> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 3600.0 => Ok(seconds),
        _ => Err(anyhow!(
            "{text:?} is not a number of seconds above 0 and at most 3600"
        )),
    }
}

/// A consistency level from its name, in any case (`QUORUM`, `local_quorum`).
pub(crate) fn parse_level(text: &str) -> anyhow::Result<ConsistencyLevel> {
    Ok(text.parse()?)
}

/// `parse` as a clap value parser whose error shows its whole chain: clap
/// prints a value parser's error by its own message alone, not its sources.
pub(crate) fn whole<T: 'static>(
    parse: fn(&str) -> anyhow::Result<T>,
) -> impl Fn(&str) -> Result<T, Invalid> + Clone + Send + Sync + 'static {
    move |text| parse(text).map_err(Invalid)
}

/// A command-line value that does not parse; its message is the whole
/// chain of the error (`{:#}`), as clap prints no sources.
#[derive(Debug)]
pub(crate) struct Invalid(anyhow::Error);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Invalid {}

/// Arguments of `ringstore put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// The value; `-` reads it from standard input.
    pub value: String,
    /// The consistency level.
    #[arg(long, default_value = "ONE", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// Expire the value this many seconds after it is written.
    #[arg(long, value_name = "SECONDS")]
    pub ttl: Option<u32>,
    /// The write's timestamp, in microseconds since the epoch (by default
    /// this process stamps it from its clock).
    #[arg(long, value_name = "MICROS")]
    pub timestamp: Option<i64>,
    /// Let the coordinating node stamp the write with its clock when it
    /// reads it, instead of this process when it sends it.
    #[arg(long, conflicts_with = "timestamp")]
    pub server_timestamp: bool,
    /// KEY and VALUE are hex bytes.
    #[arg(long)]
    pub hex: bool,
    /// Send the write to a replica of the key, learned from `--host`,
    /// rather than have `--host` coordinate it.
    #[arg(long)]
    pub token_aware: bool,
}

/// Arguments of `ringstore get` and `ringstore delete`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// The consistency level.
    #[arg(long, default_value = "ONE", value_parser = whole(parse_level))]
    pub consistency: ConsistencyLevel,
    /// KEY is hex bytes, and `get` prints the value as hex.
    #[arg(long)]
    pub hex: bool,
    /// Send the request to a replica of the key, learned from `--host`,
    /// rather than have `--host` coordinate it.
    #[arg(long)]
    pub token_aware: bool,
}

/// The serial consistency of a lightweight transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SerialLevel {
    /// A quorum of all the key's replicas, in every data center.
    Serial,
    /// A quorum of the key's replicas in the coordinator's data center
    /// (linearizable only among operations that all use it there).
    LocalSerial,
}

/// What `putif`, `deleteif` and `getserial` share.
#[derive(Debug, Args)]
pub struct SerialOptions {
    /// Which replicas vote in the key's Paxos rounds.
    #[arg(long, value_enum, default_value_t = SerialLevel::Serial)]
    pub serial: SerialLevel,
    /// How many replicas must have applied the commit before the answer
    /// (`QUORUM`, `LOCAL_QUORUM`, `ALL`, ...). Default `ANY`: the commit
    /// goes on in the background; a serial read sees it at once, a plain
    /// read at ONE perhaps not yet.
    #[arg(long, value_name = "LEVEL", value_parser = whole(parse_level))]
    pub commit: Option<ConsistencyLevel>,
    /// KEY and the values are hex bytes (and a value printed is hex).
    #[arg(long)]
    pub hex: bool,
    /// Send the request to the key's first live replica, learned from
    /// `--host` (as the client library routes every compare-and-set, so
    /// that rivals queue at one node), rather than have `--host`
    /// coordinate it.
    #[arg(long)]
    pub token_aware: bool,
}

/// Arguments of `ringstore putif`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("condition").required(true).args(["if_absent", "if_value", "any"])))]
pub struct PutIfArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// The new value; `-` reads it from standard input.
    pub value: String,
    /// Write only if the key has no value (never written, deleted or
    /// expired): Cassandra's IF NOT EXISTS.
    #[arg(long)]
    pub if_absent: bool,
    /// Write only if the key's value is exactly this.
    #[arg(long, value_name = "VALUE")]
    pub if_value: Option<String>,
    /// Write whatever the key holds (a linearizable put).
    #[arg(long)]
    pub any: bool,
    /// Expire the new value this many seconds after it is written.
    #[arg(long, value_name = "SECONDS")]
    pub ttl: Option<u32>,
    /// Serial level, commit level, hex, routing.
    #[command(flatten)]
    pub options: SerialOptions,
}

/// Arguments of `ringstore deleteif`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("condition").required(true).args(["if_value", "any"])))]
pub struct DeleteIfArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// Delete only if the key's value is exactly this.
    #[arg(long, value_name = "VALUE")]
    pub if_value: Option<String>,
    /// Delete whatever the key holds (a linearizable delete).
    #[arg(long)]
    pub any: bool,
    /// Serial level, commit level, hex, routing.
    #[command(flatten)]
    pub options: SerialOptions,
}

/// Arguments of `ringstore getserial`.
#[derive(Debug, Args)]
pub struct GetSerialArgs {
    /// The keyspace.
    pub keyspace: String,
    /// The key.
    pub key: String,
    /// Serial level, the level of a commit the read finishes, hex, routing.
    #[command(flatten)]
    pub options: SerialOptions,
}

/// `ringstore keyspace ...`.
#[derive(Debug, Subcommand)]
pub enum KeyspaceCommand {
    /// Create a keyspace.
    Create {
        /// Its name: letters, digits, underscores.
        name: String,
        /// `SimpleStrategy:3` or `NetworkTopologyStrategy:dc1=3,dc2=2`.
        #[arg(long)]
        replication: String,
        /// Succeed without change if it already exists (whatever its replication).
        #[arg(long)]
        if_not_exists: bool,
        /// Hints older than this are never replayed, as they could bring back
        /// data deleted since (seconds; default 864000, 10 days).
        #[arg(long, value_name = "SECONDS")]
        gc_grace_seconds: Option<u32>,
        /// When a read asks one more replica before its round times out, as
        /// Cassandra's speculative_retry: `none`, a delay such as `20ms`, or
        /// a percentile of the keyspace's recent replica read latency such
        /// as `p99` (the default).
        #[arg(long, value_name = "none|N ms|pNN")]
        speculative_retry: Option<ringstore_replication::SpeculativeRetry>,
    },
    /// Change a keyspace's replication and move its data: writes go to both
    /// placements and reads stay on the old one until every new replica has
    /// streamed what it gains; then the nodes that lost ranges delete them.
    /// Every node must be up. Asking again for an alter under way resumes it.
    Alter {
        /// Its name.
        name: String,
        /// The new replication: `SimpleStrategy:3` or
        /// `NetworkTopologyStrategy:dc1=3,dc2=2`.
        #[arg(long)]
        replication: String,
        /// Return once the new placement is announced; the data moves in the
        /// background (`netstats` shows it).
        #[arg(long = "async")]
        at_once: bool,
    },
    /// List the keyspaces.
    List,
    /// Drop a keyspace and its data.
    Drop {
        /// Its name.
        name: String,
    },
}

/// Arguments of `ringstore token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// Read each KEY as hex bytes (for keys that are not UTF-8).
    #[arg(long)]
    pub hex: bool,

    /// The keys (non-empty). Put `--` before keys that begin with `-`.
    #[arg(value_name = "KEY", required = true)]
    pub keys: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grantee_and_the_new_password_do_not_take_the_global_credentials() {
        let cli = Cli::try_parse_from([
            "ringstore",
            "--user",
            "root",
            "--password",
            "pw",
            "grant",
            "READ",
            "on",
            "ALL",
            "to",
            "reader",
        ])
        .unwrap();
        assert_eq!(
            (cli.user.as_deref(), cli.password.as_deref()),
            (Some("root"), Some("pw"))
        );
        let Command::Grant(args) = cli.command else {
            panic!("a grant command")
        };
        assert_eq!(args.permission, ringstore_client_auth::Permission::Read);
        assert_eq!(
            (args.keyspace.as_str(), args.grantee.as_str()),
            ("ALL", "reader")
        );
        let cli = Cli::try_parse_from([
            "ringstore",
            "--user",
            "root",
            "--password",
            "pw",
            "user",
            "password",
            "alice",
            "--new-password",
            "new",
        ])
        .unwrap();
        assert_eq!(
            (cli.user.as_deref(), cli.password.as_deref()),
            (Some("root"), Some("pw"))
        );
        let Command::User(UserCommand::Password { name, new_password }) = cli.command else {
            panic!("a user password command")
        };
        assert_eq!(
            (name.as_str(), new_password.value.as_deref()),
            ("alice", Some("new"))
        );
        let refused = Cli::try_parse_from(["ringstore", "grant", "fly", "on", "a", "to", "b"]);
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("unknown permission")
        );
        assert!(Cli::try_parse_from(["ringstore", "grant", "read", "in", "a", "to", "b"]).is_err());
    }

    #[test]
    fn server_flags_take_negative_initial_tokens_and_seed_lists() {
        let cli = Cli::try_parse_from([
            "ringstore",
            "server",
            "--initial-token=-9000,0,9000",
            "--seeds",
            "127.0.0.11:7000,127.0.0.12:7000",
        ])
        .unwrap();
        let Command::Server(args) = cli.command else {
            panic!("a server command")
        };
        assert_eq!(args.initial_token, Some(vec![-9000, 0, 9000]));
        assert_eq!(args.seeds.unwrap().len(), 2);
    }

    #[test]
    fn consistency_levels_parse_in_any_case_and_host_is_global() {
        let cli = Cli::try_parse_from([
            "ringstore",
            "get",
            "ks",
            "k",
            "--consistency",
            "local_quorum",
            "--host",
            "127.0.0.2:7100",
        ])
        .unwrap();
        assert_eq!(cli.host, "127.0.0.2:7100");
        let Command::Get(args) = cli.command else {
            panic!("a get command")
        };
        assert_eq!(args.consistency, ConsistencyLevel::LocalQuorum);
        assert!(
            Cli::try_parse_from(["ringstore", "get", "ks", "k", "--consistency", "SOME"]).is_err()
        );
    }

    #[test]
    fn host_takes_an_address_or_a_host_name_with_its_port() {
        for good in [
            "127.0.0.2:7100",
            "node1:7100",
            "[::1]:7100",
            "db.example:7100",
        ] {
            let cli = Cli::try_parse_from(["ringstore", "ring", "--host", good]).unwrap();
            assert_eq!(cli.host, good);
        }
        for bad in ["node1", "node1:port", ":7100", "::1:7100", "node1:70000"] {
            let error = Cli::try_parse_from(["ringstore", "ring", "--host", bad]).unwrap_err();
            assert!(error.to_string().contains(bad), "{bad}: {error}");
        }
    }

    #[test]
    fn without_a_host_the_cli_looks_where_a_default_server_and_the_demo_listen() {
        // Under nextest each test is its own process, but not under `cargo
        // test`: the environment variable is tested on the binary instead
        // (tests/first_session.rs).
        if std::env::var_os("RINGSTORE_HOST").is_some() {
            return;
        }
        let cli = Cli::try_parse_from(["ringstore", "status"]).unwrap();
        assert_eq!(cli.host, DEFAULT_HOST);
        let server_default = ringstore_node::NodeConfig::default().listen_address;
        assert_eq!(cli.host, server_default.to_string());
        let demo = Cli::try_parse_from(["ringstore", "demo"]).unwrap();
        let Command::Demo(args) = demo.command else {
            panic!("a demo command")
        };
        assert_eq!(args.cli_address.to_string(), DEFAULT_HOST);
    }

    #[test]
    fn removenode_takes_a_host_id_and_rejects_anything_else() {
        let cli = Cli::try_parse_from([
            "ringstore",
            "removenode",
            "292A6C7F-2063-484C-B54D-9015216F1750",
        ])
        .unwrap();
        let Command::Removenode(args) = cli.command else {
            panic!("a removenode command")
        };
        assert_eq!(
            args.host_id.to_string(),
            "292a6c7f-2063-484c-b54d-9015216f1750"
        );
        let error = Cli::try_parse_from(["ringstore", "removenode", "127.0.0.12"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(message.contains("'127.0.0.12'"), "{message}");
        assert!(message.contains("not a UUID"), "{message}");
        assert!(Cli::try_parse_from(["ringstore", "removenode"]).is_err());
    }

    #[test]
    fn topology_commands_parse_their_arguments() {
        let cli = Cli::try_parse_from(["ringstore", "decommission", "--host", "127.0.0.12:7100"])
            .unwrap();
        assert!(matches!(cli.command, Command::Decommission));
        let cli = Cli::try_parse_from(["ringstore", "cleanup"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Cleanup(CleanupArgs { keyspace: None })
        ));
        let cli = Cli::try_parse_from(["ringstore", "cleanup", "ks1"]).unwrap();
        let Command::Cleanup(args) = cli.command else {
            panic!("a cleanup command")
        };
        assert_eq!(args.keyspace.as_deref(), Some("ks1"));
        assert!(matches!(
            Cli::try_parse_from(["ringstore", "netstats"])
                .unwrap()
                .command,
            Command::Netstats
        ));
        assert!(matches!(
            Cli::try_parse_from(["ringstore", "getstreamthroughput"])
                .unwrap()
                .command,
            Command::Getstreamthroughput
        ));
    }

    #[test]
    fn stream_throughput_is_whole_mib_per_second_and_zero_is_allowed() {
        for (arg, expected) in [("24", 24), ("0", 0)] {
            let cli = Cli::try_parse_from(["ringstore", "setstreamthroughput", arg]).unwrap();
            let Command::Setstreamthroughput(args) = cli.command else {
                panic!("a setstreamthroughput command")
            };
            assert_eq!(args.mib_per_second, expected);
        }
        for bad in ["-1", "1.5", "fast"] {
            assert!(
                Cli::try_parse_from(["ringstore", "setstreamthroughput", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn plan_takes_a_join_location_or_a_host_id() {
        let cli = Cli::try_parse_from([
            "ringstore",
            "plan",
            "join",
            "--dc",
            "dc1",
            "--rack",
            "rack2",
            "--num-tokens",
            "16",
        ])
        .unwrap();
        let Command::Plan(PlanCommand::Join {
            dc,
            rack,
            num_tokens,
        }) = cli.command
        else {
            panic!("a plan join command")
        };
        assert_eq!((dc.as_str(), rack.as_str()), ("dc1", "rack2"));
        assert_eq!(num_tokens.map(NonZeroU32::get), Some(16));
        let cli = Cli::try_parse_from(["ringstore", "plan", "join", "--dc", "dc1", "--rack", "r"])
            .unwrap();
        assert!(matches!(
            cli.command,
            Command::Plan(PlanCommand::Join {
                num_tokens: None,
                ..
            })
        ));
        assert!(
            Cli::try_parse_from(["ringstore", "plan", "join", "--dc", "dc1"]).is_err(),
            "the rack is required"
        );
        assert!(
            Cli::try_parse_from([
                "ringstore",
                "plan",
                "join",
                "--dc",
                "d",
                "--rack",
                "r",
                "--num-tokens",
                "0"
            ])
            .is_err(),
            "a node has at least one token"
        );
        let id = "00000000-0000-0000-0000-00000000000a";
        let cli = Cli::try_parse_from(["ringstore", "plan", "decommission", id]).unwrap();
        assert!(
            matches!(cli.command, Command::Plan(PlanCommand::Decommission(ref a)) if a.host_id.to_string() == id)
        );
        let cli = Cli::try_parse_from(["ringstore", "plan", "removenode", id]).unwrap();
        assert!(
            matches!(cli.command, Command::Plan(PlanCommand::Removenode(ref a)) if a.host_id.to_string() == id)
        );
        assert!(Cli::try_parse_from(["ringstore", "plan", "removenode", "nope"]).is_err());
        assert!(Cli::try_parse_from(["ringstore", "plan"]).is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(
            parse_duration("30s").unwrap(),
            std::time::Duration::from_secs(30)
        );
        assert_eq!(
            parse_duration("2m").unwrap(),
            std::time::Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration("15").unwrap(),
            std::time::Duration::from_secs(15)
        );
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }
}
