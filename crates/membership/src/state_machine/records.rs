//! Metadata records: receiving, checking, keeping and passing them on.
//!
//! A record is accepted only if it decodes completely, is signed by the
//! keys it names, those keys may speak for its host id ([`Binding`]), its
//! host has not been removed, and it is newer than the copy held. Anything
//! else is counted and logged with the sender that delivered it: a forged
//! record (somebody speaking for a host it is not) is refused however
//! new it claims to be, and never passed on.
//!
//! [`Binding`]: ringstore_identity::Binding

use std::net::SocketAddr;
use std::time::Duration;

use rand::seq::IndexedRandom;
use ringstore_placement::HostId;

use super::{MAX_METADATA_CHUNKS, MAX_PARTIAL_METADATA, Membership, MembershipEvent, Output};
use crate::error::MembershipError;
use crate::message::{MetadataChunk, chunk_metadata, encode_control};
use crate::metadata::{MetadataStamp, NodeMetadata, NodeState, SignedMetadata};
use crate::view::reshapes_ring;

/// How often a removed node that keeps talking is sent the records that
/// removed it (so it can learn why nobody answers it).
const TELL_REMOVED_EVERY: Duration = Duration::from_secs(10);

impl Membership {
    /// Sends `record`'s chunks to `to`; an unsigned record (remembered from
    /// a build before identities) is never sent.
    pub(super) fn send_metadata(&mut self, record: &SignedMetadata, to: SocketAddr) {
        let Some(bytes) = record.encode() else {
            return;
        };
        let metadata = &record.metadata;
        for chunk in chunk_metadata(metadata.host_id, metadata.stamp, &bytes) {
            self.send(to, &encode_control(&chunk));
        }
    }

    pub(super) fn receive_chunk(&mut self, sender: HostId, chunk: MetadataChunk) {
        let MetadataChunk {
            host_id,
            stamp,
            index,
            count,
            data,
        } = chunk;
        if count == 0 || count > MAX_METADATA_CHUNKS || index >= count {
            self.stats.metadata_rejected += 1;
            return;
        }
        // A copy as new as ours is skipped, except of this node itself,
        // whose equal stamp may hide an earlier life's other content.
        let local = host_id == self.view.local;
        if self
            .metadata
            .get(&host_id)
            .is_some_and(|m| m.metadata.stamp > stamp || (m.metadata.stamp == stamp && !local))
        {
            return;
        }
        if !self.partial.contains_key(&(host_id, stamp))
            && self.partial.len() >= MAX_PARTIAL_METADATA
        {
            self.partial.pop_first();
        }
        let pieces = self
            .partial
            .entry((host_id, stamp))
            .or_insert_with(|| vec![None; count as usize]);
        if pieces.len() != count as usize {
            self.stats.metadata_rejected += 1;
            return;
        }
        pieces[index as usize] = Some(data);
        if pieces.iter().any(Option::is_none) {
            return;
        }
        let pieces = self
            .partial
            .remove(&(host_id, stamp))
            .expect("just completed");
        let bytes: Vec<u8> = pieces.into_iter().flatten().flatten().collect();
        match SignedMetadata::decode(&bytes) {
            Ok(record)
                if record.metadata.host_id == host_id
                    && record.metadata.stamp == stamp
                    && record.metadata.cluster_name == self.config.cluster_name =>
            {
                self.accept_record(record, sender)
            }
            Err(MembershipError::BadSignature { host }) => {
                self.stats.metadata_forged += 1;
                tracing::warn!(
                    %sender, %host,
                    "metadata not signed by the keys it names: a forgery, refused"
                );
            }
            Ok(_) | Err(_) => {
                self.stats.metadata_rejected += 1;
                tracing::warn!(%sender, host = %host_id, "inconsistent or undecodable metadata dropped");
            }
        }
    }

    /// Takes `record` (delivered by `sender`) if it may speak for its host
    /// and is newer than what this node holds of it, and passes a change
    /// on (see [`Membership::forward_change`]).
    fn accept_record(&mut self, record: SignedMetadata, sender: HostId) {
        let host = record.metadata.host_id;
        if !self.binding.admit(host, &record.metadata.keys) {
            self.stats.metadata_forged += 1;
            tracing::warn!(
                %sender, %host,
                "metadata signed by keys that are not the host's: a forgery, refused"
            );
            return;
        }
        if self.view.removed.contains(&host) {
            self.stats.metadata_refused += 1;
            tracing::debug!(%sender, %host, "metadata of a removed node refused");
            return;
        }
        // Left is for good: a decommissioned node comes back only as a new
        // node (a new key, a new host id), never under its old one.
        let left = |m: &NodeMetadata| m.state == NodeState::Left;
        if self
            .metadata
            .get(&host)
            .is_some_and(|held| left(&held.metadata))
            && !left(&record.metadata)
        {
            self.stats.metadata_refused += 1;
            tracing::warn!(
                %sender, %host,
                "a decommissioned node's record says it is back: refused (it must join anew)"
            );
            return;
        }
        if host == self.view.local {
            self.outdate_own(record.metadata.stamp);
            return;
        }
        let (known, reshapes) = match self.metadata.get(&host) {
            Some(held) if held.metadata.stamp >= record.metadata.stamp => return,
            Some(held) => (true, reshapes_ring(&held.metadata, &record.metadata)),
            None => (false, true),
        };
        self.metadata.insert(host, record.clone());
        self.out
            .push(Output::Event(MembershipEvent::MetadataChanged(host)));
        self.rebuild_view(reshapes);
        if known {
            self.forward_change(&record, sender);
        }
    }

    /// A record of this very node, signed with its key, as new as or newer
    /// than the one it publishes: one of its own from an earlier life (a
    /// data directory restored from a copy). Publishes a newer one, so the
    /// cluster keeps what this node says now.
    fn outdate_own(&mut self, seen: MetadataStamp) {
        let own = NodeMetadata::clone(&self.metadata[&self.view.local].metadata);
        if seen < own.stamp {
            return;
        }
        tracing::warn!(
            seen = ?seen, own = ?own.stamp,
            "a newer record of this node circulates (signed with its key: an earlier \
             life of its data directory?); publishing a newer one"
        );
        let stamp = MetadataStamp {
            generation: own.stamp.generation.max(seen.generation),
            version: own.stamp.version.max(seen.version) + 1,
        };
        self.publish_local(NodeMetadata { stamp, ..own });
    }

    /// Passes a newer version of a member's metadata on, once (a node
    /// accepts each version once), to a few live members other than the
    /// one it came from and its subject: a change then spreads from node to
    /// node at the network's speed, as a rumour does, instead of waiting
    /// for anti-entropy rounds (a node that turned `Normal` after a join
    /// was otherwise missed by a third of a 4-node cluster for up to a
    /// round). The first sighting of a member is not passed on: a node
    /// that starts learns every member at once and would flood the cluster.
    fn forward_change(&mut self, record: &SignedMetadata, from: HostId) {
        let subject = record.metadata.host_id;
        let others: Vec<SocketAddr> = self
            .live
            .iter()
            .filter(|(host, _)| **host != from && **host != subject)
            .map(|(_, info)| info.gossip_addr)
            .collect();
        let chosen: Vec<SocketAddr> = others
            .sample(&mut self.rng, self.config.metadata_gossip_fanout)
            .copied()
            .collect();
        for peer in chosen {
            self.send_metadata(record, peer);
        }
    }

    /// A packet from `removed`, a node this one counts as removed: dropped,
    /// and every [`TELL_REMOVED_EVERY`] the records of the members that
    /// removed or replaced it are sent back, so that it learns why.
    pub(super) fn refuse_removed(&mut self, removed: HostId, from: SocketAddr) {
        self.stats.dropped_removed += 1;
        let now = self.clock.monotonic();
        let due = self
            .told_removed
            .get(&removed)
            .is_none_or(|&at| now.saturating_sub(at) >= TELL_REMOVED_EVERY);
        if !due {
            return;
        }
        if self.told_removed.len() >= 1024 {
            self.told_removed.pop_first();
        }
        self.told_removed.insert(removed, now);
        tracing::info!(%removed, %from, "gossip from a removed node refused; telling it why");
        let claimants: Vec<SignedMetadata> = self
            .view
            .members
            .values()
            .filter(|m| {
                let t = &m.metadata.takeovers;
                t.removed.contains(&removed) || t.replaces == Some(removed)
            })
            .filter_map(|m| self.metadata.get(&m.metadata.host_id).cloned())
            .collect();
        for record in claimants {
            self.send_metadata(&record, from);
        }
    }
}
