//! The ring snapshot: sorted tokens and the host that owns each.

use std::collections::BTreeMap;

use crate::error::{PlacementError, Result};
use crate::host::{HostId, Location};
use crate::murmur3::cassandra_murmur3_x64_128;
use crate::token::{Token, TokenRange};

/// A host's place in the ring: its identity, location and tokens. The input to
/// building a [`Ring`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingMember {
    /// The host.
    pub host: HostId,
    /// Its data center and rack.
    pub location: Location,
    /// Its tokens, in any order, at least one, none shared with another member.
    pub tokens: Vec<Token>,
}

impl RingMember {
    /// A member from its parts.
    pub fn new(host: HostId, location: Location, tokens: Vec<Token>) -> RingMember {
        RingMember {
            host,
            location,
            tokens,
        }
    }
}

/// A host of a built ring, with the number of tokens it owns there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingHost {
    /// The host.
    pub id: HostId,
    /// Its data center and rack.
    pub location: Location,
    /// How many of the ring's tokens it owns (its vnode count, and so its weight).
    pub token_count: usize,
}

/// The index of a host in [`Ring::hosts`]; valid only for the ring it came from.
pub(crate) type HostIndex = u32;

/// An immutable ring snapshot: every member's tokens in one sorted array.
///
/// Invariants: `tokens` is strictly increasing; `owners[i]` owns `tokens[i]`;
/// `hosts` is sorted by host id and every host owns at least one token. The
/// range owned by `tokens[i]` is `(tokens[i-1], tokens[i]]`, and the range of
/// `tokens[0]` wraps around from the last token. A key belongs to the first ring
/// token >= its token, wrapping to `tokens[0]`.
///
/// The `epoch` is the builder's counter (it grows with every change a node
/// sees); the `checksum` depends only on members, locations and tokens, so two
/// nodes with the same view compute the same checksum whatever their epochs.
#[derive(Clone, Debug)]
pub struct Ring {
    epoch: u64,
    checksum: u64,
    hosts: Vec<RingHost>,
    tokens: Vec<Token>,
    owners: Vec<HostIndex>,
}

impl Ring {
    /// The empty ring: no members, every key without replicas.
    pub fn empty(epoch: u64) -> Ring {
        Ring::new(epoch, Vec::new()).expect("the empty ring is valid")
    }

    /// Builds a ring from its members. Refused when a host appears twice, has
    /// no tokens, or two hosts claim one token.
    pub fn new(epoch: u64, members: impl IntoIterator<Item = RingMember>) -> Result<Ring> {
        let mut members: Vec<RingMember> = members.into_iter().collect();
        members.sort_by_key(|m| m.host);
        if let Some(pair) = members.windows(2).find(|p| p[0].host == p[1].host) {
            return Err(PlacementError::DuplicateHost { host: pair[0].host });
        }
        if let Some(member) = members.iter().find(|m| m.tokens.is_empty()) {
            return Err(PlacementError::NoTokens { host: member.host });
        }

        let mut claimed: Vec<(Token, HostIndex)> = members
            .iter()
            .enumerate()
            .flat_map(|(index, m)| m.tokens.iter().map(move |&t| (t, index as HostIndex)))
            .collect();
        claimed.sort_unstable();
        if let Some(pair) = claimed.windows(2).find(|p| p[0].0 == p[1].0) {
            return Err(PlacementError::TokenCollision {
                token: pair[0].0,
                first: members[pair[0].1 as usize].host,
                second: members[pair[1].1 as usize].host,
            });
        }

        let checksum = checksum_of(&mut members);
        let hosts = members
            .into_iter()
            .map(|m| RingHost {
                id: m.host,
                location: m.location,
                token_count: m.tokens.len(),
            })
            .collect();
        let (tokens, owners) = claimed.into_iter().unzip();
        Ok(Ring {
            epoch,
            checksum,
            hosts,
            tokens,
            owners,
        })
    }

    /// The epoch this snapshot was built with.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A digest of the members, their locations and tokens, independent of the epoch
    /// and of the order members were given in.
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// The hosts, sorted by id.
    pub fn hosts(&self) -> &[RingHost] {
        &self.hosts
    }

    /// The host with id `id`, if it is a member.
    pub fn host(&self, id: HostId) -> Option<&RingHost> {
        self.host_index(id).map(|i| &self.hosts[i as usize])
    }

    /// Whether `id` is a member.
    pub fn contains_host(&self, id: HostId) -> bool {
        self.host_index(id).is_some()
    }

    /// All tokens, sorted.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// The number of tokens on the ring.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the ring has no members.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tokens of host `id`, sorted; empty if it is not a member.
    pub fn tokens_of(&self, id: HostId) -> Vec<Token> {
        match self.host_index(id) {
            Some(index) => self
                .tokens
                .iter()
                .zip(&self.owners)
                .filter(|&(_, &owner)| owner == index)
                .map(|(&t, _)| t)
                .collect(),
            None => Vec::new(),
        }
    }

    /// The members this ring was built from (tokens sorted).
    pub fn members(&self) -> Vec<RingMember> {
        let mut members: Vec<RingMember> = self
            .hosts
            .iter()
            .map(|h| RingMember::new(h.id, h.location.clone(), Vec::with_capacity(h.token_count)))
            .collect();
        for (&token, &owner) in self.tokens.iter().zip(&self.owners) {
            members[owner as usize].tokens.push(token);
        }
        members
    }

    /// The host owning `token` (the first ring token >= it, wrapping), or `None`
    /// on the empty ring.
    pub fn primary_owner(&self, token: Token) -> Option<&RingHost> {
        self.position_of(token)
            .map(|p| &self.hosts[self.owners[p] as usize])
    }

    /// Each ring token with its owner, in token order.
    pub fn entries(&self) -> impl Iterator<Item = (Token, &RingHost)> {
        self.tokens
            .iter()
            .zip(&self.owners)
            .map(|(&t, &o)| (t, &self.hosts[o as usize]))
    }

    /// The range owned by the token at `position`: `(previous token, token]`.
    pub fn range_at(&self, position: usize) -> TokenRange {
        let previous = if position == 0 {
            self.tokens.len() - 1
        } else {
            position - 1
        };
        TokenRange::new(self.tokens[previous], self.tokens[position])
    }

    /// Primary ownership: each host's fraction of the token space, summing to 1.
    pub fn primary_ownership(&self) -> BTreeMap<HostId, f64> {
        let mut owned = vec![0.0; self.hosts.len()];
        for position in 0..self.tokens.len() {
            owned[self.owners[position] as usize] += self.range_at(position).fraction();
        }
        self.hosts.iter().map(|h| h.id).zip(owned).collect()
    }

    /// A copy with `member` added (or, if its host is already a member, replaced).
    pub fn with_member(&self, epoch: u64, member: RingMember) -> Result<Ring> {
        let mut members = self.members();
        members.retain(|m| m.host != member.host);
        members.push(member);
        Ring::new(epoch, members)
    }

    /// A copy without host `id`.
    pub fn without_host(&self, epoch: u64, id: HostId) -> Ring {
        let members = self.members().into_iter().filter(|m| m.host != id);
        Ring::new(epoch, members).expect("removing a member keeps a valid ring")
    }

    /// The position of the first ring token >= `token`, wrapping to 0; `None` on
    /// the empty ring.
    pub(crate) fn position_of(&self, token: Token) -> Option<usize> {
        if self.tokens.is_empty() {
            return None;
        }
        let position = self.tokens.partition_point(|&t| t < token);
        Some(if position == self.tokens.len() {
            0
        } else {
            position
        })
    }

    pub(crate) fn owners(&self) -> &[HostIndex] {
        &self.owners
    }

    pub(crate) fn host_at(&self, index: HostIndex) -> &RingHost {
        &self.hosts[index as usize]
    }

    pub(crate) fn host_index(&self, id: HostId) -> Option<HostIndex> {
        self.hosts
            .binary_search_by_key(&id, |h| h.id)
            .ok()
            .map(|i| i as HostIndex)
    }
}

/// Hashes a canonical encoding of the members (sorted by host, tokens sorted),
/// versioned by a leading byte so a future encoding cannot collide with it.
fn checksum_of(members: &mut [RingMember]) -> u64 {
    const CHECKSUM_VERSION: u8 = 1;
    let mut bytes = vec![CHECKSUM_VERSION];
    for member in members.iter_mut() {
        member.tokens.sort_unstable();
        bytes.extend_from_slice(member.host.0.as_bytes());
        for name in [member.location.dc.as_str(), member.location.rack.as_str()] {
            bytes.extend_from_slice(&(name.len() as u32).to_le_bytes());
            bytes.extend_from_slice(name.as_bytes());
        }
        bytes.extend_from_slice(&(member.tokens.len() as u32).to_le_bytes());
        for token in &member.tokens {
            bytes.extend_from_slice(&token.0.to_le_bytes());
        }
    }
    cassandra_murmur3_x64_128(&bytes, 0).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(n: u128, tokens: &[i64]) -> RingMember {
        RingMember::new(
            HostId::from_u128(n),
            Location::new("dc1", "rack1"),
            tokens.iter().copied().map(Token).collect(),
        )
    }

    #[test]
    fn owner_is_the_first_token_at_or_after_the_key_wrapping() {
        let ring = Ring::new(1, [member(1, &[-100, 100]), member(2, &[0])]).unwrap();
        let owner = |t| ring.primary_owner(Token(t)).unwrap().id;
        assert_eq!(owner(-100), HostId::from_u128(1));
        assert_eq!(owner(-99), HostId::from_u128(2));
        assert_eq!(owner(0), HostId::from_u128(2));
        assert_eq!(owner(1), HostId::from_u128(1));
        assert_eq!(owner(101), HostId::from_u128(1), "wraps to the first token");
        assert_eq!(owner(i64::MIN), HostId::from_u128(1));
    }

    #[test]
    fn checksum_ignores_epoch_and_member_order_but_not_tokens() {
        let a = Ring::new(1, [member(1, &[5, 1]), member(2, &[3])]).unwrap();
        let b = Ring::new(9, [member(2, &[3]), member(1, &[1, 5])]).unwrap();
        let c = Ring::new(1, [member(1, &[5, 1]), member(2, &[4])]).unwrap();
        assert_eq!(a.checksum(), b.checksum());
        assert_ne!(a.checksum(), c.checksum());
        assert_eq!(b.epoch(), 9);
    }

    #[test]
    fn token_collisions_and_tokenless_members_are_refused() {
        assert!(matches!(
            Ring::new(1, [member(1, &[5]), member(2, &[5])]),
            Err(PlacementError::TokenCollision {
                token: Token(5),
                ..
            })
        ));
        assert!(matches!(
            Ring::new(1, [member(1, &[])]),
            Err(PlacementError::NoTokens { .. })
        ));
        assert!(matches!(
            Ring::new(1, [member(1, &[1]), member(1, &[2])]),
            Err(PlacementError::DuplicateHost { .. })
        ));
    }

    #[test]
    fn primary_ownership_sums_to_one() {
        let ring = Ring::new(1, [member(1, &[0]), member(2, &[i64::MIN])]).unwrap();
        let owned = ring.primary_ownership();
        assert!((owned[&HostId::from_u128(1)] - 0.5).abs() < 1e-12);
        assert!((owned.values().sum::<f64>() - 1.0).abs() < 1e-12);
        let single = Ring::new(1, [member(1, &[42])]).unwrap();
        assert_eq!(single.primary_ownership()[&HostId::from_u128(1)], 1.0);
    }

    #[test]
    fn empty_ring_has_no_owner() {
        assert!(Ring::empty(0).primary_owner(Token(0)).is_none());
    }
}
