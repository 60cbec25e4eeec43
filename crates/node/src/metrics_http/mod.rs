//! The node's HTTP port: the thin shell that serves `GET /metrics`
//! ([`crate::metrics::page`]) to Prometheus, and the web [`console`] with
//! its JSON API (`/api/v1/…`), in clear or over TLS ([`tls`]), to anyone
//! or to holders of a bearer token ([`security`]).
//!
//! The token, when set, guards `/metrics` and every `/api/v1/…` path: a
//! request without it, or with another, is 401 (JSON for the API). The
//! console's page and its script and style are served without it, since
//! they hold no data: the page asks for the token when the API refuses it.
//! Any other path is 404; a page that cannot be made is 500 with the
//! reason. It holds the node as a [`MetricsHost`] and a [`ConsoleHost`],
//! all the page and the console need, not as its context.

pub(crate) mod security;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

pub use security::{BearerToken, MetricsHttpError, MetricsSecurity};

use crate::console::{self, ConsoleError, ConsoleHost};
use crate::metrics::MetricsHost;

/// The content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How the metrics port is secured, made from the settings at start.
#[derive(Clone, Default)]
pub(crate) struct MetricsAccess {
    /// TLS, with the client port's certificate (none: plaintext).
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// The token scrapers must send (none: anyone may scrape).
    token: Option<BearerToken>,
}

impl MetricsAccess {
    /// The access `settings` describe, reading their files; the client
    /// port's `certificate` and `private_key` serve TLS.
    pub(crate) fn from_settings(
        settings: &MetricsSecurity,
        certificate: Option<&std::path::Path>,
        private_key: Option<&std::path::Path>,
    ) -> Result<MetricsAccess, MetricsHttpError> {
        let tls = match (settings.tls, certificate, private_key) {
            (true, Some(certificate), Some(private_key)) => {
                Some(tls::acceptor(certificate, private_key)?)
            }
            // The configuration check requires both files with `tls`.
            _ => None,
        };
        let token = settings
            .bearer_token_file
            .as_deref()
            .map(BearerToken::read)
            .transpose()?;
        Ok(MetricsAccess { tls, token })
    }
}

#[derive(Clone)]
struct Scrape {
    /// The node whose page is served.
    context: Arc<dyn MetricsHost>,
    token: Option<BearerToken>,
}

/// Serves `GET /metrics` and the console of the node on `listener`
/// (`metrics` and `console` are the same node, as the hosts each reads),
/// secured by `access`, until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<dyn MetricsHost>,
    console: Arc<dyn ConsoleHost>,
    access: MetricsAccess,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let address = listener.local_addr().ok();
    let (console, sampler) = console::router(console);
    // The console's traffic history is sampled while the port serves.
    let sampler = tokio::spawn(sampler);
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape {
            context: metrics,
            token: access.token.clone(),
        })
        .merge(console.layer(middleware::from_fn_with_state(access.token, guard_api)));
    let served = match access.tls {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(acceptor) => match tls::TlsListener::new(listener, acceptor) {
            Ok(listener) => {
                axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
            }
            Err(error) => Err(error),
        },
    };
    sampler.abort();
    if let Err(error) = served {
        tracing::error!(%error, address = ?address.map(|a: SocketAddr| a.to_string()), "the metrics server failed");
    }
}

/// Lets a console request through when it is not for the API, when the
/// port asks for no token, or when it presents the token; else 401.
async fn guard_api(
    State(token): State<Option<BearerToken>>,
    request: Request,
    next: Next,
) -> Response {
    let guarded = request.uri().path().starts_with("/api/");
    if guarded && let Some(token) = &token {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        if !token.admits(presented) {
            return ConsoleError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

async fn scrape(State(scrape): State<Scrape>, headers: HeaderMap) -> Response {
    if let Some(token) = &scrape.token {
        let presented = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        if !token.admits(presented) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "this node's /metrics needs its bearer token (metrics_security.bearer_token_file)\n",
            )
                .into_response();
        }
    }
    match crate::metrics::page(scrape.context.as_ref()).await {
        Ok(page) => ([(header::CONTENT_TYPE, TEXT_FORMAT)], page).into_response(),
        Err(error) => {
            tracing::warn!(%error, "cannot render the metrics page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot render the metrics page: {error}\n"),
            )
                .into_response()
        }
    }
}
