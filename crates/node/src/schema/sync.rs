//! Keeping every node's schema equal: pushes on change, with agreement, and a
//! background exchange with any live node whose schema version differs.
//!
//! Every function takes the node as its [`SchemaHost`] (see `host.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use ringstore_membership::{Liveness, NodeState};
use ringstore_proto::v1 as pb;

use crate::error::schema::{PushFailure, UnconfirmedPush};
use crate::error::{NodeError, Result, SchemaError};
use crate::schema::host::SchemaHost;
use crate::schema::store::snapshot_of;
use crate::schema::wire::schema_entry_from_pb;
use crate::schema::{KeyspaceDef, SchemaEntry};

/// Merges `entries` into the local schema and, when that changed it, gossips
/// the new schema version.
/// Data of keyspaces the merge dropped is deleted from local storage.
pub async fn merge_and_publish(host: &dyn SchemaHost, entries: Vec<SchemaEntry>) -> Result<bool> {
    let before = host.schema().current();
    let changed = host.schema().merge(entries).await?;
    if changed {
        let after = host.schema().current();
        for dropped in before
            .keyspaces()
            .filter(|k| after.keyspace_by_id(k.id).is_none())
        {
            host.store().drop_keyspace(dropped.id).await?;
        }
        let version = after.version();
        host.membership()
            .update_local(move |m| m.schema_version = version)
            .await?;
    }
    Ok(changed)
}

/// Pushes the local schema to every live node and waits until each has
/// merged it (schema agreement), or the schema timeout passes.
pub async fn push_to_live_nodes(host: &dyn SchemaHost) -> Result<()> {
    let view = host.membership().view();
    let snapshot = snapshot_of(&host.schema().current());
    let timeout = host.schema_timeout();
    let pushes = view
        .members
        .values()
        .filter(|m| m.liveness == Liveness::Up && m.metadata.host_id != host.host_id())
        .map(|m| {
            let mut client = host.peers().client(m.metadata.internode_addr);
            let snapshot = snapshot.clone();
            let address = m.metadata.internode_addr;
            async move {
                let result = tokio::time::timeout(timeout, client.push_schema(snapshot)).await;
                match result {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(status)) => Err(UnconfirmedPush {
                        address,
                        failure: PushFailure::Refused(Box::new(status)),
                    }),
                    Err(_) => Err(UnconfirmedPush {
                        address,
                        failure: PushFailure::NoAnswer(timeout),
                    }),
                }
            }
        });
    let failures: Vec<UnconfirmedPush> = join_all(pushes)
        .await
        .into_iter()
        .filter_map(|r| r.err())
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(SchemaError::NotAgreed { failures }.into())
    }
}

/// The pause between two attempts of [`push_with_retries`].
const PUSH_RETRY_DELAY: Duration = Duration::from_millis(500);

/// Pushes the local schema until every live node has merged it (schema
/// agreement), trying `attempts` times (at least once) with a pause
/// between: a node just restarted may refuse the first connection, and one
/// just stopped is seen down by a later attempt. The last attempt's error
/// if none succeeded.
pub async fn push_with_retries(host: &dyn SchemaHost, attempts: u32) -> Result<()> {
    let mut attempt = 1;
    loop {
        match push_to_live_nodes(host).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt >= attempts => return Err(error),
            Err(error) => {
                tracing::warn!(%error, attempt, "the schema change is not on every node yet");
                tokio::time::sleep(PUSH_RETRY_DELAY).await;
                attempt += 1;
            }
        }
    }
}

/// Runs until the node stops: every `interval`, pulls the schema of each live
/// node that gossips another schema version, merges it, and pushes back if
/// that node lacks something.
pub async fn run(host: Arc<dyn SchemaHost>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Failures in a row: the first and every 30th are warnings (a peer this
    // node cannot talk to, e.g. a TLS or secret mismatch, must be visible
    // without flooding the log); the rest are debug.
    let mut failures = 0u64;
    loop {
        ticker.tick().await;
        match exchange_once(&*host).await {
            Ok(()) => failures = 0,
            Err(error) => {
                failures += 1;
                if failures % 30 == 1 {
                    tracing::warn!(%error, failures, "schema exchange failed");
                } else {
                    tracing::debug!(%error, "schema exchange");
                }
            }
        }
    }
}

async fn exchange_once(host: &dyn SchemaHost) -> Result<()> {
    let view = host.membership().view();
    let ours = host.schema().current().version();
    let differing: Vec<_> = view
        .members
        .values()
        .filter(|m| {
            m.liveness == Liveness::Up
                && m.metadata.host_id != host.host_id()
                && m.metadata.schema_version != ours
        })
        .map(|m| m.metadata.internode_addr)
        .collect();
    for address in differing {
        exchange_with(host, address).await?;
    }
    Ok(())
}

/// Pulls the schema of every live peer at once (each within the schema
/// timeout) and merges it, whatever the versions gossip shows: a joining
/// node asks this before it streams, as a gossiped version may lag the
/// peer's schema. How many peers answered.
pub async fn pull_from_live_peers(host: &dyn SchemaHost) -> usize {
    let view = host.membership().view();
    let timeout = host.schema_timeout();
    let pulls = view
        .members
        .values()
        .filter(|m| m.liveness == Liveness::Up && m.metadata.host_id != host.host_id())
        .map(|m| m.metadata.internode_addr)
        .map(|address| async move {
            match tokio::time::timeout(timeout, exchange_with(host, address)).await {
                Ok(Ok(())) => true,
                Ok(Err(error)) => {
                    tracing::info!(%address, %error, "could not pull the schema");
                    false
                }
                Err(_) => {
                    tracing::info!(%address, "no schema from this peer within the schema timeout");
                    false
                }
            }
        });
    join_all(pulls)
        .await
        .into_iter()
        .filter(|&pulled| pulled)
        .count()
}

/// The keyspace named `name`, for a client request. A node may not know a
/// keyspace because it lags: it has just started or is joining, or a
/// `keyspace create` has not reached it yet. A client must not hear "no
/// such keyspace" for that, so:
///
/// - when a live peer gossips another schema version, the schemas of those
///   peers are pulled (each within the schema timeout) and the name looked
///   up again;
/// - a node still `Joining` whose schema is not yet known to match its live
///   peers' answers `UNAVAILABLE` (ask another node), not `NOT_FOUND`.
///
/// With equal versions everywhere (the steady state) an unknown name costs
/// no network round.
pub async fn keyspace_catching_up(host: &dyn SchemaHost, name: &str) -> Result<KeyspaceDef> {
    if let Ok(keyspace) = keyspace(host, name) {
        return Ok(keyspace);
    }
    let differing = peers_with_other_schema(host);
    if !differing.is_empty() {
        let timeout = host.schema_timeout();
        let pulls = differing.into_iter().map(|address| async move {
            if let Ok(Err(error)) =
                tokio::time::timeout(timeout, exchange_with(host, address)).await
            {
                tracing::debug!(%address, %error, "could not pull the schema");
            }
        });
        join_all(pulls).await;
    }
    match keyspace(host, name) {
        Err(NodeError::KeyspaceNotFound(_)) if joining_without_agreement(host) => {
            Err(SchemaError::KeyspaceNotLearned(name.to_string()).into())
        }
        found => found,
    }
}

/// The keyspace named `name` in this node's schema (not dropped), or
/// `NOT_FOUND`; no peer is asked (see [`keyspace_catching_up`]).
pub fn keyspace(host: &dyn SchemaHost, name: &str) -> Result<KeyspaceDef> {
    host.schema()
        .current()
        .keyspace(name)
        .cloned()
        .ok_or_else(|| NodeError::KeyspaceNotFound(name.to_string()))
}

/// The internode addresses of the live peers whose gossiped schema version
/// is not this node's.
fn peers_with_other_schema(host: &dyn SchemaHost) -> Vec<SocketAddr> {
    let ours = host.schema().current().version();
    host.membership()
        .view()
        .up_members()
        .filter(|m| m.metadata.host_id != host.host_id() && m.metadata.schema_version != ours)
        .map(|m| m.metadata.internode_addr)
        .collect()
}

/// Whether this node is `Joining` and does not yet see a live peer with
/// its schema version and none with another.
fn joining_without_agreement(host: &dyn SchemaHost) -> bool {
    let view = host.membership().view();
    let joining = view
        .member(host.host_id())
        .is_some_and(|m| m.metadata.state == NodeState::Joining);
    let ours = host.schema().current().version();
    let mut peers = view
        .up_members()
        .filter(|m| m.metadata.host_id != host.host_id())
        .peekable();
    let agreed = peers.peek().is_some() && peers.all(|m| m.metadata.schema_version == ours);
    joining && !agreed
}

/// Pulls the schema of the node at `address`, merges it, and pushes the
/// merged schema back if that node lacks something.
async fn exchange_with(host: &dyn SchemaHost, address: SocketAddr) -> Result<()> {
    let mut client = host.peers().client(address);
    let theirs = client
        .pull_schema(pb::PullSchemaRequest {})
        .await
        .map_err(NodeError::peer(address, "pull schema"))?
        .into_inner();
    let entries = theirs
        .entries
        .into_iter()
        .map(schema_entry_from_pb)
        .collect::<Result<Vec<_>>>()?;
    let their_count = entries.len();
    merge_and_publish(host, entries).await?;
    let merged = host.schema().current();
    if merged.entries().count() > their_count {
        let _ = client.push_schema(snapshot_of(&merged)).await;
    }
    Ok(())
}
