//! This node's tokens: kept in storage, fixed by `initial_token`, or chosen
//! by the balanced allocator when a fresh node joins.
//!
//! # Serialized joins
//! Fresh nodes started together must not pick their tokens against the same
//! ring (the allocator is deterministic: they would pick the same tokens). A
//! fresh node therefore gossips itself as `Joining` with no tokens, waits
//! until it has reached the cluster through its seeds (unless it is the only
//! seed), then until gossip has been quiet (no change to its view) for
//! `ring_delay`, so it has seen who else is joining, and then takes turns in
//! [`join_order`]: round-robin over racks, by host id within a rack, and
//! only while no other range movement is under way. Once it has allocated, it
//! saves its tokens, gossips them (still `Joining`) and bootstraps; when it
//! turns `Normal` it is the next node's turn. A node
//! whose turn does not come within a minute (say, a lower node hung)
//! allocates anyway, with a warning.
//!
//! Should two nodes still have chosen against the same ring (they did not see
//! each other in time), their tokens collide; the ring gives a contested token
//! to the older node, so the newer one checks, after `ring_delay`, that the
//! ring holds all its tokens, and chooses again if not.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::{Liveness, NodeState};
use ringstore_placement::allocation::balanced_tokens;
use ringstore_placement::{Location, ReplicationStrategy, Ring, RingMember, Token};
use ringstore_storage::Store;

use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::topology::bootstrap::{self, BOOTSTRAP};
use crate::topology::saved::set_unfinished_bootstrap;

/// The key of the tokens in the storage's system tree.
const TOKENS_META_KEY: &str = "tokens";
/// The first byte of the saved tokens: their format version.
const TOKENS_FORMAT: u8 = 1;
/// How long a node waits for its turn before allocating anyway.
const TURN_PATIENCE: Duration = Duration::from_secs(60);

/// The tokens saved by an earlier start, if any.
pub fn saved_tokens(store: &Store) -> Result<Option<Vec<Token>>> {
    let Some(bytes) = store.meta_get(TOKENS_META_KEY)? else {
        return Ok(None);
    };
    let corrupt = || NodeError::Internal("the saved tokens are corrupt".into());
    let (format, body) = bytes.split_first().ok_or_else(corrupt)?;
    if *format != TOKENS_FORMAT || body.len() % 8 != 0 {
        return Err(corrupt());
    }
    Ok(Some(
        body.chunks_exact(8)
            .map(|c| Token(i64::from_le_bytes(c.try_into().expect("8 bytes"))))
            .collect(),
    ))
}

/// Saves the tokens durably.
pub async fn save_tokens(store: &Store, tokens: &[Token]) -> Result<()> {
    let mut bytes = vec![TOKENS_FORMAT];
    for token in tokens {
        bytes.extend_from_slice(&token.0.to_le_bytes());
    }
    store.meta_put(TOKENS_META_KEY, &bytes).await?;
    Ok(())
}

/// The tokens to start with: the saved ones, else `initial_token` (saved now),
/// else none yet. Refuses configured tokens that contradict saved ones.
pub async fn startup_tokens(
    store: &Store,
    configured: Option<&[Token]>,
) -> Result<Option<Vec<Token>>> {
    let saved = saved_tokens(store)?;
    match (saved, configured) {
        (Some(saved), Some(configured)) => {
            let mut wanted = configured.to_vec();
            wanted.sort_unstable();
            if wanted != saved {
                return Err(NodeError::InvalidArgument(format!(
                    "initial_token lists {} tokens that differ from the {} this node saved at its first start; \
                     a node cannot change its tokens (remove initial_token, or use a fresh data directory)",
                    wanted.len(),
                    saved.len()
                )));
            }
            Ok(Some(saved))
        }
        (Some(saved), None) => Ok(Some(saved)),
        (None, Some(configured)) => {
            let mut tokens = configured.to_vec();
            tokens.sort_unstable();
            save_tokens(store, &tokens).await?;
            Ok(Some(tokens))
        }
        (None, None) => Ok(None),
    }
}

/// Waits for this fresh node's turn, takes `fixed` tokens (`initial_token`)
/// or allocates balanced ones against the ring it sees, saves them, gossips
/// them as `Joining`, and — once they are known not to collide with another
/// node's — bootstraps ([`bootstrap`]): streams
/// the ranges it gains and turns `Normal`. Chooses again if balanced tokens
/// collided; fixed ones that collide are an error.
pub async fn join(context: Arc<NodeContext>, fixed: Option<Vec<Token>>) -> Result<Vec<Token>> {
    let ring_delay = Duration::from_millis(context.config.ring_delay_ms);
    wait_until_connected(&context).await;
    for attempt in 1..=5 {
        wait_until_quiet(&context, ring_delay).await;
        wait_for_turn(&context).await;
        wait_for_no_movement(&context).await;
        let tokens = match &fixed {
            Some(tokens) => tokens.clone(),
            None => allocate(&context)?,
        };
        save_tokens(&context.store, &tokens).await?;
        set_unfinished_bootstrap(&context.store, Some(BOOTSTRAP)).await?;
        let gossiped = tokens.clone();
        context
            .membership
            .update_local(move |m| m.tokens = gossiped)
            .await?;
        tokio::time::sleep(ring_delay).await;
        let owned = context
            .view()
            .pending_ring
            .as_ref()
            .map_or(0, |ring| ring.tokens_of(context.host_id).len());
        if owned == tokens.len() {
            tracing::info!(count = tokens.len(), "took tokens; bootstrapping");
            bootstrap::stream_and_complete(&context, BOOTSTRAP).await?;
            return Ok(tokens);
        }
        if fixed.is_some() {
            return Err(NodeError::InvalidArgument(format!(
                "{} of the initial_token tokens are already owned by other nodes",
                tokens.len() - owned
            )));
        }
        tracing::warn!(
            attempt,
            lost = tokens.len() - owned,
            "some chosen tokens were already taken by another node; choosing again"
        );
        context
            .membership
            .update_local(|m| m.tokens.clear())
            .await?;
    }
    Err(NodeError::Internal(
        "could not choose tokens that no other node holds".into(),
    ))
}

/// Waits until no other node's range movement is under way (one at a time).
pub(crate) async fn wait_for_no_movement(context: &NodeContext) {
    let mut views = context.membership.watch_view();
    loop {
        let movements = context.view().movements();
        if movements.is_empty() {
            return;
        }
        tracing::info!(?movements, "waiting for another range movement to finish");
        let _ = tokio::time::timeout(Duration::from_secs(1), views.changed()).await;
    }
}

/// Waits until gossip has reached another node, unless this node is its own
/// only seed (it starts a new cluster).
pub(crate) async fn wait_until_connected(context: &NodeContext) {
    let own = context.config.advertised_gossip_address();
    if context.config.seeds.iter().all(|&seed| seed == own) {
        return;
    }
    let mut views = context.membership.watch_view();
    let started = tokio::time::Instant::now();
    while context.view().members.len() < 2 {
        if started.elapsed() > Duration::from_secs(5) {
            tracing::info!(seeds = ?context.config.seeds, "waiting to reach the cluster through the seeds before choosing tokens");
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), views.changed()).await;
    }
}

/// Waits until the view has not changed for `quiet`: the nodes starting with
/// this one have had time to show up (and those choosing tokens to publish
/// them). In a big, busy cluster gossip may never be quiet that long, so the
/// wait ends after ten times `quiet` regardless.
async fn wait_until_quiet(context: &NodeContext, quiet: Duration) {
    let mut views = context.membership.watch_view();
    views.mark_unchanged();
    let give_up = tokio::time::Instant::now() + quiet * 10;
    while tokio::time::Instant::now() < give_up {
        match tokio::time::timeout(quiet, views.changed()).await {
            Ok(Ok(())) => continue,
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// Waits until this node is first in the join order among the live,
/// token-less joining nodes it sees (see [`join_order`]).
async fn wait_for_turn(context: &NodeContext) {
    let started = tokio::time::Instant::now();
    let mut views = context.membership.watch_view();
    loop {
        let view = context.view();
        let first = join_order(&view).into_iter().next();
        match first {
            None => return,
            Some(host) if host == context.host_id => return,
            Some(_) if started.elapsed() > TURN_PATIENCE => {
                tracing::warn!(
                    "the node before this one has not chosen tokens for a minute; choosing now"
                );
                return;
            }
            Some(host) => {
                tracing::info!(waiting_for = %host, "waiting for an earlier joining node to choose its tokens");
                let _ = tokio::time::timeout(Duration::from_secs(1), views.changed()).await;
            }
        }
    }
}

/// The order in which the live, token-less joining nodes choose tokens:
/// round-robin over racks — a rack's next joiner goes before any rack's
/// joiner after it, counting the rack's nodes that already have tokens — and
/// by host id within a rack. Growing racks evenly is what lets the balanced
/// allocator keep every rack's nodes balanced (it cannot move tokens placed
/// before the final rack layout was known). Every node computes the same order
/// from the same view.
pub fn join_order(view: &ringstore_membership::ClusterView) -> Vec<ringstore_placement::HostId> {
    use std::collections::BTreeMap;
    let mut placed: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut waiting: BTreeMap<(String, String), Vec<ringstore_placement::HostId>> = BTreeMap::new();
    for member in view.members.values() {
        let m = &member.metadata;
        let rack = (m.dc.to_string(), m.rack.to_string());
        if !m.tokens.is_empty() && m.state != NodeState::Left {
            *placed.entry(rack).or_default() += 1;
        } else if m.tokens.is_empty()
            && m.state == NodeState::Joining
            && member.liveness == Liveness::Up
        {
            waiting.entry(rack).or_default().push(m.host_id);
        }
    }
    let mut order: Vec<(usize, (String, String), ringstore_placement::HostId)> = waiting
        .into_iter()
        .flat_map(|(rack, mut hosts)| {
            hosts.sort_unstable();
            let base = placed.get(&rack).copied().unwrap_or(0);
            hosts
                .into_iter()
                .enumerate()
                .map(move |(i, host)| (base + i, rack.clone(), host))
        })
        .collect();
    order.sort();
    order.into_iter().map(|(_, _, host)| host).collect()
}

/// Balanced tokens against every other node's tokens as gossip shows them.
fn allocate(context: &NodeContext) -> Result<Vec<Token>> {
    let view = context.view();
    let mut claimed = std::collections::BTreeSet::new();
    let members: Vec<RingMember> = view
        .members
        .values()
        .filter(|m| m.metadata.host_id != context.host_id && m.metadata.state != NodeState::Left)
        .filter_map(|m| {
            // A token two others claim (a collision still being resolved) counts once.
            let tokens: Vec<Token> = m
                .metadata
                .tokens
                .iter()
                .copied()
                .filter(|&t| claimed.insert(t))
                .collect();
            (!tokens.is_empty())
                .then(|| RingMember::new(m.metadata.host_id, m.metadata.location(), tokens))
        })
        .collect();
    let ring = Ring::new(0, members).map_err(|e| {
        NodeError::Internal(format!("cannot build the ring to allocate against: {e}"))
    })?;
    let config = &context.config;
    let location = Location::new(config.dc.as_str(), config.rack.as_str());
    let strategy = ReplicationStrategy::network_topology([(
        config.dc.as_str(),
        config.allocate_tokens_for_local_replication_factor,
    )])
    .map_err(|e| NodeError::InvalidArgument(e.to_string()))?;
    balanced_tokens(
        &ring,
        context.host_id,
        &location,
        config.num_tokens as usize,
        &strategy,
    )
    .map_err(|e| NodeError::Internal(format!("token allocation failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_membership::{ClusterView, Generation, MemberInfo, MetadataStamp, NodeMetadata};
    use ringstore_placement::HostId;
    use std::collections::BTreeMap;

    fn member(id: u128, rack: &str, tokens: usize) -> MemberInfo {
        let addr: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
        MemberInfo {
            metadata: Arc::new(NodeMetadata {
                host_id: HostId::from_u128(id),
                stamp: MetadataStamp {
                    generation: Generation(1),
                    version: 1,
                },
                cluster_name: "c".into(),
                dc: "dc1".into(),
                rack: rack.into(),
                client_addr: addr,
                internode_addr: addr,
                gossip_addr: addr,
                tokens: (0..tokens as i64)
                    .map(|t| Token(t + id as i64 * 100))
                    .collect(),
                state: if tokens > 0 {
                    NodeState::Normal
                } else {
                    NodeState::Joining
                },
                load_bytes: 0,
                schema_version: uuid::Uuid::nil(),
                software_version: "t".into(),
                takeovers: Default::default(),
            }),
            liveness: Liveness::Up,
        }
    }

    #[test]
    fn joiners_take_turns_round_robin_over_racks() {
        let members = [
            member(1, "a", 0),
            member(2, "a", 0),
            member(3, "b", 0),
            member(4, "c", 4),
            member(5, "c", 0),
        ];
        let view = ClusterView {
            local: HostId::from_u128(1),
            members: members
                .into_iter()
                .map(|m| (m.metadata.host_id, m))
                .collect(),
            ring: Arc::new(Ring::empty(0)),
            joining: BTreeMap::new(),
            pending_ring: None,
            removed: Default::default(),
        };
        let order: Vec<u128> = join_order(&view)
            .into_iter()
            .map(|h| h.0.as_u128())
            .collect();
        // Rack c already has a node, so its joiner comes after the first of a and b.
        assert_eq!(order, vec![1, 3, 2, 5]);
    }
}

#[cfg(test)]
mod startup_tests {
    use super::*;
    use ringstore_storage::{Durability, MemoryEngine};

    #[tokio::test]
    async fn configured_tokens_must_match_the_saved_ones() {
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        assert_eq!(
            startup_tokens(&store, None).await.unwrap(),
            None,
            "a fresh node has none"
        );
        let first = startup_tokens(&store, Some(&[Token(5), Token(-3)]))
            .await
            .unwrap();
        assert_eq!(
            first,
            Some(vec![Token(-3), Token(5)]),
            "initial_token is saved, sorted"
        );
        let again = startup_tokens(&store, Some(&[Token(-3), Token(5)]))
            .await
            .unwrap();
        assert_eq!(again, first, "the same tokens in another order are fine");
        assert_eq!(
            startup_tokens(&store, None).await.unwrap(),
            first,
            "a restart without initial_token keeps them"
        );
        let error = startup_tokens(&store, Some(&[Token(1), Token(2)]))
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("differ from the 2 this node saved"),
            "{error}"
        );
    }
}
