//! Why a call's proof was refused.

use ringstore_placement::HostId;

/// Why a call was refused. The messages name the problem, never a key or a
/// tag, and go back to the caller as an `UNAUTHENTICATED` status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The call carries no proof.
    #[error(
        "internode call without a proof (is the caller a member of this cluster, with its \
         cluster secret?)"
    )]
    Missing,
    /// The proof does not parse.
    #[error("malformed internode proof: {0}")]
    Malformed(&'static str),
    /// The proof is for another node.
    #[error("internode proof for node {callee}, not this one: a call redirected or replayed")]
    WrongDestination {
        /// The node it names.
        callee: HostId,
    },
    /// The caller is not a member this node knows.
    #[error(
        "internode caller {0} is not a member this node knows (not yet seen in gossip, or \
         not of this cluster)"
    )]
    UnknownCaller(HostId),
    /// The caller was a member and is no longer.
    #[error("internode caller {0} is not a member of this cluster (removed or departed)")]
    NotMember(HostId),
    /// The tag does not match: the caller is not who it says, or the proof was changed.
    #[error("internode proof does not verify: the caller is not the member it names")]
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
    /// A message of the call's body does not carry its tag.
    #[error("internode message {sequence} does not verify: changed, moved or injected")]
    BadMessage {
        /// Its place in the call, from 0.
        sequence: u64,
    },
    /// The call's body is not a sequence of gRPC messages.
    #[error("internode call body is malformed: {0}")]
    MalformedBody(&'static str),
}
