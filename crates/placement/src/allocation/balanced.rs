//! The balanced token allocator.
//!
//! # Algorithm
//! The new host's tokens are placed one at a time, greedily. Every host `h` has
//! a *load*: its effective ownership under the given strategy divided by its
//! token count `c_h` (for the new host, the count it will have at the end). A
//! perfectly balanced ring gives every host the same load `L` (total replicated
//! ownership over total tokens). The allocator minimises the imbalance
//! `Σ c_h · (load_h − L)²`.
//!
//! Loads are measured per *balance group*: the hosts among which a range's
//! copies are shared — the whole ring for SimpleStrategy, a DC, or a rack when
//! the DC has exactly rf racks (each rack then holds one copy of everything).
//! A small second term, `Σ_tokens (owned_t − L)²`, keeps individual tokens near
//! their share too, so that no token becomes a sliver.
//!
//! For each new token it considers every existing range as the one to split.
//! Inserting a token only changes the replicas of the range it splits and of
//! the ranges whose clockwise placement walk passes the insertion point (kept
//! per position as `crossers`), so a candidate costs a handful of short walks.
//! Which ranges change does not depend on *where* in the range the token goes;
//! only how much of the split range moves does, and the imbalance is quadratic
//! in that amount, so the best split point is found in closed form. The best
//! candidate is inserted and the state recomputed. The new host's weight grows
//! with each token placed, so every token aims at one token's share. Finally
//! each new token is taken out and placed again (`REFINE_ROUNDS` times), as
//! the first ones were chosen before the others existed. Ties go to the
//! earliest candidate: the result is deterministic.
//!
//! A host that will replicate every range whatever its tokens (the first `rf`
//! hosts of a ring, or the first host of a rack when racks are the unit of
//! replication), or none (a DC the strategy gives no replicas), cannot be
//! balanced by this measure, so it gets evenly spaced
//! tokens instead, offset from the hosts already placed that way, which gives
//! the hosts that follow an even ring to split.
//!
//! # Caveats
//! - Greedy: later hosts fix what earlier ones leave uneven, but a host's own
//!   tokens are never moved.
//! - Cost grows with ring tokens × candidates per range × walk length; it is
//!   meant for rings of up to a few thousand tokens per data center.

use crate::error::{PlacementError, Result};
use crate::host::{HostId, Location};
use crate::ring::{HostIndex, Ring};
use crate::strategy::{ReplicationStrategy, Walker};
use crate::token::{RING_SIZE, Token};

/// How much each token's own deviation from its group's load counts, against
/// 1 for each host's. A little keeps tokens from shrinking to slivers (which
/// would leave later hosts nothing useful to split); more trades host balance
/// away. Tuned on the growth experiments in `tests/allocation.rs`.
const TOKEN_TERM_WEIGHT: f64 = 0.02;

/// After all tokens are placed, each is taken out and placed again this many
/// times (coordinate descent): the first tokens were placed before the later
/// ones existed.
const REFINE_ROUNDS: usize = 2;

/// `count` tokens for a new host `host` at `location`, chosen to balance the
/// effective ownership of `strategy` over `ring` plus the new host. Sorted.
pub fn balanced_tokens(
    ring: &Ring,
    host: HostId,
    location: &Location,
    count: usize,
    strategy: &ReplicationStrategy,
) -> Result<Vec<Token>> {
    if ring.contains_host(host) {
        return Err(PlacementError::DuplicateHost { host });
    }
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut state = Allocation::new(ring, location, count, strategy);
    if state.new_host_replicates_everything() || state.new_host_holds_no_replicas() {
        return even_tokens(ring, count, strategy);
    }
    for _ in 0..count {
        let (position, token) = state
            .best_candidate()
            .ok_or(PlacementError::RingFull { wanted: count })?;
        state.insert(position, token);
    }
    for _ in 0..REFINE_ROUNDS {
        for token in state.new_tokens() {
            state.remove(token);
            let (position, token) = state
                .best_candidate()
                .ok_or(PlacementError::RingFull { wanted: count })?;
            state.insert(position, token);
        }
    }
    Ok(state.new_tokens())
}

/// Evenly spaced tokens, `count` of them, offset by the number of hosts already
/// in the ring so that the first `rf` hosts interleave exactly.
fn even_tokens(ring: &Ring, count: usize, strategy: &ReplicationStrategy) -> Result<Vec<Token>> {
    let rf = strategy.total_rf().max(1) as usize;
    let placed = ring.hosts().len();
    let golden = ((placed / rf) as f64 * 0.618_033_988_75).fract();
    let offset = ((placed % rf) as f64 + golden) / rf as f64;
    let step = RING_SIZE / count as f64;
    let mut tokens: Vec<Token> = (0..count)
        .map(|j| Token::MIN.advance(((j as f64 + offset) * step) as u64))
        .collect();
    for token in &mut tokens {
        let mut tries = 0;
        while ring.tokens().binary_search(token).is_ok() || *token == Token::MIN {
            *token = token.advance(1);
            tries += 1;
            if tries > 1024 {
                return Err(PlacementError::RingFull { wanted: count });
            }
        }
    }
    tokens.sort_unstable();
    Ok(tokens)
}

/// The allocator's working ring: the existing ring plus the new host's tokens
/// placed so far, with every range's replicas and walk length.
#[derive(Clone)]
struct Allocation {
    walker: Walker,
    /// The new host's index: one past the ring's hosts.
    new_host: HostIndex,
    tokens: Vec<Token>,
    owners: Vec<HostIndex>,
    /// Per host: its token count, the weight its ownership is measured by. The
    /// new host's counts the token being placed: it aims, token by token, at
    /// the load it will have, instead of rushing to its final share.
    weights: Vec<f64>,
    /// The new host's final token count.
    final_count: usize,
    /// Per position: the positions whose owners replicate the range ending
    /// there, in placement order (the owner's token "holds" that replica).
    replicas: Vec<Vec<usize>>,
    /// Per position `i`: the positions whose placement walk passes from `i - 1`
    /// to `i`, so inserting a token just before `i` may change their replicas.
    crossers: Vec<Vec<usize>>,
    /// Per host: effective ownership, as a fraction of the ring.
    host_owned: Vec<f64>,
    /// Per position: the replicated ownership held by that token.
    token_owned: Vec<f64>,
    /// Per host: its balance group (see `Walker::balance_groups`).
    groups: Vec<u32>,
    /// Per group: the load (ownership per token) of a perfectly balanced ring.
    target_load: Vec<f64>,
}

/// What a candidate changes, keyed by host or token: ownership moves by
/// `fixed + x · per_split` where `x` is the width of the split range's lower part.
#[derive(Default)]
struct Delta {
    hosts: Vec<(HostIndex, f64, f64)>,
    tokens: Vec<(TokenKey, f64, f64)>,
}

/// A token of the candidate ring: an existing position, or the candidate itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKey {
    Existing(usize),
    Candidate,
}

impl Delta {
    fn clear(&mut self) {
        self.hosts.clear();
        self.tokens.clear();
    }

    fn add(&mut self, host: HostIndex, token: TokenKey, fixed: f64, per_split: f64) {
        match self.hosts.iter_mut().find(|(h, _, _)| *h == host) {
            Some((_, f, s)) => (*f, *s) = (*f + fixed, *s + per_split),
            None => self.hosts.push((host, fixed, per_split)),
        }
        match self.tokens.iter_mut().find(|(t, _, _)| *t == token) {
            Some((_, f, s)) => (*f, *s) = (*f + fixed, *s + per_split),
            None => self.tokens.push((token, fixed, per_split)),
        }
    }
}

impl Allocation {
    fn new(ring: &Ring, location: &Location, count: usize, strategy: &ReplicationStrategy) -> Self {
        let locations: Vec<&Location> = ring
            .hosts()
            .iter()
            .map(|h| &h.location)
            .chain(std::iter::once(location))
            .collect();
        let mut weights: Vec<f64> = ring.hosts().iter().map(|h| h.token_count as f64).collect();
        weights.push(1.0);
        let walker = Walker::new(strategy, locations.into_iter());
        let mut state = Allocation {
            final_count: count,
            groups: walker.balance_groups(weights.len()),
            walker,
            new_host: ring.hosts().len() as HostIndex,
            tokens: ring.tokens().to_vec(),
            owners: ring.owners().to_vec(),
            weights,
            replicas: Vec::new(),
            crossers: Vec::new(),
            host_owned: Vec::new(),
            token_owned: Vec::new(),
            target_load: Vec::new(),
        };
        state.recompute();
        state
    }

    /// Recomputes replicas, crossers, ownership and the target load.
    fn recompute(&mut self) {
        let n = self.tokens.len();
        self.replicas = vec![Vec::new(); n];
        self.crossers = vec![Vec::new(); n];
        self.host_owned = vec![0.0; self.weights.len()];
        self.token_owned = vec![0.0; n];
        for start in 0..n {
            let owners = &self.owners;
            let mut replicas = Vec::new();
            let walked = self.walker.walk(n, start, |p| owners[p], &mut replicas);
            let fraction = self.fraction(start);
            for &q in &replicas {
                self.host_owned[self.owners[q] as usize] += fraction;
                self.token_owned[q] += fraction;
            }
            for step in 1..walked {
                self.crossers[(start + step) % n].push(start);
            }
            self.replicas[start] = replicas;
        }
        let new_host = self.new_host as usize;
        let placed = self
            .owners
            .iter()
            .filter(|&&o| o as usize == new_host)
            .count();
        self.weights[new_host] = (placed + 1).min(self.final_count) as f64;
        let group_count = self.groups.iter().max().map_or(0, |&g| g as usize + 1);
        let mut owned = vec![0.0; group_count];
        let mut final_tokens = vec![0.0; group_count];
        for (h, &g) in self.groups.iter().enumerate() {
            owned[g as usize] += self.host_owned[h];
            final_tokens[g as usize] += if h == new_host {
                self.final_count as f64
            } else {
                self.weights[h]
            };
        }
        self.target_load = owned
            .iter()
            .zip(&final_tokens)
            .map(|(&o, &t)| if t > 0.0 { o / t } else { 0.0 })
            .collect();
    }

    /// The fraction of the ring in the range ending at `position`.
    fn fraction(&self, position: usize) -> f64 {
        let n = self.tokens.len();
        if n == 1 {
            return 1.0;
        }
        let previous = self.tokens[(position + n - 1) % n];
        previous.distance_to(self.tokens[position]) as f64 / RING_SIZE
    }

    /// Whether the new host would replicate every range with any one token:
    /// then placement cannot change its ownership.
    fn new_host_replicates_everything(&self) -> bool {
        let n = self.tokens.len();
        if n == 0 {
            return true;
        }
        let widest = (0..n)
            .max_by(|&a, &b| self.fraction(a).total_cmp(&self.fraction(b)))
            .expect("non-empty ring");
        let mut probe = self.clone();
        let token = self.token_at(widest, self.fraction(widest) / 2.0);
        probe.insert(widest, token);
        probe.host_owned[self.new_host as usize] >= 1.0 - 1e-9
    }

    /// Whether the strategy gives the new host's DC no replicas: then no
    /// placement changes anything it measures.
    fn new_host_holds_no_replicas(&self) -> bool {
        self.groups[self.new_host as usize] == 0
    }

    /// The token `lower` (a fraction of the ring) above the start of the range
    /// ending at `position`, kept strictly inside the range.
    fn token_at(&self, position: usize, lower: f64) -> Token {
        let n = self.tokens.len();
        let start = self.tokens[(position + n - 1) % n];
        let width = if n == 1 {
            u64::MAX
        } else {
            start.distance_to(self.tokens[position])
        };
        let step = ((lower * RING_SIZE) as u64).clamp(1, width.saturating_sub(1).max(1));
        start.advance(step)
    }

    /// The best `(position, token)` to insert next: the new token goes just
    /// before the existing token at `position`, at the best split of its range.
    fn best_candidate(&self) -> Option<(usize, Token)> {
        let mut best: Option<(f64, usize, Token)> = None;
        let mut delta = Delta::default();
        for position in 0..self.tokens.len() {
            let width = self.fraction(position);
            if width * RING_SIZE < 4.0 {
                continue;
            }
            delta.clear();
            self.candidate_delta(position, &mut delta);
            let (lower, score) = self.best_split(&delta, width);
            let token = self.token_at(position, lower);
            if token == Token::MIN {
                continue;
            }
            if best.is_none_or(|(b, _, _)| score < b - 1e-15) {
                best = Some((score, position, token));
            }
        }
        best.map(|(_, position, token)| (position, token))
    }

    /// The balanced load (ownership per token) of host `h`'s group.
    fn load_of(&self, h: HostIndex) -> f64 {
        self.target_load[self.groups[h as usize] as usize]
    }

    /// The imbalance terms touched by `delta`, as `(weight, deviation now,
    /// fixed change, change per unit of split)`.
    fn terms<'a>(&'a self, delta: &'a Delta) -> impl Iterator<Item = (f64, f64, f64, f64)> + 'a {
        let hosts = delta.hosts.iter().map(|&(h, fixed, per_split)| {
            let weight = self.weights[h as usize];
            let deviation = self.host_owned[h as usize] - weight * self.load_of(h);
            (1.0 / weight, deviation, fixed, per_split)
        });
        let tokens = delta.tokens.iter().map(|&(t, fixed, per_split)| {
            let (owned, owner) = match t {
                TokenKey::Existing(q) => (self.token_owned[q], self.owners[q]),
                TokenKey::Candidate => (0.0, self.new_host),
            };
            (
                TOKEN_TERM_WEIGHT,
                owned - self.load_of(owner),
                fixed,
                per_split,
            )
        });
        hosts.chain(tokens)
    }

    /// The split `x` in `(0, width)` minimising the imbalance, which is
    /// quadratic in `x`, and the imbalance change it gives.
    fn best_split(&self, delta: &Delta, width: f64) -> (f64, f64) {
        let (mut a, mut b) = (0.0, 0.0);
        for (weight, deviation, fixed, per_split) in self.terms(delta) {
            a += weight * per_split * per_split;
            b += 2.0 * weight * (deviation + fixed) * per_split;
        }
        let x = if a > 0.0 { -b / (2.0 * a) } else { width / 2.0 };
        let x = x.clamp(width * 0.05, width * 0.95);
        let change = self
            .terms(delta)
            .map(|(weight, deviation, fixed, per_split)| {
                let after = deviation + fixed + x * per_split;
                weight * (after * after - deviation * deviation)
            })
            .sum();
        (x, change)
    }

    /// The ownership changes caused by inserting a token just before
    /// `position`, as functions of the width of the split range's lower part.
    fn candidate_delta(&self, position: usize, delta: &mut Delta) {
        let n = self.tokens.len();
        let new_host = self.new_host;
        let owners = &self.owners;
        // The ring with the candidate inserted, position by position.
        let virtual_owner = |v: usize| match v.cmp(&position) {
            std::cmp::Ordering::Less => owners[v],
            std::cmp::Ordering::Equal => new_host,
            std::cmp::Ordering::Greater => owners[v - 1],
        };
        let key = |v: usize| match v.cmp(&position) {
            std::cmp::Ordering::Less => TokenKey::Existing(v),
            std::cmp::Ordering::Equal => TokenKey::Candidate,
            std::cmp::Ordering::Greater => TokenKey::Existing(v - 1),
        };
        let mut walk = Vec::new();

        // The split range: its lower part now starts its walk at the new token.
        self.walker.walk(n + 1, position, virtual_owner, &mut walk);
        for &q in &self.replicas[position] {
            delta.add(self.owners[q], TokenKey::Existing(q), 0.0, -1.0);
        }
        for &v in &walk {
            delta.add(virtual_owner(v), key(v), 0.0, 1.0);
        }

        // Ranges whose walk crossed the insertion point.
        for &j in &self.crossers[position] {
            let virtual_j = if j < position { j } else { j + 1 };
            walk.clear();
            self.walker.walk(n + 1, virtual_j, virtual_owner, &mut walk);
            let unchanged = walk.len() == self.replicas[j].len()
                && walk
                    .iter()
                    .zip(&self.replicas[j])
                    .all(|(&v, &q)| key(v) == TokenKey::Existing(q));
            if unchanged {
                continue;
            }
            let fraction = self.fraction(j);
            for &q in &self.replicas[j] {
                delta.add(self.owners[q], TokenKey::Existing(q), -fraction, 0.0);
            }
            for &v in &walk {
                delta.add(virtual_owner(v), key(v), fraction, 0.0);
            }
        }
    }

    /// The new host's tokens placed so far, sorted.
    fn new_tokens(&self) -> Vec<Token> {
        self.tokens
            .iter()
            .zip(&self.owners)
            .filter(|&(_, &o)| o == self.new_host)
            .map(|(&t, _)| t)
            .collect()
    }

    /// Takes one of the new host's tokens out again.
    fn remove(&mut self, token: Token) {
        let position = self.tokens.binary_search(&token).expect("a placed token");
        self.tokens.remove(position);
        self.owners.remove(position);
        self.recompute();
    }

    /// Inserts `token` just before `position`; a token in the wrapping range
    /// of position 0 that lies past the last token goes at the end, which is
    /// the same place on the ring and keeps `tokens` sorted.
    fn insert(&mut self, position: usize, token: Token) {
        let position = if position == 0 && self.tokens.last().is_some_and(|&last| token > last) {
            self.tokens.len()
        } else {
            position
        };
        self.tokens.insert(position, token);
        debug_assert!(self.tokens.windows(2).all(|w| w[0] < w[1]));
        self.owners.insert(position, self.new_host);
        self.recompute();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocation::random_tokens;
    use crate::ring::RingMember;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn random_ring(hosts: usize, racks: usize, tokens: usize, seed: u64) -> Ring {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ring = Ring::empty(0);
        for n in 0..hosts {
            let t = random_tokens(&ring, tokens, &mut rng).unwrap();
            let location = Location::new("dc1", format!("r{}", n % racks));
            ring = ring
                .with_member(
                    0,
                    RingMember::new(HostId::from_u128(n as u128 + 1), location, t),
                )
                .unwrap();
        }
        ring
    }

    #[test]
    fn candidate_delta_matches_a_full_recompute() {
        let cases = [
            (ReplicationStrategy::simple(3).unwrap(), 1),
            (
                ReplicationStrategy::network_topology([("dc1", 3)]).unwrap(),
                3,
            ),
            (
                ReplicationStrategy::network_topology([("dc1", 3)]).unwrap(),
                2,
            ),
        ];
        for (strategy, racks) in cases {
            let ring = random_ring(7, racks, 4, 11);
            let mut state = Allocation::new(&ring, &Location::new("dc1", "r0"), 4, &strategy);
            // Place two tokens first so the new host already has some ranges.
            for _ in 0..2 {
                let (p, t) = state.best_candidate().unwrap();
                state.insert(p, t);
            }
            for position in 0..state.tokens.len() {
                let lower = state.fraction(position) * 0.3;
                let token = state.token_at(position, lower);
                let lower = state.tokens[(position + state.tokens.len() - 1) % state.tokens.len()]
                    .distance_to(token) as f64
                    / RING_SIZE;
                let mut delta = Delta::default();
                state.candidate_delta(position, &mut delta);
                let mut predicted = state.host_owned.clone();
                for &(h, fixed, per_split) in &delta.hosts {
                    predicted[h as usize] += fixed + lower * per_split;
                }
                let mut actual = state.clone();
                actual.insert(position, token);
                for (h, (p, a)) in predicted.iter().zip(&actual.host_owned).enumerate() {
                    assert!(
                        (p - a).abs() < 1e-9,
                        "{strategy} racks {racks}: host {h} at position {position}: predicted {p}, actual {a}"
                    );
                }
                let predicted_new: f64 = delta
                    .tokens
                    .iter()
                    .filter(|(t, _, _)| *t == TokenKey::Candidate)
                    .map(|&(_, fixed, per_split)| fixed + lower * per_split)
                    .sum();
                let inserted = actual.tokens.binary_search(&token).unwrap();
                assert!((predicted_new - actual.token_owned[inserted]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn first_hosts_get_interleaved_even_tokens() {
        let strategy = ReplicationStrategy::simple(3).unwrap();
        let mut ring = Ring::empty(0);
        for n in 0..3 {
            let host = HostId::from_u128(n + 1);
            let location = Location::new("dc1", "r1");
            let tokens = balanced_tokens(&ring, host, &location, 4, &strategy).unwrap();
            ring = ring
                .with_member(0, RingMember::new(host, location, tokens))
                .unwrap();
        }
        // 12 tokens, owners cycling 1, 2, 3, every range a twelfth of the ring.
        for position in 0..ring.token_count() {
            assert!((ring.range_at(position).fraction() - 1.0 / 12.0).abs() < 1e-9);
        }
        let owners: Vec<HostId> = ring.entries().map(|(_, h)| h.id).collect();
        assert!(
            owners
                .windows(3)
                .all(|w| w[0] != w[1] && w[1] != w[2] && w[0] != w[2])
        );
    }

    #[test]
    fn a_member_or_a_host_in_a_dc_without_replicas_is_handled() {
        let strategy = ReplicationStrategy::network_topology([("dc1", 3)]).unwrap();
        let ring = random_ring(6, 3, 8, 5);
        let member = ring.hosts()[0].id;
        assert!(matches!(
            balanced_tokens(&ring, member, &Location::new("dc1", "r0"), 8, &strategy),
            Err(PlacementError::DuplicateHost { .. })
        ));
        let other_dc = Location::new("dc9", "r0");
        let tokens =
            balanced_tokens(&ring, HostId::from_u128(99), &other_dc, 8, &strategy).unwrap();
        assert_eq!(tokens.len(), 8);
        assert!(tokens.windows(2).all(|w| w[0] < w[1]));
    }
}
