//! Why a call's proof was refused.

/// Why a proof was refused. The messages name the problem, never the key or
/// the tag, and go back to the caller as an `UNAUTHENTICATED` status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The call carries no proof.
    #[error(
        "internode call without proof of the cluster secret (is cluster_secret set on the caller?)"
    )]
    Missing,
    /// The proof does not parse.
    #[error("malformed internode proof: {0}")]
    Malformed(&'static str),
    /// The tag does not match: another secret, or a tampered proof.
    #[error("internode proof does not verify: the caller does not hold this cluster's secret")]
    BadTag,
    /// Issued too far from the receiver's clock.
    #[error(
        "internode proof issued {skew_ms} ms away from this node's clock (at most {max_skew_ms} ms): check the clocks"
    )]
    Skewed {
        /// How far off it is, in milliseconds.
        skew_ms: u64,
        /// The limit, in milliseconds.
        max_skew_ms: u64,
    },
    /// Already used once: a replayed call.
    #[error("internode proof already used: a replayed call")]
    Replayed,
    /// The caller is not a current member of the cluster.
    #[error("internode caller {0} is not a member of this cluster (removed or departed)")]
    NotMember(String),
}
