//! The async shell: one tokio task owns a [`Membership`], feeds it datagrams
//! from a socket (UDP, or a simulation's: [`GossipSocket`]) and timers from a
//! timer queue, and publishes the view.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;

use ringstore_placement::HostId;
use tokio::net::UdpSocket;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::envelope::ClusterSecret;
use crate::error::{MembershipError, Result};
use crate::metadata::NodeMetadata;
use crate::offsets::ClockReport;
use crate::remembrance::Remembrance;
use crate::socket::GossipSocket;
use crate::state_machine::{Membership, MembershipEvent, Output, Timer};
use crate::stats::MembershipStats;
use crate::view::ClusterView;

/// A metadata change sent to the task.
type Change = Box<dyn FnOnce(&mut NodeMetadata) + Send>;

enum Command {
    Update(Change, oneshot::Sender<()>),
    Stats(oneshot::Sender<MembershipStats>),
    Remembrance(oneshot::Sender<Remembrance>),
    SetSecrets(Vec<ClusterSecret>, oneshot::Sender<bool>),
    Leave(oneshot::Sender<()>),
    Pull(SocketAddr, Vec<HostId>),
}

/// A cloneable handle to a running membership task. The task stops when
/// every handle is dropped.
#[derive(Clone)]
pub struct MembershipHandle {
    commands: mpsc::Sender<Command>,
    view: watch::Receiver<Arc<ClusterView>>,
    clock: watch::Receiver<Arc<ClockReport>>,
    events: broadcast::Sender<MembershipEvent>,
    local_addr: SocketAddr,
}

impl MembershipHandle {
    /// The current view.
    pub fn view(&self) -> Arc<ClusterView> {
        self.view.borrow().clone()
    }

    /// What this node knows of its peers' clocks, and the verdict on its own.
    pub fn clock_report(&self) -> Arc<ClockReport> {
        self.clock.borrow().clone()
    }

    /// A receiver that wakes on every new clock report.
    pub fn watch_clock(&self) -> watch::Receiver<Arc<ClockReport>> {
        self.clock.clone()
    }

    /// A receiver that wakes on every new view.
    pub fn watch_view(&self) -> watch::Receiver<Arc<ClusterView>> {
        self.view.clone()
    }

    /// A receiver of membership events from now on (lagging receivers lose
    /// the oldest events).
    pub fn events(&self) -> broadcast::Receiver<MembershipEvent> {
        self.events.subscribe()
    }

    /// The address the gossip socket is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Changes the local node's metadata; returns once the view has it.
    pub async fn update_local(
        &self,
        change: impl FnOnce(&mut NodeMetadata) + Send + 'static,
    ) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.request(Command::Update(Box::new(change), done))
            .await?;
        wait.await.map_err(|_| MembershipError::Stopped)
    }

    /// Gossip counters.
    pub async fn stats(&self) -> Result<MembershipStats> {
        let (reply, wait) = oneshot::channel();
        self.request(Command::Stats(reply)).await?;
        wait.await.map_err(|_| MembershipError::Stopped)
    }

    /// Replaces the cluster secrets gossip seals and opens with (a rotation
    /// step); `false` if that would turn authentication on or off.
    pub async fn set_secrets(&self, secrets: Vec<ClusterSecret>) -> Result<bool> {
        let (reply, wait) = oneshot::channel();
        self.request(Command::SetSecrets(secrets, reply)).await?;
        wait.await.map_err(|_| MembershipError::Stopped)
    }

    /// What a restart must remember: the other members' signed records and
    /// the claims this node accepted (see `Membership::with_remembered`).
    pub async fn remembrance(&self) -> Result<Remembrance> {
        let (reply, wait) = oneshot::channel();
        self.request(Command::Remembrance(reply)).await?;
        wait.await.map_err(|_| MembershipError::Stopped)
    }

    /// Asks the member gossiping at `from` for its copies of `hosts`'
    /// records ([`Membership::pull`]); they arrive in the view as any
    /// gossiped record does, if they do (a datagram can be lost).
    pub async fn pull(&self, from: SocketAddr, hosts: Vec<HostId>) -> Result<()> {
        self.request(Command::Pull(from, hosts)).await
    }

    /// Announces a deliberate departure (call before shutting down).
    pub async fn leave(&self) -> Result<()> {
        let (done, wait) = oneshot::channel();
        self.request(Command::Leave(done)).await?;
        wait.await.map_err(|_| MembershipError::Stopped)
    }

    async fn request(&self, command: Command) -> Result<()> {
        self.commands
            .send(command)
            .await
            .map_err(|_| MembershipError::Stopped)
    }
}

/// Binds a UDP socket at `bind` and starts the membership task on it. The
/// task runs until `shutdown` completes — then it announces its departure to
/// the cluster and stops — or until every handle is dropped.
pub async fn start(
    membership: Membership,
    bind: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(MembershipHandle, JoinHandle<()>)> {
    let socket = UdpSocket::bind(bind)
        .await
        .map_err(|source| MembershipError::Socket { addr: bind, source })?;
    start_on(membership, Box::new(socket), shutdown)
}

/// Starts the membership task on a bound `socket`, as [`start`] does.
pub fn start_on(
    membership: Membership,
    socket: Box<dyn GossipSocket>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(MembershipHandle, JoinHandle<()>)> {
    let local_addr = socket.local_addr().map_err(MembershipError::LocalAddress)?;
    let (commands, receiver) = mpsc::channel(64);
    let (view_tx, view) = watch::channel(membership.view());
    let (clock_tx, clock) = watch::channel(membership.clock_report());
    let (events, _) = broadcast::channel(1024);
    let task = Task {
        membership,
        socket,
        commands: receiver,
        view: view_tx,
        clock: clock_tx,
        events: events.clone(),
        timers: BinaryHeap::new(),
        timer_seq: 0,
    };
    let join = tokio::spawn(task.run(shutdown));
    Ok((
        MembershipHandle {
            commands,
            view,
            clock,
            events,
            local_addr,
        },
        join,
    ))
}

struct Task {
    membership: Membership,
    socket: Box<dyn GossipSocket>,
    commands: mpsc::Receiver<Command>,
    view: watch::Sender<Arc<ClusterView>>,
    clock: watch::Sender<Arc<ClockReport>>,
    events: broadcast::Sender<MembershipEvent>,
    /// Due time, a tie-breaking sequence, the timer.
    timers: BinaryHeap<Reverse<(Instant, u64, TimerSlot)>>,
    timer_seq: u64,
}

/// A timer in the queue; ordered by nothing (the sequence orders ties).
struct TimerSlot(Timer);

impl PartialEq for TimerSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for TimerSlot {}
impl PartialOrd for TimerSlot {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TimerSlot {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Task {
    async fn run(mut self, shutdown: impl Future<Output = ()> + Send + 'static) {
        // Datagrams can be as large as 64 KiB; anything foca rejects is counted.
        let mut buffer = vec![0u8; 65536];
        let mut shutdown = std::pin::pin!(shutdown);
        self.flush().await;
        loop {
            let next_timer = self.timers.peek().map(|Reverse((at, _, _))| *at);
            tokio::select! {
                () = &mut shutdown => {
                    self.membership.leave();
                    self.flush().await;
                    break;
                }
                received = self.socket.recv_from(&mut buffer) => match received {
                    Ok((len, from)) => self.membership.handle_packet(from, &buffer[..len]),
                    Err(error) => tracing::debug!(%error, "gossip receive failed"),
                },
                command = self.commands.recv() => match command {
                    None => break,
                    Some(Command::Update(change, done)) => {
                        self.membership.update_local(change);
                        self.flush().await;
                        let _ = done.send(());
                    }
                    Some(Command::Stats(reply)) => {
                        let _ = reply.send(self.membership.stats().clone());
                    }
                    Some(Command::Remembrance(reply)) => {
                        let _ = reply.send(self.membership.remembrance());
                    }
                    Some(Command::SetSecrets(secrets, reply)) => {
                        let _ = reply.send(self.membership.set_secrets(secrets));
                    }
                    Some(Command::Pull(from, hosts)) => self.membership.pull(from, &hosts),
                    Some(Command::Leave(done)) => {
                        self.membership.leave();
                        self.flush().await;
                        let _ = done.send(());
                    }
                },
                _ = tokio::time::sleep_until(next_timer.unwrap_or_else(Instant::now)), if next_timer.is_some() => {
                    let now = Instant::now();
                    while self.timers.peek().is_some_and(|Reverse((at, _, _))| *at <= now) {
                        let Reverse((_, _, TimerSlot(timer))) = self.timers.pop().expect("peeked");
                        self.membership.handle_timer(timer);
                    }
                },
            }
            self.flush().await;
        }
        tracing::debug!("membership task stopped");
    }

    /// Carries out the state machine's outputs and publishes a changed view.
    async fn flush(&mut self) {
        for output in self.membership.drain_outputs() {
            match output {
                Output::Send { to, packet } => {
                    if let Err(error) = self.socket.send_to(&packet, to).await {
                        tracing::debug!(%to, %error, "gossip send failed");
                    }
                }
                Output::Schedule { after, timer } => {
                    self.timer_seq += 1;
                    self.timers.push(Reverse((
                        Instant::now() + after,
                        self.timer_seq,
                        TimerSlot(timer),
                    )));
                }
                Output::Event(event) => {
                    let _ = self.events.send(event);
                }
            }
        }
        let view = self.membership.view();
        self.view.send_if_modified(|current| {
            let changed = !Arc::ptr_eq(current, &view);
            *current = view;
            changed
        });
        let report = self.membership.clock_report();
        self.clock.send_if_modified(|current| {
            let changed = !Arc::ptr_eq(current, &report);
            *current = report;
            changed
        });
    }
}
