//! A node that members claim to have removed or replaced stops only if the
//! cluster agrees.
//!
//! A node never accepts a claim about itself on the claimant's word (see
//! `ringstore_membership::claims`): it knows it is alive, and one member —
//! whoever holds the cluster secret — must not be able to make it stop.
//! But a node that *was* removed while it was down (removenode, or a
//! replacement took its tokens) must stop when it comes back: it owns
//! nothing any more, and must not serve as if it did. So when the view
//! reports claims against this node, it asks every other member it knows
//! (not departed) whether *they* count it as removed — each judged the
//! claim by its own sight of this node — and stops only when a strict
//! majority of them says so ([`corroborated`]). A member that refuses its
//! call as "not a member" counts as saying so; one that does not answer
//! counts as not.
//!
//! It asks for no more of the node than [`RemovalHost`] (its id, gossip,
//! internode clients, and stopping), which the node's context implements
//! (in `context.rs`), so this module does not name the context.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{ClusterView, MembershipHandle, NodeState};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;

use crate::internode_auth::is_not_member;
use crate::peers::Peers;

/// What the removal check needs from the running node, and nothing more.
pub trait RemovalHost: Send + Sync {
    /// This node's host id: whose removal the other members are asked about.
    fn host_id(&self) -> HostId;
    /// Its membership task: the view, with the removal claims against this
    /// node, watched for changes.
    fn membership(&self) -> &MembershipHandle;
    /// Internode clients: the `MetadataSeen` calls that ask the members.
    fn peers(&self) -> &Peers;
    /// Asks the node to stop (the cluster agrees it was removed).
    fn request_stop(&self);
}

/// How long a member has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the members are asked again while claims stand.
const ASK_AGAIN: Duration = Duration::from_secs(5);

/// What one member said about this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// It counts this node as removed (or refuses it as no member).
    Removed,
    /// It counts this node as a member.
    Member,
    /// No answer.
    Silent,
}

/// Whether the answers of the `asked` members make a strict majority for
/// "removed".
pub fn corroborated(answers: &[Answer], asked: usize) -> bool {
    let removed = answers.iter().filter(|a| **a == Answer::Removed).count();
    asked > 0 && removed * 2 > asked
}

/// The other members this node would ask: known, not departed.
fn members_to_ask(view: &ClusterView) -> Vec<SocketAddr> {
    view.members
        .values()
        .map(|m| &m.metadata)
        .filter(|m| m.host_id != view.local && m.state != NodeState::Left)
        .filter(|m| !view.removed.contains(&m.host_id))
        .map(|m| m.internode_addr)
        .collect()
}

/// Asks the member at `address` whether it counts `host` as removed.
async fn ask(context: &impl RemovalHost, address: SocketAddr, host: HostId) -> Answer {
    let request = pb::MetadataSeenRequest {
        host_id: host.to_string(),
    };
    let mut client = context.peers().client(address);
    match tokio::time::timeout(ASK_TIMEOUT, client.metadata_seen(request)).await {
        Ok(Ok(response)) if response.get_ref().removed => Answer::Removed,
        Ok(Ok(_)) => Answer::Member,
        Ok(Err(status)) if is_not_member(&status) => Answer::Removed,
        Ok(Err(_)) | Err(_) => Answer::Silent,
    }
}

/// Asks the node to stop once the other members agree that another node
/// removed or replaced it; runs until the node stops.
pub async fn stop_if_removed<H: RemovalHost>(context: Arc<H>) {
    let mut views = context.membership().watch_view();
    loop {
        let view = views.borrow_and_update().clone();
        if view.removal_claims.is_empty() {
            if views.changed().await.is_err() {
                return;
            }
            continue;
        }
        let members = members_to_ask(&view);
        let answers = futures::future::join_all(
            members
                .iter()
                .map(|&address| ask(&*context, address, context.host_id())),
        )
        .await;
        if corroborated(&answers, members.len()) {
            tracing::error!(
                claimants = ?view.removal_claims,
                "this node was removed from the cluster (removenode or replace), and the \
                 other members agree; stopping. To join again, start it with an empty data \
                 directory"
            );
            context.request_stop();
            return;
        }
        tracing::warn!(
            claimants = ?view.removal_claims,
            agreeing = answers.iter().filter(|a| **a == Answer::Removed).count(),
            asked = members.len(),
            "members claim to have removed or replaced this node, but the cluster does not \
             agree: the claim is refused and the node keeps serving"
        );
        let _ = tokio::time::timeout(ASK_AGAIN, views.changed()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Answer::{Member, Removed, Silent};

    #[test]
    fn only_a_strict_majority_of_the_members_asked_stops_the_node() {
        assert!(corroborated(&[Removed, Removed], 2));
        assert!(corroborated(&[Removed, Removed, Member], 3));
        assert!(
            !corroborated(&[Removed, Member, Member], 3),
            "the claimant alone"
        );
        assert!(
            !corroborated(&[Removed, Silent], 2),
            "silence is not agreement"
        );
        assert!(!corroborated(&[], 0));
    }
}
