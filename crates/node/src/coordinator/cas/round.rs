//! One proposer, driven to its outcome: each [`Action::Broadcast`] sent to
//! every member of the electorate in tasks of their own, their replies fed
//! back as [`Event`]s, a deadline per round, and the commit handed to
//! [`commit`](super::commit) when the proposal is chosen.
//!
//! Replies are tagged with their round, so a late reply to the prepare
//! (a promise, or a failure) is never counted as a vote on the accept.
//! A member the view shows down gets nothing and counts as
//! [`Event::Unreachable`] at once. A call that fails counts as unreachable
//! in round 1 (a prepare changes no value, so any failure there leaves
//! nothing to finish); in round 2 it is a silence that only the deadline
//! ends, since an accept that failed in transit may still have been
//! accepted, and the proposer must then answer "unknown", not "contended".

use std::sync::Arc;
use std::time::Duration;

use ringstore_paxos::{Action, Event, Outcome, Proposer, Request};
use ringstore_placement::HostId;
use tokio::sync::{mpsc, oneshot};

use crate::error::Result;

use super::calls::{self, KeyRef};
use super::commit::{self, Commit};
use super::host::CasHost;

/// How a proposer ended, and the commit it started, if any (its result is
/// the commit level's).
pub(super) struct Ended {
    pub(super) outcome: Outcome,
    pub(super) commit: Option<oneshot::Receiver<Result<()>>>,
    pub(super) round_trips: u32,
}

/// Runs `proposer` from its first action until it is done; each round may
/// take `timeout`.
pub(super) async fn run<H: CasHost>(
    context: &Arc<H>,
    key: &KeyRef,
    mut proposer: Proposer,
    first: Action,
    is_up: impl Fn(HostId) -> bool,
    commit_to: &Commit,
    timeout: Duration,
) -> Ended {
    let (replies, mut inbox) = mpsc::unbounded_channel::<(u32, Event)>();
    let mut round = 0u32;
    let mut deadline = tokio::time::Instant::now() + timeout;
    let mut actions = vec![first];
    let mut commit = None;
    loop {
        for action in std::mem::take(&mut actions) {
            match action {
                Action::Broadcast(request) => {
                    round += 1;
                    deadline = tokio::time::Instant::now() + timeout;
                    let members: Vec<HostId> = proposer.electorate().hosts().collect();
                    for host in members {
                        if host != context.host_id() && !is_up(host) {
                            let _ = replies.send((round, Event::Unreachable { from: host }));
                            continue;
                        }
                        tokio::spawn(ask(
                            context.clone(),
                            host,
                            key.clone(),
                            request.clone(),
                            (round, replies.clone()),
                            timeout,
                        ));
                    }
                }
                Action::Commit(proposal) => {
                    commit = Some(commit::start(context, key, commit_to, proposal, timeout));
                }
                Action::Done(outcome) => {
                    return Ended {
                        outcome,
                        commit,
                        round_trips: proposer.round_trips(),
                    };
                }
            }
        }
        let event = tokio::select! {
            Some((of, event)) = inbox.recv() => {
                if of != round {
                    continue;
                }
                event
            }
            () = tokio::time::sleep_until(deadline) => Event::Timeout,
        };
        actions = proposer.step(event);
    }
}

/// Sends one round's `request` to `host` and reports its answer as an
/// event of `round` (see the module docs for failures).
async fn ask<H: CasHost>(
    context: Arc<H>,
    host: HostId,
    key: KeyRef,
    request: Request,
    (round, replies): (u32, mpsc::UnboundedSender<(u32, Event)>),
    timeout: Duration,
) {
    let event = match request {
        Request::Prepare(ballot) => {
            match calls::prepare(context.as_ref(), host, &key, ballot, timeout).await {
                Ok(answer) => Some(answer.into_event(host)),
                Err(error) => {
                    tracing::debug!(%host, %error, "paxos prepare failed");
                    Some(Event::Unreachable { from: host })
                }
            }
        }
        Request::Accept(proposal) => {
            match calls::accept(context.as_ref(), host, &key, proposal, timeout).await {
                Ok(reply) => Some(Event::from_accept_reply(host, reply)),
                Err(error) => {
                    tracing::debug!(%host, %error, "paxos accept failed");
                    None
                }
            }
        }
    };
    if let Some(event) = event {
        // The proposer may be done already: nobody listening is fine.
        let _ = replies.send((round, event));
    }
}
