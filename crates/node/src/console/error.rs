//! Why an API request gets no view, and the HTTP answer each reason makes:
//! always JSON, `{"error": "…"}`, with the status code of the reason.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::console::api::ErrorBody;
use crate::error::NodeError;

/// Why an API request gets no view.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// A path under `/api/v1/` that names no endpoint (404).
    #[error("no endpoint {path}: GET /api/v1/ lists them")]
    NotFound {
        /// The path asked for.
        path: String,
    },

    /// The port asks for a bearer token and the request had none, or
    /// another (401).
    #[error(
        "this node's API needs its bearer token (metrics_security.bearer_token_file), \
         sent as \"Authorization: Bearer <token>\""
    )]
    Unauthorized,

    /// The node could not answer (500), e.g. it is no longer in its own
    /// view.
    #[error("the node cannot answer: {0}")]
    Node(#[from] NodeError),

    /// A view that could not be written as JSON (500).
    #[error("cannot write the answer as JSON: {0}")]
    Encode(#[from] serde_json::Error),
}

impl ConsoleError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> StatusCode {
        match self {
            ConsoleError::NotFound { .. } => StatusCode::NOT_FOUND,
            ConsoleError::Unauthorized => StatusCode::UNAUTHORIZED,
            ConsoleError::Node(_) | ConsoleError::Encode(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "a console API request failed");
        }
        let body = ErrorBody {
            error: self.to_string(),
        };
        // An `ErrorBody` (one string) always serializes; the fallback
        // keeps even that impossible failure an answer.
        let json = serde_json::to_string(&body)
            .unwrap_or_else(|_| r#"{"error":"unknown error"}"#.to_string());
        let mut response = (status, [(header::CONTENT_TYPE, JSON)], json).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// The content type of every API answer.
pub(crate) const JSON: &str = "application/json";
