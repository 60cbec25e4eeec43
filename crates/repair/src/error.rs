//! The repair crate's one error type.

/// Why a repair step cannot go on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    /// A replica answered a tree question with the wrong number of hashes
    /// (a different tree shape, or a broken peer). Nothing was recorded.
    #[error("replica {replica} sent {got} hashes, {wanted} were asked for")]
    WrongAnswer {
        /// The replica's index among those compared.
        replica: usize,
        /// How many it sent.
        got: usize,
        /// How many were asked for.
        wanted: usize,
    },

    /// A `tombstone_gc` setting that names no mode.
    #[error("unknown tombstone_gc mode {0:?}: expected \"repair\", \"timeout\" or \"disabled\"")]
    UnknownGcMode(String),
}
