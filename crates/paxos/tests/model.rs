//! A randomized model of the protocol: in-memory acceptors, clients running a
//! counter made of serial reads and `PutIf`s through proposers on different
//! coordinators, and a network that delays, reorders, drops and duplicates.
//!
//! Checked, per seed:
//! - at most one cell is accepted under any ballot;
//! - the chosen cells (accepted by a quorum) never go back, in ballot order;
//! - every observation (an `Applied`'s new value, a `NotApplied`'s or a
//!   read's current value) is at least every observation that completed
//!   before it started (the counter only grows);
//! - the final serial read equals the applied increments plus some of the
//!   indeterminate ones: none lost, none doubled.
//!
//! Garbage collection runs amid it all: repair rounds
//! ([`Operation::Repair`]) on random coordinators, whose answers are
//! observations too, and replicas that raise their floor to a ballot of
//! their own clock and purge whatever state is purgeable under it
//! (`gc.rs`).
//!
//! Accept *requests* are never duplicated: the proposer trusts a refusal to
//! mean "not accepted", which needs at-most-once delivery of each request
//! (see `proposer.rs`). Prepares, commits and every reply are.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_cell::{Cell, Timestamp};
use ringstore_paxos::{
    AcceptReply, AcceptorState, Action, Ballot, BallotClock, Electorate, Event, Expected,
    Operation, Outcome, Proposal, Proposer, Request,
};
use ringstore_placement::HostId;

#[derive(Clone, Debug)]
enum ToReplica {
    Prepare(Ballot),
    Accept(Proposal),
    Commit(Proposal),
}

#[derive(Clone, Debug)]
enum Message {
    Request {
        to: usize,
        attempt: usize,
        request: ToReplica,
    },
    Reply {
        attempt: usize,
        event: Event,
    },
}

#[derive(Default)]
struct Replica {
    state: AcceptorState,
    data: Option<Cell>,
    /// The floor ballot: refused at or below, covering purged promises.
    floor: Option<Ballot>,
}

/// The owner of a repair round's attempts.
const REPAIRER: usize = usize::MAX - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientState {
    /// About to read.
    Idle,
    /// Reading.
    Reading,
    /// Incrementing from this value.
    Incrementing(u64),
    Finished,
}

struct Client {
    node: usize,
    state: ClientState,
    ops_left: u32,
    /// The step its current operation (read or increment) began.
    started: u64,
}

/// One completed observation of the counter.
struct Observation {
    started: u64,
    ended: u64,
    value: u64,
}

struct World {
    rng: StdRng,
    step: u64,
    hosts: Vec<HostId>,
    electorate: Electorate,
    replicas: Vec<Replica>,
    clocks: Vec<BallotClock>,
    skews: Vec<i64>,
    clients: Vec<Client>,
    /// Proposer attempts, each owned by a client (`usize::MAX`: the final read).
    attempts: Vec<(usize, Proposer)>,
    network: Vec<Message>,
    /// Every cell accepted under each ballot, and by whom.
    accepted: BTreeMap<Ballot, (Option<Cell>, Vec<usize>)>,
    observations: Vec<Observation>,
    applied: u64,
    unknown: u64,
    /// The final read's outcome, once it has one.
    final_read: Option<Outcome>,
    drop: f64,
    duplicate: f64,
    /// States purged and repairs run, to show the collection ran.
    purged: u64,
    repairs: u64,
    /// The step each attempt started, for repair rounds' observations.
    repair_started: BTreeMap<usize, u64>,
}

fn value_of(cell: Option<&Cell>) -> u64 {
    cell.and_then(|cell| cell.value.as_deref())
        .map(|bytes| {
            let mut word = [0u8; 8];
            word.copy_from_slice(bytes);
            u64::from_be_bytes(word)
        })
        .unwrap_or(0)
}

impl World {
    fn new(seed: u64, natural: usize, pending: usize, clients: usize) -> World {
        let mut rng = StdRng::seed_from_u64(seed);
        let hosts: Vec<HostId> = (0..natural + pending)
            .map(|i| HostId::from_u128(i as u128 + 1))
            .collect();
        let electorate =
            Electorate::new(hosts[..natural].to_vec(), hosts[natural..].to_vec()).unwrap();
        let nodes = hosts.len();
        let skews = (0..nodes).map(|_| rng.random_range(-300..300)).collect();
        let clocks = (0..nodes).map(|_| BallotClock::new(rng.random())).collect();
        let clients = (0..clients)
            .map(|i| Client {
                node: i % nodes,
                state: ClientState::Idle,
                ops_left: 6,
                started: 0,
            })
            .collect();
        let drop = rng.random_range(0.0..0.15);
        let duplicate = rng.random_range(0.0..0.15);
        World {
            rng,
            step: 0,
            hosts,
            electorate,
            replicas: (0..nodes).map(|_| Replica::default()).collect(),
            clocks,
            skews,
            clients,
            attempts: Vec::new(),
            network: Vec::new(),
            accepted: BTreeMap::new(),
            observations: Vec::new(),
            applied: 0,
            unknown: 0,
            final_read: None,
            drop,
            duplicate,
            purged: 0,
            repairs: 0,
            repair_started: BTreeMap::new(),
        }
    }

    fn now(&self, node: usize) -> Timestamp {
        Timestamp(1_000_000 + self.step as i64 * 10 + self.skews[node])
    }

    /// Starts a proposer for `client`'s current operation.
    fn launch(&mut self, client: usize, node: usize, operation: Operation, after: Option<Ballot>) {
        let now = self.now(node);
        let ballot = self.clocks[node].next(now, after);
        let (proposer, action) = Proposer::start(ballot, self.electorate.clone(), operation, now);
        let attempt = self.attempts.len();
        self.attempts.push((client, proposer));
        self.act(attempt, vec![action]);
    }

    fn client_next(&mut self, c: usize) {
        let client = &mut self.clients[c];
        if client.ops_left == 0 {
            client.state = ClientState::Finished;
            return;
        }
        client.ops_left -= 1;
        client.state = ClientState::Reading;
        client.started = self.step;
        let node = client.node;
        self.launch(c, node, Operation::SerialRead, None);
    }

    fn operation_of(state: ClientState) -> Operation {
        match state {
            ClientState::Incrementing(from) => Operation::PutIf {
                expected: if from == 0 {
                    Expected::Absent
                } else {
                    Expected::Value(from.to_be_bytes().to_vec())
                },
                value: (from + 1).to_be_bytes().to_vec(),
                ttl: None,
            },
            _ => Operation::SerialRead,
        }
    }

    fn observe(&mut self, started: u64, value: u64) {
        self.observations.push(Observation {
            started,
            ended: self.step,
            value,
        });
    }

    fn done(&mut self, attempt: usize, outcome: Outcome) {
        let c = self.attempts[attempt].0;
        if c == usize::MAX {
            self.final_read = Some(outcome);
            return;
        }
        if c == REPAIRER {
            if let Outcome::Read { current } = outcome {
                let started = self.repair_started[&attempt];
                self.observe(started, value_of(current.as_ref()));
                self.repairs += 1;
            }
            return;
        }
        let (node, state, started) = {
            let client = &self.clients[c];
            (client.node, client.state, client.started)
        };
        match outcome {
            Outcome::Contended { retry_after } => {
                self.launch(c, node, Self::operation_of(state), Some(retry_after));
            }
            Outcome::NoQuorum { .. } => {
                self.launch(c, node, Self::operation_of(state), None);
            }
            Outcome::Read { current } => {
                let value = value_of(current.as_ref());
                self.observe(started, value);
                self.clients[c].state = ClientState::Incrementing(value);
                self.clients[c].started = self.step;
                self.launch(c, node, Self::operation_of(self.clients[c].state), None);
            }
            Outcome::Applied { current } => {
                let value = value_of(Some(&current));
                assert_eq!(
                    ClientState::Incrementing(value - 1),
                    state,
                    "applied the wrong value"
                );
                self.applied += 1;
                self.observe(started, value);
                self.client_next(c);
            }
            Outcome::NotApplied { current } => {
                let value = value_of(current.as_ref());
                assert_ne!(
                    ClientState::Incrementing(value),
                    state,
                    "the condition held"
                );
                self.observe(started, value);
                self.client_next(c);
            }
            Outcome::Unknown { .. } => {
                if matches!(state, ClientState::Incrementing(_)) {
                    self.unknown += 1;
                }
                self.client_next(c);
            }
        }
    }

    fn act(&mut self, attempt: usize, actions: Vec<Action>) {
        for action in actions {
            match action {
                Action::Broadcast(request) => {
                    for to in 0..self.hosts.len() {
                        if self.rng.random_bool(0.03) {
                            // Known down: not sent.
                            let from = self.hosts[to];
                            self.network.push(Message::Reply {
                                attempt,
                                event: Event::Unreachable { from },
                            });
                            continue;
                        }
                        let request = match &request {
                            Request::Prepare(ballot) => ToReplica::Prepare(*ballot),
                            Request::Accept(proposal) => ToReplica::Accept(proposal.clone()),
                        };
                        self.network.push(Message::Request {
                            to,
                            attempt,
                            request,
                        });
                    }
                }
                Action::Commit(proposal) => {
                    for to in 0..self.hosts.len() {
                        self.network.push(Message::Request {
                            to,
                            attempt,
                            request: ToReplica::Commit(proposal.clone()),
                        });
                    }
                }
                Action::Done(outcome) => self.done(attempt, outcome),
            }
        }
    }

    fn deliver(&mut self, message: Message) {
        match message {
            Message::Request {
                to,
                attempt,
                request,
            } => {
                let from = self.hosts[to];
                let replica = &mut self.replicas[to];
                let event = match request {
                    ToReplica::Prepare(ballot) => {
                        let step = replica.state.floored(replica.floor).prepare(ballot);
                        if let Some(state) = step.persist {
                            replica.state = state;
                        }
                        Event::from_prepare_reply(from, step.reply, replica.data.clone())
                    }
                    ToReplica::Accept(proposal) => {
                        let step = replica
                            .state
                            .floored(replica.floor)
                            .accept(proposal.clone());
                        if let Some(state) = step.persist {
                            replica.state = state;
                        }
                        if step.reply == AcceptReply::Accepted {
                            let entry = self
                                .accepted
                                .entry(proposal.ballot)
                                .or_insert_with(|| (proposal.cell.clone(), Vec::new()));
                            assert_eq!(entry.0, proposal.cell, "two cells under one ballot");
                            if !entry.1.contains(&to) {
                                entry.1.push(to);
                            }
                        }
                        Event::from_accept_reply(from, step.reply)
                    }
                    ToReplica::Commit(proposal) => {
                        let step = replica.state.commit(proposal);
                        // Apply the cell before recording the commit.
                        if let Some(cell) = step.reply {
                            replica.data = Some(match replica.data.take() {
                                Some(stored) => stored.reconcile(cell),
                                None => cell,
                            });
                        }
                        if let Some(state) = step.persist {
                            replica.state = state;
                        }
                        return;
                    }
                };
                self.network.push(Message::Reply { attempt, event });
            }
            Message::Reply { attempt, event } => {
                let actions = self.attempts[attempt].1.step(event);
                self.act(attempt, actions);
            }
        }
    }

    fn waiting(&self) -> Vec<usize> {
        (0..self.attempts.len())
            .filter(|&a| !self.attempts[a].1.is_done())
            .collect()
    }

    /// Random delivery until every client has finished.
    fn run(&mut self) {
        for c in 0..self.clients.len() {
            self.client_next(c);
        }
        while self
            .clients
            .iter()
            .any(|c| c.state != ClientState::Finished)
        {
            self.step += 1;
            assert!(self.step < 200_000, "no progress");
            if self.rng.random_bool(0.003) {
                self.repair();
            }
            if self.rng.random_bool(0.03) {
                self.collect();
            }
            let waiting = self.waiting();
            if self.network.is_empty() || self.rng.random_bool(0.02) {
                if let Some(&attempt) = waiting.get(self.rng.random_range(0..waiting.len().max(1)))
                {
                    let actions = self.attempts[attempt].1.step(Event::Timeout);
                    self.act(attempt, actions);
                }
                continue;
            }
            let i = self.rng.random_range(0..self.network.len());
            let message = self.network.swap_remove(i);
            if self.rng.random_bool(self.drop) {
                continue;
            }
            let duplicable = !matches!(
                message,
                Message::Request {
                    request: ToReplica::Accept(_),
                    ..
                }
            );
            if duplicable && self.rng.random_bool(self.duplicate) {
                self.network.push(message.clone());
            }
            self.deliver(message);
        }
    }

    /// A repair round from a random coordinator.
    fn repair(&mut self) {
        let node = self.rng.random_range(0..self.hosts.len());
        self.repair_started.insert(self.attempts.len(), self.step);
        self.launch(REPAIRER, node, Operation::Repair, None);
    }

    /// A random replica raises its floor to a ballot of its own clock, a
    /// little in the past or the future, and purges its state if it may.
    fn collect(&mut self) {
        let r = self.rng.random_range(0..self.hosts.len());
        let lag = self.rng.random_range(-300..300);
        let floor = Ballot {
            micros: self.now(r).0 - lag,
            tiebreak: 0,
        };
        let replica = &mut self.replicas[r];
        replica.floor = replica.floor.max(Some(floor));
        if let Some(floor) = replica.floor
            && replica.state != AcceptorState::default()
            && replica.state.purgeable(floor)
        {
            replica.state = AcceptorState::default();
            self.purged += 1;
        }
    }

    /// A serial read on a quiet, reliable network.
    fn final_read(&mut self) -> u64 {
        self.network.clear();
        let mut after = None;
        for _ in 0..10 {
            self.step += 1;
            let now = self.now(0);
            let ballot = self.clocks[0].next(now, after);
            let (proposer, action) =
                Proposer::start(ballot, self.electorate.clone(), Operation::SerialRead, now);
            let attempt = self.attempts.len();
            self.attempts.push((usize::MAX, proposer));
            self.final_read = None;
            // No "unreachable" on this network.
            let request = match action {
                Action::Broadcast(Request::Prepare(ballot)) => ToReplica::Prepare(ballot),
                other => panic!("{other:?}"),
            };
            for to in 0..self.hosts.len() {
                self.network.push(Message::Request {
                    to,
                    attempt,
                    request: request.clone(),
                });
            }
            while self.final_read.is_none() && !self.network.is_empty() {
                let message = self.network.remove(0);
                if let Message::Request {
                    request: ToReplica::Accept(_) | ToReplica::Prepare(_),
                    ..
                } = &message
                {
                    self.deliver(message);
                } else if let Message::Reply { .. } = &message {
                    self.deliver(message);
                }
            }
            match self.final_read.take() {
                Some(Outcome::Read { current }) => return value_of(current.as_ref()),
                Some(Outcome::Contended { retry_after }) => after = Some(retry_after),
                _ => after = Some(ballot),
            }
        }
        panic!("the final read never finished");
    }

    fn check(&mut self) {
        let quorum = self.electorate.quorum();
        let chosen: Vec<(Ballot, u64)> = self
            .accepted
            .iter()
            .filter(|(_, (_, by))| by.len() >= quorum)
            .map(|(ballot, (cell, _))| (*ballot, value_of(cell.as_ref())))
            .collect();
        for pair in chosen.windows(2) {
            assert!(pair[0].1 <= pair[1].1, "chosen values went back: {pair:?}");
        }
        for later in &self.observations {
            for earlier in &self.observations {
                if earlier.ended < later.started {
                    assert!(
                        earlier.value <= later.value,
                        "an observation of {} (steps {}..{}) after one of {} (steps {}..{})",
                        later.value,
                        later.started,
                        later.ended,
                        earlier.value,
                        earlier.started,
                        earlier.ended
                    );
                }
            }
        }
        let last = self.final_read();
        assert!(
            self.applied <= last && last <= self.applied + self.unknown,
            "final {last}, applied {}, unknown {}",
            self.applied,
            self.unknown
        );
        for observation in &self.observations {
            assert!(observation.value <= last);
        }
    }
}

fn run_seeds(natural: usize, pending: usize, clients: usize, seeds: std::ops::Range<u64>) {
    let (mut applied, mut purged, mut repairs) = (0, 0, 0);
    for seed in seeds {
        let mut world = World::new(seed, natural, pending, clients);
        world.run();
        world.check();
        applied += world.applied;
        purged += world.purged;
        repairs += world.repairs;
    }
    assert!(applied > 0, "the workload never applied anything");
    assert!(purged > 0, "no state was ever purged");
    assert!(repairs > 0, "no repair round ever finished");
}

#[test]
fn three_acceptors_under_drops_duplicates_and_reordering_stay_linearizable() {
    run_seeds(3, 0, 4, 0..300);
}

#[test]
fn five_acceptors_under_drops_duplicates_and_reordering_stay_linearizable() {
    run_seeds(5, 0, 5, 1_000..1_200);
}

#[test]
fn three_acceptors_and_one_pending_stay_linearizable() {
    run_seeds(3, 1, 4, 2_000..2_200);
}
