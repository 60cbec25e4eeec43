//! The thin async shell: the console's routes on an axum [`Router`], and
//! the task that samples the traffic history every
//! [`SAMPLE_EVERY`](crate::console::traffic::SAMPLE_EVERY). Each handler
//! asks the host, makes the view ([`crate::console::views`]) and writes it
//! as JSON; access rules are the port's ([`crate::metrics_http`]).

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use tokio::time::MissedTickBehavior;

use crate::console::api::{Endpoint, EndpointList, TrafficView};
use crate::console::assets::ASSETS;
use crate::console::error::{ConsoleError, JSON};
use crate::console::host::ConsoleHost;
use crate::console::traffic::{KEPT_INTERVALS, SAMPLE_EVERY, TrafficHistory};
use crate::console::views;

/// The endpoints, as `GET /api/v1/` lists them.
const ENDPOINTS: [Endpoint; 7] = [
    Endpoint {
        path: "/api/v1/node",
        describes: "this node (ringstore info)",
    },
    Endpoint {
        path: "/api/v1/nodes",
        describes: "every member as ringstore status lists it",
    },
    Endpoint {
        path: "/api/v1/ring",
        describes: "the ring's token ranges and their owners",
    },
    Endpoint {
        path: "/api/v1/streams",
        describes: "this node's stream sessions (ringstore netstats)",
    },
    Endpoint {
        path: "/api/v1/repair",
        describes: "repair schedule and coverage (ringstore repair status)",
    },
    Endpoint {
        path: "/api/v1/hints",
        describes: "hints pending per target (ringstore hints)",
    },
    Endpoint {
        path: "/api/v1/traffic",
        describes: "coordinated requests per second and p50/p99 latency over the last minutes",
    },
];

/// What every handler holds.
#[derive(Clone)]
struct Console {
    host: Arc<dyn ConsoleHost>,
    /// Written by the sampler, read by `GET /api/v1/traffic`; each holds
    /// the lock for one copy, never across an `.await`.
    traffic: Arc<Mutex<TrafficHistory>>,
}

impl Console {
    fn traffic(&self) -> std::sync::MutexGuard<'_, TrafficHistory> {
        self.traffic.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The console's routes for `host`'s node, and the sampler of its traffic
/// history, to run while they are served (it never ends by itself).
pub fn router(host: Arc<dyn ConsoleHost>) -> (Router, impl Future<Output = ()> + Send + 'static) {
    let console = Console {
        host,
        traffic: Arc::default(),
    };
    let mut router = Router::new();
    for asset in &ASSETS {
        let response = move || async move {
            (
                [
                    (header::CONTENT_TYPE, asset.content_type),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                asset.body,
            )
        };
        router = router.route(asset.path, get(response));
    }
    let router = router
        .route("/api/v1", get(endpoints))
        .route("/api/v1/", get(endpoints))
        .route("/api/v1/node", get(node))
        .route("/api/v1/nodes", get(nodes))
        .route("/api/v1/ring", get(ring))
        .route("/api/v1/streams", get(streams))
        .route("/api/v1/repair", get(repair))
        .route("/api/v1/hints", get(hints))
        .route("/api/v1/traffic", get(traffic))
        .route("/api/v1/{*rest}", get(not_found))
        .with_state(console.clone())
        .layer(axum::middleware::map_response(hardened));
    (router, sample(console))
}

/// What the page may load and run, sent with every answer: its own files
/// only (the assets above), no inline script or style, no plugins, no
/// frames around it, and requests only back to this node. A value that
/// somehow reached the page as markup (a keyspace or DC name is drawn as
/// text, never as HTML) still could not run a script or send data away.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Adds the browser's security headers to `response`: the
/// [`CONTENT_SECURITY_POLICY`], no MIME sniffing (a JSON answer is never
/// run as a script), no referrer to elsewhere, no framing (for browsers
/// older than `frame-ancestors`).
async fn hardened(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Takes a traffic sample every [`SAMPLE_EVERY`], the first at once.
async fn sample(console: Console) {
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let sample = console.host.traffic();
        console.traffic().record(sample);
    }
}

/// `view` as a JSON answer.
fn json(view: &impl Serialize) -> Result<Response, ConsoleError> {
    let body = serde_json::to_vec(view)?;
    Ok((
        [
            (header::CONTENT_TYPE, JSON),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response())
}

async fn endpoints() -> Result<Response, ConsoleError> {
    json(&EndpointList {
        endpoints: ENDPOINTS.to_vec(),
    })
}

async fn not_found(uri: Uri) -> ConsoleError {
    ConsoleError::NotFound {
        path: uri.path().to_string(),
    }
}

async fn node(State(console): State<Console>) -> Result<Response, ConsoleError> {
    json(&views::node(console.host.info()?))
}

async fn nodes(State(console): State<Console>) -> Result<Response, ConsoleError> {
    let local = console.host.host_id().to_string();
    json(&views::nodes(console.host.status()?, &local))
}

async fn ring(State(console): State<Console>) -> Result<Response, ConsoleError> {
    let status = console.host.status()?;
    json(&views::ring(&console.host.ring(), &status))
}

async fn streams(State(console): State<Console>) -> Result<Response, ConsoleError> {
    json(&views::streams(console.host.streams()))
}

async fn repair(State(console): State<Console>) -> Result<Response, ConsoleError> {
    let now = console.host.now();
    json(&views::repair(console.host.repair_status(), now))
}

async fn hints(State(console): State<Console>) -> Result<Response, ConsoleError> {
    json(&views::hints(console.host.hints()))
}

async fn traffic(State(console): State<Console>) -> Result<Response, ConsoleError> {
    // The node's time since start, as the samples count it.
    let now = console.host.traffic().at;
    let points = console.traffic().points(now);
    json(&TrafficView {
        sample_every_seconds: SAMPLE_EVERY.as_secs_f64(),
        kept_intervals: KEPT_INTERVALS.get(),
        points,
    })
}
