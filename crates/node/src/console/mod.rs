//! The web console: a page that shows the cluster at a glance, and the
//! JSON API (`/api/v1/…`) it reads, which scripts can read too. Every node
//! serves both on its HTTP port, beside `GET /metrics`
//! ([`crate::metrics_http`], which also applies that port's security).
//!
//! # What is served
//! - `GET /` — the page ([`assets`]: `index.html`, `console.js` and
//!   `console.css`, compiled into the binary; nothing is fetched from
//!   elsewhere). Its script fetches every endpoint below every 2 s and
//!   redraws: the ring as a circle of token ranges coloured by owner (an
//!   inner circle by rack), the nodes table, streams, repair coverage,
//!   hints and the traffic charts. Key elements carry stable `id`s and
//!   `data-` attributes (each node row its `data-state`, `UN`, `DN`, …) for
//!   scripts and the browser tests.
//! - `GET /api/v1/` — the list of endpoints.
//! - `GET /api/v1/node` — this node: host id, cluster, location, state,
//!   uptime, load, versions, hints pending, clock standing (`info`).
//! - `GET /api/v1/nodes` — every member as `ringstore status` lists it,
//!   with the same two letters (`UN`, `DN`, `UJ`, `UL`, …), primary
//!   ownership, clock offset and version, and the ring's epoch and checksum.
//! - `GET /api/v1/ring` — the ring's token ranges in token order, each with
//!   its primary owner, and the owners with their data center and rack.
//! - `GET /api/v1/streams` — this node's stream sessions (`netstats`):
//!   progress, rate and estimated time left.
//! - `GET /api/v1/repair` — the repair schedule, the job running or last
//!   run, and per scheduled range the time since it was last repaired
//!   (`repair status`).
//! - `GET /api/v1/hints` — hints this node holds, per target (`hints`).
//! - `GET /api/v1/traffic` — coordinated reads and writes per second and
//!   their p50/p99 latency, per 5-second interval over the last 10 minutes
//!   ([`traffic`]).
//!
//! Any other `/api/v1/…` path answers 404 with `{"error": "…"}`, as does
//! every failure (500, with the reason); other paths outside `/api/v1/` and
//! the assets are 404 as on the metrics port.
//!
//! # Invariants
//! - Every endpoint reuses what the matching CLI command reads (the
//!   `Admin`, `Topology` and `Repair` services' functions), so the console
//!   and `ringstore status`/`netstats`/`repair status` agree on a node.
//! - Tokens are decimal *strings* in the JSON: JavaScript and `jq` read JSON
//!   numbers as doubles, which would round a 64-bit token.
//! - Durations are in seconds and sizes in bytes, named so (`_seconds`,
//!   `_bytes`); latencies in milliseconds (`_ms`); fractions in 0 to 1.
//! - Nothing on any input panics: a path, a header or the node's state
//!   turns into an answer, never into a crash of the port.
//!
//! # Caveats
//! - A node's view of the others is its gossip view: a node that just went
//!   down shows `UN` until this node's failure detector marks it (a few
//!   seconds), and loads and versions are what each last gossiped.
//! - The endpoints are read one by one (no common snapshot), so the ring
//!   and the nodes table may disagree for one refresh during a change.
//! - The traffic history lives in memory from the process's start; a
//!   restarted node starts an empty chart. Percentiles are histogram bucket
//!   bounds, as `proxyhistograms` prints them.
//! - No write operations: the console only reads.
//!
//! The console reads the node through a [`ConsoleHost`] (implemented by the
//! node's context in `node/hosts/`), never the context itself.

pub mod api;
mod assets;
mod error;
mod host;
mod routes;
pub mod traffic;
mod views;

pub use api::status_letters;
pub use error::ConsoleError;
pub use host::ConsoleHost;
pub use routes::router;
pub use traffic::{TrafficHistory, TrafficSample};
