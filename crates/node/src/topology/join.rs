//! A fresh node's join: its tokens fixed by `initial_token`, or chosen by
//! the balanced allocator once it is its turn; then its bootstrap.
//!
//! # Joins
//! Fresh nodes started together must not pick their tokens against the same
//! ring (the allocator is deterministic: they would pick the same tokens). A
//! fresh node therefore gossips itself as `Joining` with no tokens, waits
//! until it has reached the cluster through its seeds (unless it is the only
//! seed), then until membership has been quiet for `ring_delay` (at least a
//! second: no member appeared, went, moved or changed state; tokens others
//! gossip meanwhile and members seen down or up again do not count), so it
//! has seen who else is joining. Then
//! [`join_turn`](crate::topology::join_turn) decides from its view:
//! - the ring has owners: the joiners take turns in
//!   [`join_order`](crate::topology::join_turn::join_order), each only while no other
//!   range movement is under way; when a node turns `Normal` it is the next
//!   node's turn. A node whose turn does not come within a minute (say, a
//!   lower node hung) allocates anyway, with a warning.
//! - the ring is empty (a new cluster): every joiner allocates at once
//!   against the cohort members before it, gossiped or computed
//!   ([`cohort_tokens`](crate::topology::join_turn::cohort_tokens)), never taking a
//!   token another node has gossiped, and the cohort bootstraps together. A
//!   member waits, before it turns `Normal`, until no live member is still
//!   choosing (so the ring stays empty while they announce; bounded, and
//!   over once one is `Normal`), until its own tokens are known everywhere,
//!   and until it holds every member record its peers hold
//!   ([`wait_until_caught_up`](crate::topology::catch_up::wait_until_caught_up)); then
//!   it checks for collisions, and streams what the ring it sees then holds
//!   of its ranges (nothing, in a new cluster). A write acknowledged before
//!   every node knew its tokens was acknowledged by nodes already `Normal`,
//!   which it therefore sees, and streams from.
//!
//! Either way, once it has allocated, a node saves its tokens, gossips them
//! (still `Joining`) and bootstraps. Should two nodes still have chosen
//! against the same ring (they did not see each other in time), their tokens
//! collide; the ring gives a contested token to the older node, so the newer
//! one checks, after `ring_delay`, that the ring holds all its tokens, and
//! chooses again if not.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::allocation::balanced_tokens;
use ringstore_placement::{ReplicationStrategy, Ring, RingMember, Token};
use ringstore_streaming::StreamOperation;

use crate::error::{NodeError, Result, TopologyError};
use crate::topology::bootstrap;
use crate::topology::catch_up::wait_until_caught_up;
use crate::topology::host::{TokenAllocation, TopologyHost};
use crate::topology::join_turn::{
    CohortMember, JoinTurn, balance_group, claimed_by_others, cohort_before, cohort_still_choosing,
    cohort_tokens, gossiped_tokens, join_order, join_turn, who_is_starting,
};
use crate::topology::persisted::{save_tokens, set_unfinished_bootstrap};
use crate::topology::waits::{wait_for_no_movement, wait_until_announced, wait_until_connected};

/// How long a node waits for its turn before allocating anyway.
const TURN_PATIENCE: Duration = Duration::from_secs(60);
/// The shortest quiet a fresh node waits for before choosing, whatever
/// `ring_delay`: one metadata gossip round (1 s), as a view that has not
/// changed for less than that says little about who else is starting.
const MIN_QUIET: Duration = Duration::from_secs(1);
/// How many `ring_delay`s a member of a new cluster's cohort waits for the
/// others to choose tokens before it turns `Normal` anyway: twice the
/// longest wait for quiet gossip, after which they all choose.
const COHORT_PATIENCE_RING_DELAYS: u32 = 20;

/// How many times a fresh node chooses tokens before it gives up, each time
/// after another node took some of those it chose.
const CHOOSE_ATTEMPTS: u32 = 5;

/// Waits for this fresh node's turn (or, in a new cluster, for nothing),
/// takes `fixed` tokens (`initial_token`) or allocates balanced ones against
/// the ring it sees (or the cohort before it), saves them, gossips them as
/// `Joining`, and — once they are known not to collide with another node's —
/// bootstraps ([`bootstrap`]): streams the ranges it gains and turns
/// `Normal`. Chooses again if balanced tokens collided; fixed ones that
/// collide are an error.
pub async fn join<H: TopologyHost>(
    context: Arc<H>,
    fixed: Option<Vec<Token>>,
) -> Result<Vec<Token>> {
    let ring_delay = context.ring_delay();
    wait_until_connected(&*context).await;
    // Set once this node has chosen as a member of a new cluster's cohort:
    // it stays one when it has to choose again.
    let mut cohort = false;
    for attempt in 1..=CHOOSE_ATTEMPTS {
        wait_until_quiet(&*context, ring_delay.max(MIN_QUIET)).await;
        let view = context.view();
        let tokens = match (&fixed, join_turn(&view, context.host_id())) {
            (Some(tokens), JoinTurn::Cohort(_)) => {
                cohort = true;
                tokens.clone()
            }
            (None, _) if cohort => choose_again_in_cohort(&*context)?,
            (None, JoinTurn::Cohort(before)) => {
                cohort = true;
                tracing::info!(
                    earlier = before.len(),
                    "a new cluster: choosing tokens after the joiners before this one"
                );
                let tokens = allocate_in_cohort(&*context, &view, Vec::new(), &before)?;
                if claimed_by_others(&view, context.host_id(), &tokens) {
                    // Another node saw the cohort otherwise; never take its tokens.
                    tracing::info!(
                        "another node has gossiped some of these tokens; choosing against every gossiped token"
                    );
                    choose_again_in_cohort(&*context)?
                } else {
                    tokens
                }
            }
            (_, JoinTurn::Serial) => {
                wait_for_turn(&*context).await;
                wait_for_no_movement(&*context).await;
                // Tokens are balanced against the ring: down members' too.
                wait_until_caught_up(&*context).await;
                match &fixed {
                    Some(tokens) => tokens.clone(),
                    None => allocate(&*context)?,
                }
            }
        };
        save_tokens(context.store(), &tokens).await?;
        set_unfinished_bootstrap(context.store(), Some(StreamOperation::Bootstrap)).await?;
        let gossiped = tokens.clone();
        context
            .membership()
            .update_local(move |m| m.tokens = gossiped)
            .await?;
        tokio::time::sleep(ring_delay).await;
        if cohort {
            // Then every member it knows has gossiped its tokens, every node
            // knows this node's, and it knows every node's as of then: a
            // collision with any of them shows below.
            wait_for_cohort(&*context, ring_delay * COHORT_PATIENCE_RING_DELAYS).await;
            wait_until_announced(&*context).await;
            wait_until_caught_up(&*context).await;
        }
        let owned = context
            .view()
            .pending_ring
            .as_ref()
            .map_or(0, |ring| ring.tokens_of(context.host_id()).len());
        if owned == tokens.len() {
            tracing::info!(count = tokens.len(), cohort, "took tokens; bootstrapping");
            bootstrap::stream_and_complete(&context, StreamOperation::Bootstrap).await?;
            return Ok(tokens);
        }
        if fixed.is_some() {
            return Err(TopologyError::InitialTokensTaken {
                taken: tokens.len() - owned,
            }
            .into());
        }
        tracing::warn!(
            attempt,
            lost = tokens.len() - owned,
            "some chosen tokens were already taken by another node; choosing again"
        );
        context
            .membership()
            .update_local(|m| m.tokens.clear())
            .await?;
    }
    Err(TopologyError::NoFreeTokens {
        attempts: CHOOSE_ATTEMPTS,
    }
    .into())
}

/// Waits until no live member of this node's cohort is still choosing
/// tokens, or `patience` has passed (a member that hangs must not hold the
/// whole cluster back; one that chooses later finds the ring no longer
/// empty and takes its turn).
async fn wait_for_cohort(context: &impl TopologyHost, patience: Duration) {
    let mut views = context.membership().watch_view();
    let give_up = tokio::time::Instant::now() + patience;
    while let Some(host) = cohort_still_choosing(&context.view(), context.host_id()) {
        if tokio::time::Instant::now() >= give_up {
            tracing::info!(waiting_for = %host, "a joiner of the new cluster is still choosing tokens; going on");
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), views.changed()).await;
    }
}

/// Balanced tokens against `taken`, then the cohort members `before` this
/// node, of those only its balance group in `view` ([`cohort_tokens`]).
fn allocate_in_cohort(
    context: &impl TopologyHost,
    view: &ClusterView,
    taken: Vec<RingMember>,
    before: &[CohortMember],
) -> Result<Vec<Token>> {
    let allocation = context.token_allocation();
    let group = balance_group(
        view,
        &allocation.location,
        allocation.local_replication_factor,
    );
    cohort_tokens(
        taken,
        before,
        &group,
        context.host_id(),
        &allocation.location,
        allocation.num_tokens,
        &allocation_strategy(&allocation)?,
    )
    .map_err(NodeError::placement("token allocation"))
}

/// A cohort member's tokens when its first choice collided: against every
/// gossiped token, then the members before it still choosing.
fn choose_again_in_cohort(context: &impl TopologyHost) -> Result<Vec<Token>> {
    let view = context.view();
    let me = context.host_id();
    allocate_in_cohort(
        context,
        &view,
        gossiped_tokens(&view, me),
        &cohort_before(&view, me),
    )
}

/// The strategy the allocator balances: `allocate_tokens_for_local_replication_factor`
/// replicas in this node's data center.
fn allocation_strategy(allocation: &TokenAllocation) -> Result<ReplicationStrategy> {
    ReplicationStrategy::network_topology([(
        allocation.location.dc.as_str(),
        allocation.local_replication_factor,
    )])
    .map_err(|e| TopologyError::AllocationSettings(e).into())
}

/// Waits until who is starting ([`who_is_starting`]: the members, their
/// places and states, the ring's owners) has not changed for
/// `quiet`: the nodes starting with this one have had time to show up.
/// Tokens gossiped meanwhile do not restart the wait. In a big, busy
/// cluster membership may never be quiet that long, so the wait ends after
/// ten times `quiet` regardless.
async fn wait_until_quiet(context: &impl TopologyHost, quiet: Duration) {
    let mut views = context.membership().watch_view();
    let mut seen = who_is_starting(&views.borrow_and_update());
    let started = tokio::time::Instant::now();
    let give_up = started + quiet * 10;
    let mut quiet_until = started + quiet;
    loop {
        let wake = quiet_until.min(give_up);
        match tokio::time::timeout_at(wake, views.changed()).await {
            Ok(Ok(())) => {
                let now = who_is_starting(&views.borrow_and_update());
                if now != seen {
                    seen = now;
                    quiet_until = tokio::time::Instant::now() + quiet;
                }
            }
            Ok(Err(_)) | Err(_) => return,
        }
    }
}

/// Waits until this node is first in the join order among the live,
/// token-less joining nodes it sees (see [`join_order`]).
async fn wait_for_turn(context: &impl TopologyHost) {
    let started = tokio::time::Instant::now();
    let mut views = context.membership().watch_view();
    loop {
        let view = context.view();
        let first = join_order(&view).into_iter().next();
        match first {
            None => return,
            Some(host) if host == context.host_id() => return,
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

/// Balanced tokens against every other node's tokens as gossip shows them.
fn allocate(context: &impl TopologyHost) -> Result<Vec<Token>> {
    let view = context.view();
    let ring = Ring::new(0, gossiped_tokens(&view, context.host_id())).map_err(
        NodeError::placement("building the ring to allocate against"),
    )?;
    let allocation = context.token_allocation();
    let strategy = allocation_strategy(&allocation)?;
    balanced_tokens(
        &ring,
        context.host_id(),
        &allocation.location,
        allocation.num_tokens,
        &strategy,
    )
    .map_err(NodeError::placement("token allocation"))
}
