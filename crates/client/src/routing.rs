//! [`RoutingTable`]: which nodes a request goes to, in which order. Pure:
//! built from a [`Topology`], asked with a key and a turn of the round
//! robin, it answers a [`QueryPlan`]. Reads and writes spread over a key's
//! replicas; a key's compare-and-sets and serial reads all go to one of
//! them ([`RoutingTable::plan_for_serial`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use ringstore_placement::{
    Datacenter, HostId, Murmur3Partitioner, ReplicaMap, Ring, RingMember, Token,
};

use crate::topology::{Node, Topology};
use ringstore_proto::v1::SerialConsistency;

/// The nodes to try for one request, best first: a retry moves to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryPlan {
    /// Client addresses, each once.
    pub nodes: Vec<SocketAddr>,
    /// How many of the first `nodes` are replicas of the key (0 when the
    /// plan is not token-aware: unknown keyspace, or routing turned off).
    pub replicas: usize,
}

impl QueryPlan {
    /// Moves the nodes in `suspects` (ones the client just failed to reach)
    /// to the end, keeping the order of the rest and of them; a suspect
    /// replica no longer counts in `replicas`.
    pub fn demote(&mut self, suspects: &[SocketAddr]) {
        if suspects.is_empty() {
            return;
        }
        let demoted_replicas = self.nodes[..self.replicas]
            .iter()
            .filter(|n| suspects.contains(n))
            .count();
        let (fine, suspect): (Vec<SocketAddr>, Vec<SocketAddr>) =
            self.nodes.iter().partition(|n| !suspects.contains(n));
        self.nodes = fine.into_iter().chain(suspect).collect();
        self.replicas -= demoted_replicas;
    }
}

/// An immutable routing snapshot of the cluster: the ring rebuilt from the
/// members' tokens and one replica map per keyspace, computed by
/// `ringstore_placement` exactly as the nodes compute them.
///
/// Order of a key's plan: its replicas that are up in the local data center
/// (rotated by the turn, so load spreads over them), then its replicas up in
/// other data centers (rotated too), then every other up node (local data
/// center first) as a coordinator of last resort, then the nodes still
/// joining (a joiner may not know the schema yet, and a client must not
/// hear "no such keyspace" from a node that merely lags), then the nodes
/// thought down (a failure detector can be wrong; they are tried last, not
/// never).
#[derive(Debug)]
pub struct RoutingTable {
    nodes: BTreeMap<HostId, Node>,
    /// The round robin's four groups, each in host id order, computed
    /// once: up nodes of the local data center, up nodes of others (both
    /// owning tokens: `Normal` or `Leaving`), up joining nodes, down nodes.
    up_local: Vec<SocketAddr>,
    up_remote: Vec<SocketAddr>,
    up_joining: Vec<SocketAddr>,
    down: Vec<SocketAddr>,
    maps: HashMap<String, ReplicaMap>,
    ring: Arc<Ring>,
    local_dc: Option<Datacenter>,
    token_aware: bool,
    ring_matches: bool,
}

impl RoutingTable {
    /// The table of `topology`. `local_dc` is the data center whose nodes
    /// are preferred (none: all alike); without `token_aware`, every plan is
    /// a plain round robin over the nodes, local data center first.
    pub fn new(
        topology: &Topology,
        local_dc: Option<Datacenter>,
        token_aware: bool,
    ) -> RoutingTable {
        let (ring, ring_matches) = rebuild_ring(topology);
        let ring = Arc::new(ring);
        let maps = topology
            .keyspaces
            .iter()
            .map(|k| (k.name.clone(), ReplicaMap::new(ring.clone(), &k.strategy)))
            .collect();
        let nodes: BTreeMap<HostId, Node> =
            topology.nodes.iter().map(|n| (n.host, n.clone())).collect();
        let is_local = |n: &Node| local_dc.as_ref().is_none_or(|dc| &n.location.dc == dc);
        let group = |keep: &dyn Fn(&Node) -> bool| {
            nodes
                .values()
                .filter(|n| keep(n))
                .map(|n| n.address)
                .collect()
        };
        RoutingTable {
            up_local: group(&|n| n.up && n.state.owns_tokens() && is_local(n)),
            up_remote: group(&|n| n.up && n.state.owns_tokens() && !is_local(n)),
            up_joining: group(&|n| n.up && !n.state.owns_tokens()),
            down: group(&|n| !n.up),
            nodes,
            maps,
            ring,
            local_dc,
            token_aware,
            ring_matches,
        }
    }

    /// Whether the ring rebuilt here has the checksum of the ring the
    /// describing node uses. When not (two members claim a token, which the
    /// nodes settle by generation, unknown here), plans may name a
    /// non-replica first: still correct, one hop longer.
    pub fn ring_matches(&self) -> bool {
        self.ring_matches
    }

    /// Every member.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// Whether the table knows keyspace `name` (else plans for it are not
    /// token-aware, and the schema should be learned again).
    pub fn knows_keyspace(&self, name: &str) -> bool {
        self.maps.contains_key(name)
    }

    /// The data center preferred.
    pub fn local_dc(&self) -> Option<&Datacenter> {
        self.local_dc.as_ref()
    }

    /// The ring tokens, ascending: the ends of the ring's ranges.
    pub fn tokens(&self) -> &[Token] {
        self.ring.tokens()
    }

    /// The plan for `key` of `keyspace` on `turn` of the round robin. An
    /// empty key has no token: its plan is the plain round robin (the node
    /// refuses the key with a clear error).
    pub fn plan_for_key(&self, keyspace: &str, key: &[u8], turn: usize) -> QueryPlan {
        match Murmur3Partitioner::token(key) {
            Ok(token) => self.plan_for_token(keyspace, token, turn),
            Err(_) => self.plan_any(turn),
        }
    }

    /// The plan for the replicas of `token` in `keyspace` on `turn`.
    pub fn plan_for_token(&self, keyspace: &str, token: Token, turn: usize) -> QueryPlan {
        let Some(map) = self.maps.get(keyspace).filter(|_| self.token_aware) else {
            return self.plan_any(turn);
        };
        let (mut local, mut remote, mut down) = (Vec::new(), Vec::new(), Vec::new());
        for node in map
            .replicas(token)
            .ids()
            .filter_map(|id| self.nodes.get(&id))
        {
            match (node.up, self.is_local(node)) {
                (true, true) => local.push(node.address),
                (true, false) => remote.push(node.address),
                (false, _) => down.push(node.address),
            }
        }
        let is_replica =
            |a: &SocketAddr| local.contains(a) || remote.contains(a) || down.contains(a);
        let mut nodes = Vec::with_capacity(self.nodes.len());
        nodes.extend(rotated(&local, turn).chain(rotated(&remote, turn)));
        let replicas = nodes.len();
        let others_up = rotated(&self.up_local, turn).chain(rotated(&self.up_remote, turn));
        nodes.extend(others_up.filter(|a| !is_replica(a)));
        nodes.extend(rotated(&self.up_joining, turn));
        nodes.extend(&down);
        nodes.extend(rotated(&self.down, turn).filter(|a| !is_replica(a)));
        QueryPlan { nodes, replicas }
    }

    /// The plan of a compare-and-set or serial read of `key` at `serial`:
    /// one coordinator per key, the same for every client, so that rivals
    /// on the key queue at one node instead of pre-empting each other's
    /// ballots from several (CASSANDRA-15746). First the key's replicas
    /// that are up, in placement order (not rotated: the first is the
    /// coordinator); then the other up nodes, the joining ones, the key's
    /// down replicas and the other down nodes, as fallbacks for an
    /// attempt that certainly did not apply. For `LOCAL_SERIAL` only the
    /// local data center's nodes are named (a coordinator elsewhere would
    /// run the key's Paxos among its own data center's replicas). Not
    /// token-aware (routing off, unknown keyspace, empty key): the plain
    /// round robin on `turn`, local data center only for `LOCAL_SERIAL`.
    pub fn plan_for_serial(
        &self,
        keyspace: &str,
        key: &[u8],
        serial: SerialConsistency,
        turn: usize,
    ) -> QueryPlan {
        let local_only = serial == SerialConsistency::LocalSerial;
        let keep = |a: &SocketAddr| !local_only || self.is_local_address(a);
        let map = self.maps.get(keyspace).filter(|_| self.token_aware);
        let (Some(map), Ok(token)) = (map, Murmur3Partitioner::token(key)) else {
            let mut plan = self.plan_any(turn);
            plan.nodes.retain(keep);
            return plan;
        };
        let replicas: Vec<&Node> = map
            .replicas(token)
            .ids()
            .filter_map(|id| self.nodes.get(&id))
            .filter(|n| !local_only || self.is_local(n))
            .collect();
        let is_replica = |a: &SocketAddr| replicas.iter().any(|n| n.address == *a);
        let mut nodes: Vec<SocketAddr> = replicas
            .iter()
            .filter(|n| n.up && n.state.owns_tokens())
            .map(|n| n.address)
            .collect();
        let up_replicas = nodes.len();
        let others = self.up_local.iter().chain(&self.up_remote);
        nodes.extend(others.chain(&self.up_joining).filter(|a| !is_replica(a)));
        nodes.extend(replicas.iter().filter(|n| !n.up).map(|n| n.address));
        nodes.extend(self.down.iter().filter(|a| !is_replica(a)));
        nodes.retain(keep);
        QueryPlan {
            nodes,
            replicas: up_replicas,
        }
    }

    /// The plain round robin on `turn`: the up nodes of the local data
    /// center, then the other up nodes, then the joining ones, then the
    /// down ones.
    pub fn plan_any(&self, turn: usize) -> QueryPlan {
        let nodes = rotated(&self.up_local, turn)
            .chain(rotated(&self.up_remote, turn))
            .chain(rotated(&self.up_joining, turn))
            .chain(rotated(&self.down, turn))
            .copied()
            .collect();
        QueryPlan { nodes, replicas: 0 }
    }

    /// Whether the member at `address` is in the local data center (all
    /// are when none is set).
    fn is_local_address(&self, address: &SocketAddr) -> bool {
        self.local_dc.is_none()
            || self
                .nodes
                .values()
                .any(|n| n.address == *address && self.is_local(n))
    }

    fn is_local(&self, node: &Node) -> bool {
        self.local_dc
            .as_ref()
            .is_none_or(|dc| &node.location.dc == dc)
    }
}

/// `items` starting at `turn` modulo their count, wrapping.
fn rotated<T>(items: &[T], turn: usize) -> impl Iterator<Item = &T> {
    let start = if items.is_empty() {
        0
    } else {
        turn % items.len()
    };
    items[start..].iter().chain(items[..start].iter())
}

/// The ring of the members that own tokens, as the nodes build it; and
/// whether its checksum is the describing node's. A token two members claim
/// goes to the lower host id here (the nodes use generations, not reported).
fn rebuild_ring(topology: &Topology) -> (Ring, bool) {
    let mut owners: Vec<&Node> = topology
        .nodes
        .iter()
        .filter(|n| n.state.owns_tokens())
        .collect();
    owners.sort_by_key(|n| n.host);
    let mut claimed = std::collections::BTreeSet::new();
    let members = owners.into_iter().filter_map(|n| {
        let tokens: Vec<Token> = n
            .tokens
            .iter()
            .copied()
            .filter(|t| claimed.insert(*t))
            .collect();
        (!tokens.is_empty()).then(|| RingMember::new(n.host, n.location.clone(), tokens))
    });
    let ring = Ring::new(0, members.collect::<Vec<_>>()).unwrap_or_else(|_| Ring::empty(0));
    let matches = ring.checksum() == topology.ring_checksum;
    (ring, matches)
}

#[cfg(test)]
#[path = "routing_tests.rs"]
mod tests;
