//! `GET /metrics` over HTTP: the thin shell that serves [`crate::metrics::page`]
//! to Prometheus. Any other path is 404; a page that cannot be made is 500
//! with the reason.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::context::NodeContext;

/// The content type of the Prometheus text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `GET /metrics` of `context`'s node on `listener` until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    context: Arc<NodeContext>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let address = listener.local_addr().ok();
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(context);
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(%error, address = ?address.map(|a: SocketAddr| a.to_string()), "the metrics server failed");
    }
}

async fn scrape(State(context): State<Arc<NodeContext>>) -> Response {
    match crate::metrics::page(&context).await {
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
