//! Membership: who is in the cluster, where they sit, whether they are up,
//! and the ring their tokens make — without a central coordinator.
//!
//! # Design
//! Two protocols share one UDP socket per node:
//!
//! 1. **SWIM failure detection** by the `foca` crate: every probe period a node
//!    pings a random member, asks others to ping it indirectly if it does not
//!    answer, and *suspects* it when nobody could reach it; a suspected member
//!    that does not refute the suspicion within `suspect_to_down_after` is
//!    declared down, and the news spreads piggybacked on probes and periodic
//!    gossip, each node passing a notice on ⌈4 · log10(n + 1)⌉ times (at
//!    least the preset's 8): a fixed count left some member of a 1,000-node
//!    cluster unaware of a death until it probed the dead node itself, up
//!    to n probe periods later. Suspicion is what keeps a briefly flapping member from flipping
//!    every view. foca knows members by [`NodeIdentity`]: host id, gossip
//!    address, and a generation bumped on every restart, so a restarted node
//!    supersedes its old incarnation (foca's "address" is the host id).
//!    A node told it was declared down takes a new identity (its rejoin
//!    count bumped) and starts over disconnected; the others' messages go to
//!    its old identity and are dropped, so it announces to its seeds and to
//!    16 random members it knows, again each retry, until one answers.
//!    Without that, a paused node's held verdicts, delivered together, made
//!    every node rejoin at once and none speak again: a split for good.
//!    A connected node also announces, each metadata round, to a few
//!    members whose records it holds but of whom SWIM has never heard:
//!    after many nodes start at once, SWIM's bounded dissemination leaves
//!    some pairs that would otherwise meet only when one happens to probe
//!    the other, n/2 probe periods on average.
//! 2. **Metadata anti-entropy**, ringstore's own: every second a node sends a
//!    few live members the hash of its digest (the host and metadata stamp
//!    of every record it holds); a receiver whose own hash differs asks for
//!    the whole digest, pulls what is newer and pushes back what the sender
//!    has older. A quiet cluster so sends one small packet per peer a
//!    round, not an entry per member (the digest itself cost a node about
//!    40 bytes per member per second, 41.7 KiB/s at 1,000 nodes).
//!    A node's own change is pushed at once to a few members, who pass it
//!    on once to a few more (a node accepts each version once), so a change
//!    reaches most members within a few network delays; a first sighting
//!    is not passed on, or a starting node would flood the cluster with
//!    every member. A member that comes up (or comes back with a new
//!    generation) is pulled directly. A member already down when a node
//!    starts cannot be: its record reaches the node only in another
//!    member's digest, usually within a second or two. A node that must
//!    hold it by a given moment (a joiner, before it computes its ranges)
//!    asks its peers what they hold and pulls the rest from them
//!    ([`Membership::pull`]).
//!    foca's custom broadcasts are not used for metadata: they are sent a
//!    bounded number of times, never reach a node that joins later, and must
//!    fit one packet, which 256 tokens do not. Metadata is chunked instead.
//!
//! 3. **Clock offsets**, so last-write-wins has an explicit bound: every
//!    `clock_probe_interval` a node sends a few random live peers
//!    (`clock_probe_fanout`, 16: all of them in a small cluster) a probe
//!    with its wall time; the peer echoes it at once with its own; the round trip bounds
//!    the estimate's uncertainty ([`offsets`]). A node whose clock is more
//!    than `max_clock_offset` from the majority of the live members (itself
//!    counted) is [`ClockVerdict::Skewed`]; the node then refuses to
//!    coordinate writes. The clock is injected ([`Clock`]): the node passes
//!    its own (test offset included), the simulator one per node.
//!
//! Every datagram travels in an [`envelope`]: a cluster id (packets of other
//! clusters are dropped), and with a `cluster_secret` an HMAC-SHA256 tag and a
//! per-sender replay window. The secret admits a node to the cluster; it
//! does not make it anybody else: every metadata record is **signed by its
//! node's own key** ([`SignedMetadata`], keys from `ringstore-identity`,
//! the host id derived from them), and passed on as signed, so no member
//! can speak for another. What a node claims about *others* — that it
//! replaces one, is removing one, has removed some — is judged by each
//! receiver ([`claims`]): accepted only if the receiver sees the subject
//! down. Packets of removed nodes are dropped (they are told why, now and
//! then, so they can stop).
//!
//! The protocol core, [`Membership`], is sans-IO: a state machine fed packets
//! and timers, emitting sends, timers and events. [`agent`] runs it on a tokio
//! task with a UDP socket (or any [`GossipSocket`]: a whole-cluster
//! simulation gives it a simulated network's); [`sim`] runs many of them on a simulated network
//! with a simulated clock, deterministically, for tests and measurements.
//!
//! # Invariants
//! - A member's metadata is changed only by the member itself: a record
//!   that is not signed by the keys its host id is bound to is refused and
//!   counted (`metadata_forged`), however new it claims to be; everyone
//!   keeps the signed copy with the highest (generation, version) stamp. A
//!   node that sees a newer record of itself (an earlier life of its data
//!   directory) publishes a newer one.
//! - A claim about another node changes a view only where that node is not
//!   seen up; a claim about the local node is never accepted by it (see
//!   [`claims`]). A token stays with the member that holds it in the ring
//!   whatever generation a claimant names; tokens change hands only through
//!   an accepted replacement.
//! - The ring is built from `Normal` and `Leaving` members' tokens only;
//!   `Joining` tokens are kept apart. Liveness never changes the ring or its
//!   checksum: down is not left. Every ring change is logged with its epoch
//!   and checksum, so diverging views are visible.
//! - No packet, however malformed, panics a node or changes its view unless
//!   it passes the envelope and decodes completely.
//!
//! # Caveats
//! - A down member is never forgotten by itself; removing one is an operator
//!   action (`removenode`), which arrives with topology changes.
//! - Without a secret, packets are not authenticated: any host that can reach
//!   the gossip port and knows the cluster name can join (as a new node; it
//!   still cannot sign for an existing one). A node on a non-loopback
//!   address therefore refuses to start without one (`ringstore-node`'s
//!   `security`).
//! - SWIM's liveness gossip is not signed: a member holding the secret can
//!   make a live node look suspected for a moment (the node refutes it).
//!   Metadata, and so the ring, cannot be changed that way.
//! - Clock verdicts need a majority: in a two-node cluster, or a cluster
//!   split evenly between two clocks, no node is skewed (each agrees with
//!   itself), and last-write-wins orders by whichever clock stamped. Members
//!   that do not answer probes (older versions) have no vote.
//! - Clock probes go to 16 random live peers a second, so a peer's
//!   estimate is renewed about every n/16 s and lasts 30 s: beyond a few
//!   hundred nodes the verdict rests on the peers probed in the last 30 s
//!   (a random sample of a few hundred), and a clock step on a node of a
//!   big cluster counts once half of those were probed again, up to about
//!   15 s. (Probing every peer every second was O(n²) datagrams across the
//!   cluster: 1,000 probes a second per node at 1,000 nodes.)
//! - After a clock step, old samples keep their say until they drop out of
//!   the window (five probes, about 5 s by default): detection and recovery
//!   each take a few probe intervals.
//! - A pull is answered to the packet's source address, so an unauthenticated
//!   cluster can be used to reflect a little traffic (a pull is bounded to
//!   64 hosts).

#![deny(missing_docs)]

pub mod agent;
pub mod claims;
mod clock;
mod config;
pub mod envelope;
mod error;
#[cfg(test)]
mod fuzz_tests;
mod identity;
mod message;
mod metadata;
mod node_record;
pub mod offsets;
mod remembrance;
pub mod sim;
mod socket;
mod state_machine;
mod stats;
mod view;

pub use agent::{MembershipHandle, start, start_on};
pub use claims::{Claim, ClaimKind};
pub use clock::{Clock, SystemClock, WallTime, system_micros};
pub use config::MembershipConfig;
pub use envelope::ClusterSecret;
pub use error::{MembershipError, Result};
pub use identity::{Generation, NodeIdentity};
pub use message::metadata_bodies;
pub use metadata::{MetadataStamp, NodeMetadata, NodeState, SignedMetadata, Takeovers};
pub use node_record::{NODE_RECORD_FILE, NodeRecord};
pub use offsets::{ClockReport, ClockVerdict, PeerOffset};
pub use remembrance::Remembrance;
pub use socket::{GossipSocket, IoFuture};
pub use state_machine::{Membership, MembershipEvent, Output, Timer};
pub use stats::MembershipStats;
pub use view::{ClusterView, Liveness, MemberInfo, Movement};
