//! `GET /metrics` over HTTP: the thin shell that serves [`crate::metrics::page`]
//! to Prometheus, in clear or over TLS ([`tls`]), to anyone or to holders
//! of a bearer token ([`security`]). Any other path is 404; a request
//! without the token, or with another, is 401; a page that cannot be made
//! is 500 with the reason. It holds the node as a [`MetricsHost`], all
//! the page needs, not as its context.

pub(crate) mod security;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

pub use security::{BearerToken, MetricsHttpError, MetricsSecurity};

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

/// Serves `GET /metrics` of `context`'s node on `listener`, secured by
/// `access`, until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    context: Arc<dyn MetricsHost>,
    access: MetricsAccess,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let address = listener.local_addr().ok();
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape {
            context,
            token: access.token,
        });
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
    if let Err(error) = served {
        tracing::error!(%error, address = ?address.map(|a: SocketAddr| a.to_string()), "the metrics server failed");
    }
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
