//! The answer to a read or write that arrives before any node owns a token.
//!
//! A new cluster has no ring at first: its nodes watch gossip for
//! `ring_delay_ms`, choose tokens, and only then join; until the first of
//! them is `Normal`, no key has a natural replica. Planning a request on
//! that empty ring would refuse it with a level's arithmetic ("2 replicas
//! required, 1 alive", the joining node counted as pending), which reads as
//! a broken cluster rather than a starting one. The coordinator asks
//! [`refuse_while_starting`] first instead, and the client gets
//! `UNAVAILABLE` (retryable, as for too few live replicas) saying what is
//! going on and when to retry.
//!
//! A ring that is empty because every owner was removed is the same answer:
//! no node owns a token, and none will until one joins.

use ringstore_membership::ClusterView;

use crate::error::{Result, ServingError};

/// `Err(ServingError::ClusterStarting)`, `UNAVAILABLE`, when no node of
/// `view` owns a token yet.
pub fn refuse_while_starting(view: &ClusterView) -> Result<()> {
    if view.ring.is_empty() {
        return Err(ServingError::ClusterStarting {
            joining: view.joining.len(),
            members: view.members.len(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ringstore_membership::NodeState;
    use ringstore_placement::{HostId, Token};

    use super::*;
    use crate::test_views::{member, view};

    #[test]
    fn an_empty_ring_is_refused_as_a_starting_cluster() {
        let tokens = vec![Token(7)];
        let mut starting = view(1, vec![member(1, "r1", tokens.clone(), NodeState::Joining)]);
        starting.joining.insert(HostId::from_u128(1), tokens);
        let refused = refuse_while_starting(&starting).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
        let message = refused.to_string();
        assert!(message.contains("still starting"), "{message}");
        assert!(
            message.contains("(1 of 1 known node(s) joining"),
            "{message}"
        );
    }

    #[test]
    fn a_ring_with_an_owner_is_let_through() {
        let normal = member(1, "r1", vec![Token(7)], NodeState::Normal);
        let joining = member(2, "r1", vec![Token(9)], NodeState::Joining);
        refuse_while_starting(&view(1, vec![normal, joining])).unwrap();
    }
}
