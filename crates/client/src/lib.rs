//! A token-aware Rust client for ringstore.
//!
//! Any ringstore node coordinates any request: one that is not a replica of
//! the key sends the write to all RF replicas over the internode network,
//! one that is a replica applies it locally and sends RF−1. A client that
//! knows the ring sends each request straight to a replica and saves that
//! hop — what Cassandra drivers call token-aware routing. This crate is
//! that client.
//!
//! # How it works
//! - **Learning the cluster.** [`Client::connect`] asks the first seed that
//!   answers for its ring (`Admin.Ring`: every member's client address,
//!   data center, rack, state, liveness and tokens) and schema
//!   (`Schema.ListKeyspaces`: each keyspace's replication). From these a
//!   [`RoutingTable`] rebuilds the ring and one replica map per keyspace
//!   with `ringstore_placement` — the code the nodes themselves run, so
//!   Murmur3 tokens and SimpleStrategy/NetworkTopologyStrategy placement
//!   are the nodes' bit for bit — and checks its ring against the
//!   checksum the node reported.
//! - **Keeping it current.** A background task learns the cluster again
//!   every [`ClientConfig::refresh_interval`], and soon after a failure that
//!   suggests a change (a node unreachable or `UNAVAILABLE`, an unknown
//!   keyspace). Each new table replaces the old one whole (a `watch`
//!   channel of `Arc<RoutingTable>`), so a request plans on one consistent
//!   snapshot. The task stops when the last [`Client`] clone is dropped.
//! - **Routing.** A request's [`QueryPlan`] lists the key's replicas that
//!   are up in the local data center, taken in turn (round robin), then
//!   those up elsewhere, then every other node, then the nodes thought
//!   down. With [`Routing::RoundRobin`] (or for a keyspace not yet known)
//!   it is a plain round robin, local data center first; with
//!   [`Routing::SeedsOnly`] the seeds coordinate everything, as `cqlsh`'s
//!   host does, and nothing is learned.
//! - **Lightweight transactions.** [`Client::put_if`],
//!   [`Client::delete_if`] and [`Client::get_serial`] (linearizable
//!   compare-and-set and read, by per-key Paxos on the nodes) are not
//!   spread: a key's go to its first replica that is up, in placement
//!   order — for `LOCAL_SERIAL`, the first in the local data center, and
//!   only local nodes after it — the same node for every client
//!   ([`RoutingTable::plan_for_serial`]). That node queues rivals on the
//!   key; spread over several coordinators they would pre-empt each
//!   other's ballots and back off at random, which is how Cassandra's
//!   collapse under contention (CASSANDRA-15746). [`expect`] builds the
//!   conditions.
//! - **Retrying.** A failed attempt goes to the next node of the plan when
//!   [`RetryPolicy`] says it is safe: reads and scans always; writes when
//!   they carry a client timestamp — last write wins, so writing the same
//!   cell twice is writing it once — which the client gives every write by
//!   default ([`ClientConfig::client_timestamps`]); a write the coordinator
//!   stamps only if it never reached a node. A compare-and-set is retried
//!   only when it certainly did not apply: it never reached a node, or the
//!   coordinator said so (the `x-ringstore-cas: not-applied` metadata on
//!   `UNAVAILABLE` or contention's `ABORTED`). Any other failure but a
//!   refusal of the request as it stands (no such keyspace, a key too
//!   long, no permission) — a timeout above all — leaves its outcome unknown
//!   ([`ClientError::is_cas_unknown`]): it may have applied, or may still
//!   be applied by a later round, and only a serial read tells; retrying
//!   could apply it twice. A serial read is retried as a read. Bad input,
//!   permission errors and the like are never retried. Each attempt has
//!   [`ClientConfig::request_timeout`], and tells the node when it was sent
//!   with that timeout as its gRPC deadline, so a node that reads a write
//!   after this client gave up on it refuses it instead of applying it
//!   late (`sent_at.rs`; pipelined requests carry the same in fields).
//! - **Connections.** [`ClientConfig::connections_per_node`] lazily opened
//!   HTTP/2 channels per node, with TLS and credentials in gRPC metadata
//!   ([`Credentials`]) as the `ringstore` CLI sends them.
//! - **Pipelines.** [`Client::pipeline`] opens one stream to a node that
//!   carries many requests at once, each answered as it finishes: no
//!   HTTP/2 stream per request, at the price of no routing or retries.
//! - **Scans.** [`Client::scan`] reads a keyspace over the whole ring as a
//!   stream, in token order, a few ranges at once, each from a replica;
//!   [`Client::scan_range`] reads one token range, page after page.
//!
//! The decisions — [`RoutingTable`], [`RetryPolicy`], the timestamp
//! generator, the scan's range cutting — are pure and tested without
//! sockets; [`Client`] only moves requests for them.
//!
//! ```no_run
//! # async fn example() -> ringstore_client::Result<()> {
//! use ringstore_client::{Client, ClientConfig, Credentials, pb};
//!
//! let mut config = ClientConfig::new(["10.0.0.1:7100", "10.0.0.2:7100"]);
//! config.local_dc = Some("dc1".into());
//! config.credentials = Credentials::new(Some("app"), Some("secret"))?;
//! let client = Client::connect(config).await?;
//! client
//!     .put(pb::PutRequest {
//!         keyspace: "ks".into(),
//!         key: b"k".to_vec(),
//!         value: b"v".to_vec(),
//!         consistency: pb::ConsistencyLevel::LocalQuorum as i32,
//!         ..Default::default()
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Invariants
//! - A plan names every known node once; its first `replicas` entries are
//!   replicas of the key as the describing node's ring places it.
//! - A request that is not idempotent is sent at most once unless the
//!   connection was refused (it never reached a node); a compare-and-set
//!   also when its coordinator said it was certainly not applied.
//! - A key's compare-and-sets and serial reads go first to the same node
//!   from every client with the same view of the ring.
//! - Client timestamps from one client strictly increase.
//!
//! # Caveats
//! - Routing follows the ring the nodes *own*, not pending ranges: during
//!   a join the joining node gets writes through its coordinators, as in
//!   Cassandra's drivers. A joined node is routed to after the next
//!   refresh (at most `refresh_interval`, sooner on failures).
//! - Two members claiming one token are settled by the nodes by gossip
//!   generation, which `Admin.Ring` does not report; the client then gives
//!   the token to the lower host id and [`RoutingTable::ring_matches`] is
//!   false (still correct, one hop longer for those keys).
//! - Client timestamps come from the client's clock: a client whose clock
//!   is far off orders its writes wrongly against other clients' (the node
//!   refuses timestamps beyond `max_client_timestamp_skew_seconds`); one
//!   whose clock runs behind the nodes' by more than the request timeout
//!   has every write refused as past its deadline.
//! - The client dials the client addresses the nodes advertise; behind
//!   NAT or a proxy that differs from the seed's, set
//!   `broadcast_client_address` on the nodes.
//! - A batch is routed by its first key only.
//! - A compare-and-set's coordinator is the first replica *this client*
//!   thinks up: clients that disagree on liveness (or on the ring, during
//!   a change) use two coordinators for a while, which costs contention,
//!   not safety. Pending replicas, which vote on the nodes, are never the
//!   coordinator here.
//! - A pipeline's compare-and-sets are coordinated by its node, whatever
//!   their key.
//! - No speculative execution: a slow replica is waited for up to the
//!   request timeout before the next is tried.

#![deny(missing_docs)]

mod cas;
mod client;
mod config;
mod consistency;
mod error;
mod pipeline;
mod pool;
mod refresh;
mod retry;
mod routing;
mod scan;
mod sent_at;
mod timestamps;
mod topology;

pub use cas::expect;
pub use client::{Client, ClientStats};
pub use config::{ClientConfig, Credentials, Routing};
pub use consistency::level_to_pb;
pub use error::{ClientError, Result};
pub use pipeline::Pipeline;
pub use pool::Transport;
pub use retry::{AttemptFailure, Idempotence, RetryDecision, RetryPolicy};
pub use routing::{QueryPlan, RoutingTable};
pub use scan::{MAX_SCAN_RANGES, ScanSpec};
pub use timestamps::TimestampGenerator;
pub use topology::{Keyspace, Node, NodeState, Topology};

/// A position on the ring (Murmur3, as the nodes place keys).
pub use ringstore_placement::Token;
/// A consistency level as the nodes name and parse it ([`level_to_pb`]
/// gives its wire form).
pub use ringstore_replication::ConsistencyLevel;

/// The wire types requests and answers are made of (`ringstore.v1`).
pub use ringstore_proto::v1 as pb;
/// TLS settings for [`ClientConfig::tls`].
pub use tonic::transport::ClientTlsConfig;
