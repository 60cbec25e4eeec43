//! Claims one node makes about another, and this node's verdicts on them.
//!
//! A node's metadata is signed by the node, so nobody can change what a
//! node says about *itself*. But a node also speaks about others, in its
//! [`Takeovers`](crate::Takeovers): that it replaces a dead node, that it is
//! removing one, that it has removed some. Those claims take the other
//! node's tokens, or put it out of the ring for good; one forged claim
//! naming a live node would make every member refuse it, and make it stop.
//!
//! So each receiver judges every claim by what it can see itself: a claim
//! about a node this receiver sees **up** is refused (counted, logged with
//! the claimant) — removenode and replace are for dead nodes, and they check
//! that the subject is down on the node that runs them — and a claim about
//! a node it sees down, or does not know, is accepted. A claim about this
//! node itself is never accepted by it (it knows it is alive); it is
//! reported instead ([`ClusterView::removal_claims`](crate::ClusterView)),
//! and the node stops only if the other members corroborate it.
//!
//! # Invariants
//! - An accepted claim stays accepted as long as its claimant's record
//!   carries it, whatever the subject does later: a removal is for good,
//!   and nodes that accepted it must not change their minds one by one.
//! - A refused claim is refused for that version of the claimant's record;
//!   a newer version is judged afresh (a removenode announces `removing`
//!   and later `removed` in two versions).
//! - Until this node is settled (connected to the cluster for a while, so
//!   it knows who is up) a claim about a node it does not see up holds
//!   only provisionally: a starting node that sees nobody up yet must still
//!   leave removed nodes out of its ring, but not for good. Once settled it
//!   judges such claims for real; one whose subject turned out to be up is
//!   refused then. Claims accepted before a restart are remembered
//!   ([`Remembrance`](crate::Remembrance)) and stay accepted.
//! - The local node's own claims are always accepted: its operator made
//!   them.
//!
//! # Caveats
//! - A node that has just joined (the first two probe periods) takes a
//!   claim about a node it has not seen up yet provisionally: a forged
//!   claim can mislead its view for that long, never for good.
//! - "Seen down" is each receiver's own verdict: a node that is briefly
//!   down (a restart, a partition) when a member that holds the secret
//!   claims its removal can be removed by that member. The claimant is
//!   logged; rotating the secret and removing the claimant undoes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};

use crate::metadata::{MetadataStamp, NodeMetadata, Takeovers};

/// What a claim says about its subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClaimKind {
    /// The claimant replaces the subject (takes over its tokens).
    Replaces,
    /// The claimant is restoring the subject's ranges elsewhere (removenode
    /// under way).
    Removing,
    /// The claimant has removed the subject for good.
    Removed,
}

/// One node's claim about another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// The node that makes it (and signed it).
    pub claimant: HostId,
    /// The node it is about.
    pub subject: HostId,
    /// What it says.
    pub kind: ClaimKind,
}

/// Every claim `metadata` makes, about others and (malformed) about itself.
pub(crate) fn claims_of(metadata: &NodeMetadata) -> Vec<Claim> {
    let claimant = metadata.host_id;
    let takeovers = &metadata.takeovers;
    let claim = |subject, kind| Claim {
        claimant,
        subject,
        kind,
    };
    let mut claims = Vec::new();
    claims.extend(takeovers.replaces.map(|s| claim(s, ClaimKind::Replaces)));
    claims.extend(takeovers.removing.map(|s| claim(s, ClaimKind::Removing)));
    claims.extend(
        takeovers
            .removed
            .iter()
            .map(|&s| claim(s, ClaimKind::Removed)),
    );
    claims
}

/// What this node has decided about a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It takes effect in this node's view.
    Accepted,
    /// Ignored: its subject is up here (or is this node).
    Refused,
    /// Holds until this node is settled, then is judged again.
    Provisional,
}

/// This node's verdicts on the claims in the records it holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Claims {
    accepted: BTreeSet<Claim>,
    /// Claims that hold until this node is settled.
    provisional: BTreeSet<Claim>,
    /// Refused claims, with the claimant's record version they were refused in.
    refused: BTreeMap<Claim, MetadataStamp>,
}

/// What a judgement found, for the node to count and log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Judgement {
    /// Claims refused now (not in an earlier judgement of the same record).
    pub newly_refused: Vec<Claim>,
    /// Claims accepted now.
    pub newly_accepted: Vec<Claim>,
}

impl Claims {
    /// Claims remembered from before a restart: accepted again without a
    /// judgement.
    pub(crate) fn remembered(accepted: impl IntoIterator<Item = Claim>) -> Claims {
        Claims {
            accepted: accepted.into_iter().collect(),
            provisional: BTreeSet::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Judges the claims of `records` (every record this node holds):
    /// `local`'s own are accepted, the others by whether their subject
    /// `is_up` here (provisionally until `settled`). Claims whose claimant
    /// no longer makes them are forgotten.
    pub(crate) fn judge<'a>(
        &mut self,
        records: impl Iterator<Item = &'a NodeMetadata>,
        local: HostId,
        is_up: impl Fn(HostId) -> bool,
        settled: bool,
    ) -> Judgement {
        let mut judgement = Judgement::default();
        let mut made = BTreeSet::new();
        for record in records {
            for claim in claims_of(record) {
                made.insert(claim);
                if self.accepted.contains(&claim) || (!settled && self.provisional.contains(&claim))
                {
                    continue;
                }
                if self.refused.get(&claim) == Some(&record.stamp) {
                    continue;
                }
                let verdict = if claim.claimant == local {
                    Verdict::Accepted
                } else if claim.subject == local
                    || claim.subject == claim.claimant
                    || is_up(claim.subject)
                {
                    Verdict::Refused
                } else if settled {
                    Verdict::Accepted
                } else {
                    Verdict::Provisional
                };
                match verdict {
                    Verdict::Accepted => {
                        self.refused.remove(&claim);
                        self.provisional.remove(&claim);
                        self.accepted.insert(claim);
                        judgement.newly_accepted.push(claim);
                    }
                    Verdict::Refused => {
                        self.provisional.remove(&claim);
                        self.refused.insert(claim, record.stamp);
                        judgement.newly_refused.push(claim);
                    }
                    Verdict::Provisional => {
                        self.provisional.insert(claim);
                        judgement.newly_accepted.push(claim);
                    }
                }
            }
        }
        self.accepted.retain(|claim| made.contains(claim));
        self.provisional.retain(|claim| made.contains(claim));
        self.refused.retain(|claim, _| made.contains(claim));
        judgement
    }

    /// The accepted claims (what a restart must remember).
    pub(crate) fn accepted(&self) -> impl Iterator<Item = &Claim> {
        self.accepted.iter()
    }

    /// Whether `claim` holds in the view: accepted, or provisionally.
    fn holds(&self, claim: &Claim) -> bool {
        self.accepted.contains(claim) || self.provisional.contains(claim)
    }

    /// The claimants of refused claims about `local` (removal or
    /// replacement of this node).
    pub(crate) fn against(&self, local: HostId) -> BTreeSet<HostId> {
        self.refused
            .keys()
            .filter(|claim| claim.subject == local && claim.claimant != local)
            .map(|claim| claim.claimant)
            .collect()
    }

    /// `metadata` as the view shows it: its takeovers stripped of every
    /// claim that is not accepted (the same `Arc` when nothing is).
    pub(crate) fn effective(&self, metadata: &Arc<NodeMetadata>) -> Arc<NodeMetadata> {
        let claims = claims_of(metadata);
        if claims.iter().all(|claim| self.holds(claim)) {
            return metadata.clone();
        }
        let held = |subject: HostId, kind| {
            self.holds(&Claim {
                claimant: metadata.host_id,
                subject,
                kind,
            })
        };
        let takeovers = &metadata.takeovers;
        let mut effective = NodeMetadata::clone(metadata);
        effective.takeovers = Takeovers {
            replaces: takeovers.replaces.filter(|&s| held(s, ClaimKind::Replaces)),
            removing: takeovers.removing.filter(|&s| held(s, ClaimKind::Removing)),
            removed: takeovers
                .removed
                .iter()
                .copied()
                .filter(|&s| held(s, ClaimKind::Removed))
                .collect(),
        };
        Arc::new(effective)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::tests::sample;

    fn host(n: u128) -> HostId {
        HostId::from_u128(n)
    }

    fn removing(claimant: u128, removed: &[u128]) -> NodeMetadata {
        let mut m = sample(claimant, 1);
        m.takeovers.removed = removed.iter().map(|&s| host(s)).collect();
        m
    }

    #[test]
    fn a_claim_about_a_node_seen_up_is_refused_and_one_seen_down_accepted() {
        let mut claims = Claims::default();
        let record = removing(2, &[3, 4]);
        let up = |h: HostId| h == host(3);
        let judgement = claims.judge([&record].into_iter(), host(1), up, true);
        assert_eq!(judgement.newly_refused.len(), 1);
        assert_eq!(judgement.newly_refused[0].subject, host(3));
        assert_eq!(judgement.newly_accepted.len(), 1);
        let effective = claims.effective(&Arc::new(record));
        assert_eq!(effective.takeovers.removed, vec![host(4)]);
    }

    #[test]
    fn before_the_node_is_settled_a_claim_holds_provisionally_until_judged() {
        let mut claims = Claims::default();
        let record = removing(2, &[3, 4]);
        claims.judge([&record].into_iter(), host(1), |_| false, false);
        assert_eq!(
            claims
                .effective(&Arc::new(record.clone()))
                .takeovers
                .removed,
            vec![host(3), host(4)],
            "both hold for now"
        );
        assert_eq!(claims.accepted().count(), 0, "none is remembered yet");
        // Settled: node 3 turned out to be up, node 4 is not.
        let judgement = claims.judge([&record].into_iter(), host(1), |h| h == host(3), true);
        assert_eq!(judgement.newly_refused.len(), 1);
        assert_eq!(
            claims.effective(&Arc::new(record)).takeovers.removed,
            vec![host(4)]
        );
        assert_eq!(claims.accepted().count(), 1);
    }

    #[test]
    fn an_accepted_claim_stays_when_its_subject_comes_back_up() {
        let mut claims = Claims::default();
        let record = removing(2, &[3]);
        claims.judge([&record].into_iter(), host(1), |_| false, true);
        claims.judge([&record].into_iter(), host(1), |_| true, true);
        assert_eq!(claims.accepted().count(), 1);
    }

    #[test]
    fn a_refused_claim_is_judged_again_in_a_newer_record_only() {
        let mut claims = Claims::default();
        let mut record = removing(2, &[3]);
        claims.judge([&record].into_iter(), host(1), |_| true, true);
        // Same record, subject now down: still refused.
        let again = claims.judge([&record].into_iter(), host(1), |_| false, true);
        assert_eq!(again, Judgement::default());
        assert_eq!(claims.accepted().count(), 0);
        record.stamp.version += 1;
        let newer = claims.judge([&record].into_iter(), host(1), |_| false, true);
        assert_eq!(newer.newly_accepted.len(), 1);
    }

    #[test]
    fn claims_about_this_node_are_reported_never_accepted() {
        let mut claims = Claims::default();
        let mut replacer = sample(2, 1);
        replacer.takeovers.replaces = Some(host(1));
        let remover = removing(3, &[1]);
        claims.judge([&replacer, &remover].into_iter(), host(1), |_| false, true);
        assert_eq!(claims.accepted().count(), 0);
        assert_eq!(claims.against(host(1)), BTreeSet::from([host(2), host(3)]));
    }

    #[test]
    fn the_local_nodes_own_claims_and_remembered_ones_are_accepted() {
        let record = removing(1, &[3]);
        let mut claims = Claims::default();
        claims.judge([&record].into_iter(), host(1), |_| true, false);
        assert_eq!(claims.accepted().count(), 1);
        let other = removing(2, &[4]);
        let remembered = Claims::remembered(claims_of(&other));
        assert_eq!(
            remembered.effective(&Arc::new(other)).takeovers.removed,
            vec![host(4)]
        );
    }
}
