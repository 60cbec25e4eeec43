//! The metrics crate's errors.

/// Why a metrics operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A family could not be registered (a duplicate name: a bug here).
    #[error("cannot register metric family {name}: {source}")]
    Register {
        /// The family.
        name: &'static str,
        /// Why.
        source: prometheus::Error,
    },
    /// The families could not be encoded as Prometheus text.
    #[error("cannot encode the metrics page: {0}")]
    Encode(#[source] prometheus::Error),
}

/// The metrics crate's result type.
pub type Result<T, E = MetricsError> = std::result::Result<T, E>;
