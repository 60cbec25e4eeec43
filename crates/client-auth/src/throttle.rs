//! Login throttling: which login attempts may spend a password check, and
//! which are refused at once.
//!
//! An Argon2 check costs tens of milliseconds of a core by design, and a
//! node runs one per core at a time, first come first served. Without
//! limits, a client sending a thousand bad logins a second queues thousands
//! of checks, and every login behind them (a good user's too) waits
//! seconds. So a login passes three limits before it may queue for a
//! check, all decided here, sans-IO, on a clock the caller passes:
//!
//! - **Per source** (the client's IP address; an IPv6 address by its /64,
//!   which one host is given whole): a bucket of [`LoginLimits::source_burst`]
//!   failed logins, refilled at one per [`LoginLimits::source_refill_ms`]. A
//!   check in progress holds a token until it is over (a good password
//!   gives it back), so a thousand attempts arriving together cannot all
//!   start before the first fails.
//! - **Per user name**: after [`LoginLimits::user_free_failures`] failures,
//!   one attempt at a time, spaced by an exponential backoff (from
//!   [`LoginLimits::user_backoff_ms`], doubled at each failure, up to
//!   [`LoginLimits::user_max_backoff_ms`]); a name without failures for
//!   [`LoginLimits::user_forget_ms`] starts afresh. This slows a botnet
//!   guessing one password from many addresses. A per-user limit lets
//!   anyone lock a known user (an administrator) out, so a source that
//!   logged in as that user before ([`LoginLimits::known_for_ms`]) is
//!   exempt from it: the user's own clients go on, only new ones wait
//!   (as CockroachDB's plan to admit known clients through a global cap).
//! - **Checks pending**, running or queued, node-wide: at most
//!   [`LoginLimits::max_pending_checks`], so a flood from more sources
//!   than the other limits see cannot queue more than a fraction of a
//!   second of work.
//!
//! An attempt over a limit is refused without reading the user's record
//! or checking its password (`RESOURCE_EXHAUSTED`, with when to retry), so
//! it costs microseconds. The exception is a source over its limit that
//! has logged in as this user before: it is [`Admission::KnownOnly`], and
//! only a password the credential cache already knows verified goes in
//! (a comparison of keyed digests, no Argon2); anything else is refused
//! as throttled. That lets a user's application share an address with a
//! misbehaving one. A password the cache knows verified never waits
//! for a check slot at all: the gate admits it before any check.
//!
//! # Caveats
//!
//! - Sources behind one NAT share a bucket: one client's bad password
//!   throttles the others' new logins (known ones go on).
//! - A check in flight holds its source's token, so more than
//!   `source_burst` different credentials checked at once from one
//!   address wait (requests with the same credentials share one check;
//!   with `validity_ms = 0` every request is a check).
//! - A new client of a user under a distributed attack waits the user's
//!   backoff (up to [`LoginLimits::user_max_backoff_ms`]).
//! - A source over its limit that logged in as a user before can still
//!   guess that user's password against the cached digest at full speed.
//!   It needs that user's earlier login from its own address.
//! - Each table is bounded ([`LoginLimits::max_tracked`]) and forgets its
//!   least recently used entry when full: an attacker with more addresses
//!   than that can get a throttled address forgotten.
//! - State is per node: a client spreading its attempts over N nodes gets
//!   N times the limits.

use std::fmt;
use std::net::IpAddr;

use crate::lru::Lru;

/// The limits, with defaults for a node serving people and applications.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failed logins one source may have in a burst (at least 1).
    pub source_burst: u32,
    /// How long a source takes to earn back one failed login, in ms: its
    /// sustained rate of password checks that fail.
    pub source_refill_ms: u64,
    /// Failed logins of one user name before its attempts are spaced out.
    pub user_free_failures: u32,
    /// The first spacing, in ms, doubled at each further failure.
    pub user_backoff_ms: u64,
    /// The longest spacing, in ms.
    pub user_max_backoff_ms: u64,
    /// A user name without a failure for this long (ms) starts afresh.
    pub user_forget_ms: u64,
    /// How long (ms) a source stays known to a user after its last good
    /// login as that user.
    pub known_for_ms: u64,
    /// Sources, user names and known pairs tracked, each at most.
    pub max_tracked: usize,
    /// Password checks begun and not ended (queued or running) at most.
    pub max_pending_checks: usize,
}

impl Default for LoginLimits {
    fn default() -> Self {
        LoginLimits {
            source_burst: 10,
            source_refill_ms: 3_000,
            user_free_failures: 20,
            user_backoff_ms: 250,
            user_max_backoff_ms: 30_000,
            user_forget_ms: 600_000,
            known_for_ms: 24 * 3_600_000,
            max_tracked: 10_000,
            max_pending_checks: 64,
        }
    }
}

/// Where a login comes from: its IP address, an IPv6 address by its /64
/// (an IPv4 address mapped into IPv6 as the IPv4 address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Source(Option<IpAddr>);

impl Source {
    /// The source of a login from `ip` (none: unknown, all such share one).
    pub fn of(ip: Option<IpAddr>) -> Source {
        Source(ip.map(|ip| match ip {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
            },
        }))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(IpAddr::V4(v4)) => write!(f, "{v4}"),
            Some(IpAddr::V6(v6)) => write!(f, "{v6}/64"),
            None => f.write_str("an unknown address"),
        }
    }
}

/// Which limit refused a login.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Its source has too many failed logins.
    Source,
    /// Its user name has too many failed logins.
    User,
    /// Too many password checks are pending on this node.
    Busy,
}

/// A login refused without a check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}; retry in {retry_after_ms} ms", match .limit {
    Limit::Source => format!("too many failed logins from {}", .client),
    Limit::User => format!("too many failed logins as user {}", .user),
    Limit::Busy => "too many logins waiting for a password check on this node".to_string(),
})]
pub struct Throttled {
    /// Which limit.
    pub limit: Limit,
    /// Where the login came from.
    pub client: Source,
    /// The user name it gave (at most 64 characters of it).
    pub user: String,
    /// When the limit lets the next attempt through, from now, in ms.
    pub retry_after_ms: u64,
}

/// What a login attempt may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Check the password: against the cache's verified digest first,
    /// and, if that does not settle it, by a full check begun with
    /// [`LoginThrottle::begin_check`].
    Open,
    /// The source is over its limit but logged in as this user before:
    /// only a password the cache knows verified goes in, unchecked
    /// otherwise (refused with the error given).
    KnownOnly(Throttled),
    /// Refused without any check.
    Refused(Throttled),
}

/// How a password check begun with [`LoginThrottle::begin_check`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The password was right.
    Verified,
    /// An unknown user or a wrong password.
    Failed,
    /// No verdict (the user's record could not be read).
    Abandoned,
}

/// A source's bucket of failed logins, as the time its debt is paid off
/// (each failure adds `source_refill_ms` of debt; the bucket is full at
/// `source_burst` of them). Kept as a time, it refills without a timer.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    paid_at_ms: u64,
}

impl Bucket {
    fn debt(self, now_ms: u64) -> u64 {
        self.paid_at_ms.saturating_sub(now_ms)
    }
}

/// A user name's failures.
#[derive(Clone, Copy, Debug, Default)]
struct Failures {
    count: u32,
    last_ms: u64,
    /// Checks begun for it and not ended.
    in_flight: u32,
}

/// The throttle's state. Sans-IO: the caller passes the clock (ms), calls
/// [`admit`](LoginThrottle::admit) before anything else, brackets a full
/// check with [`begin_check`](LoginThrottle::begin_check) and
/// [`end_check`](LoginThrottle::end_check), and reports what the cache
/// settled with [`verified_by_cache`](LoginThrottle::verified_by_cache)
/// and [`refused_known`](LoginThrottle::refused_known).
pub struct LoginThrottle {
    limits: LoginLimits,
    sources: Lru<Source, Bucket>,
    users: Lru<String, Failures>,
    /// When each (source, user) last logged in.
    known: Lru<(Source, String), u64>,
    pending_checks: usize,
}

impl LoginThrottle {
    /// A throttle with `limits` and nothing tracked.
    pub fn new(limits: LoginLimits) -> LoginThrottle {
        LoginThrottle {
            sources: Lru::new(limits.max_tracked),
            users: Lru::new(limits.max_tracked),
            known: Lru::new(limits.max_tracked),
            pending_checks: 0,
            limits,
        }
    }

    fn throttled(
        &self,
        limit: Limit,
        source: Source,
        user: &str,
        retry_after_ms: u64,
    ) -> Throttled {
        Throttled {
            limit,
            client: source,
            user: user.chars().take(64).collect(),
            retry_after_ms,
        }
    }

    fn capacity_ms(&self) -> u64 {
        u64::from(self.limits.source_burst.max(1)) * self.limits.source_refill_ms
    }

    /// How long until `source` may fail once more (0: now).
    fn source_wait(&self, source: Source, now_ms: u64) -> u64 {
        let debt = self.sources.peek(&source).map_or(0, |b| b.debt(now_ms));
        (debt + self.limits.source_refill_ms).saturating_sub(self.capacity_ms())
    }

    /// How long until `user` may be checked again (0: now).
    fn user_wait(&self, user: &str, now_ms: u64) -> u64 {
        let Some(failures) = self.users.peek(user) else {
            return 0;
        };
        let since = now_ms.saturating_sub(failures.last_ms);
        let recent = since < self.limits.user_forget_ms;
        let count = if recent { failures.count } else { 0 };
        if count + failures.in_flight < self.limits.user_free_failures {
            return 0;
        }
        let wait = if recent {
            self.backoff_ms(count).saturating_sub(since)
        } else {
            0
        };
        if wait == 0 && failures.in_flight > 0 {
            // One check at a time once past the free failures.
            return self.limits.user_backoff_ms.max(1);
        }
        wait
    }

    fn backoff_ms(&self, failures: u32) -> u64 {
        let doublings = failures.saturating_sub(self.limits.user_free_failures);
        self.limits
            .user_backoff_ms
            .checked_shl(doublings)
            .filter(|ms| ms >> doublings == self.limits.user_backoff_ms)
            .unwrap_or(u64::MAX)
            .min(self.limits.user_max_backoff_ms)
    }

    /// Whether `source` logged in as `user` within `known_for_ms`.
    pub fn is_known(&self, source: Source, user: &str, now_ms: u64) -> bool {
        self.known
            .peek(&(source, user.to_string()))
            .is_some_and(|at| now_ms.saturating_sub(*at) < self.limits.known_for_ms)
    }

    /// What an attempt from `source` as `user` may do at `now_ms`.
    pub fn admit(&self, source: Source, user: &str, now_ms: u64) -> Admission {
        let known = self.is_known(source, user, now_ms);
        let source_wait = self.source_wait(source, now_ms);
        if source_wait > 0 {
            let throttled = self.throttled(Limit::Source, source, user, source_wait);
            return if known {
                Admission::KnownOnly(throttled)
            } else {
                Admission::Refused(throttled)
            };
        }
        let user_wait = self.user_wait(user, now_ms);
        if user_wait > 0 && !known {
            return Admission::Refused(self.throttled(Limit::User, source, user, user_wait));
        }
        Admission::Open
    }

    /// Takes a password check's place for an [`Admission::Open`] attempt:
    /// a token of its source and a pending check (the limits are checked
    /// again, as other attempts may have begun since). End it with
    /// [`end_check`](LoginThrottle::end_check).
    pub fn begin_check(
        &mut self,
        source: Source,
        user: &str,
        now_ms: u64,
    ) -> Result<(), Throttled> {
        match self.admit(source, user, now_ms) {
            Admission::Open => {}
            Admission::KnownOnly(throttled) | Admission::Refused(throttled) => {
                return Err(throttled);
            }
        }
        if self.pending_checks >= self.limits.max_pending_checks {
            let retry = self.limits.user_backoff_ms.max(1);
            return Err(self.throttled(Limit::Busy, source, user, retry));
        }
        self.pending_checks += 1;
        self.add_debt(source, now_ms);
        let failures = self.user_failures(user);
        failures.in_flight += 1;
        Ok(())
    }

    /// Ends a check begun with [`begin_check`](LoginThrottle::begin_check):
    /// a verified password gives its source's token back and makes the
    /// source known to the user; a failure counts against the user name
    /// (its source's token stays spent).
    pub fn end_check(&mut self, source: Source, user: &str, outcome: CheckOutcome, now_ms: u64) {
        self.pending_checks = self.pending_checks.saturating_sub(1);
        let refill = self.limits.source_refill_ms;
        if outcome != CheckOutcome::Failed
            && let Some(bucket) = self.sources.get_mut(&source)
        {
            bucket.paid_at_ms = bucket.paid_at_ms.saturating_sub(refill);
        }
        let forget = self.limits.user_forget_ms;
        let failures = self.user_failures(user);
        failures.in_flight = failures.in_flight.saturating_sub(1);
        if outcome == CheckOutcome::Failed {
            if now_ms.saturating_sub(failures.last_ms) >= forget {
                failures.count = 0;
            }
            failures.count = failures.count.saturating_add(1);
            failures.last_ms = now_ms;
        }
        if outcome == CheckOutcome::Verified {
            self.known.insert((source, user.to_string()), now_ms);
        }
    }

    /// A login the credential cache settled (the password verified
    /// before, against the same hash): `source` is known to `user`.
    pub fn verified_by_cache(&mut self, source: Source, user: &str, now_ms: u64) {
        self.known.insert((source, user.to_string()), now_ms);
    }

    /// An [`Admission::KnownOnly`] attempt the cache did not verify: a
    /// failure of its source and user, though nothing was checked.
    pub fn refused_known(&mut self, source: Source, user: &str, now_ms: u64) {
        self.add_debt(source, now_ms);
        let failures = self.user_failures(user);
        failures.count = failures.count.saturating_add(1);
        failures.last_ms = now_ms;
    }

    fn add_debt(&mut self, source: Source, now_ms: u64) {
        let refill = self.limits.source_refill_ms;
        let capacity = self.capacity_ms();
        let bucket = match self.sources.get_mut(&source) {
            Some(bucket) => bucket,
            None => {
                // Full: the least recently active source, most likely paid
                // off, is forgotten.
                self.sources.insert(source, Bucket::default());
                self.sources.get_mut(&source).expect("just inserted")
            }
        };
        // At most a full bucket plus the checks in flight: a source that
        // stops is forgiven within its burst's refill.
        let debt = bucket.debt(now_ms) + refill;
        bucket.paid_at_ms = now_ms + debt.min(capacity + refill);
    }

    fn user_failures(&mut self, user: &str) -> &mut Failures {
        if self.users.peek(user).is_none() {
            self.users.insert(user.to_string(), Failures::default());
        }
        self.users.get_mut(user).expect("just inserted")
    }

    /// Checks begun and not ended.
    pub fn pending_checks(&self) -> usize {
        self.pending_checks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Source {
        Source::of(Some(text.parse().unwrap()))
    }

    fn limits() -> LoginLimits {
        LoginLimits {
            source_burst: 3,
            source_refill_ms: 1_000,
            user_free_failures: 5,
            user_backoff_ms: 100,
            user_max_backoff_ms: 800,
            user_forget_ms: 60_000,
            known_for_ms: 3_600_000,
            max_tracked: 100,
            max_pending_checks: 4,
        }
    }

    /// One full check from `source` as `user` at `now` that ends with
    /// `outcome`; the refusal if it was not allowed to begin.
    fn attempt(
        throttle: &mut LoginThrottle,
        source: Source,
        user: &str,
        outcome: CheckOutcome,
        now: u64,
    ) -> Result<(), Throttled> {
        throttle.begin_check(source, user, now)?;
        throttle.end_check(source, user, outcome, now);
        Ok(())
    }

    #[test]
    fn a_source_fails_its_burst_then_once_per_refill() {
        let mut throttle = LoginThrottle::new(limits());
        let bad = ip("10.0.0.66");
        for user in ["a", "b", "c"] {
            assert_eq!(throttle.admit(bad, user, 0), Admission::Open);
            attempt(&mut throttle, bad, user, CheckOutcome::Failed, 0).unwrap();
        }
        let refused = attempt(&mut throttle, bad, "d", CheckOutcome::Failed, 0).unwrap_err();
        assert_eq!(refused.limit, Limit::Source);
        assert_eq!(refused.retry_after_ms, 1_000);
        assert_eq!(
            refused.to_string(),
            "too many failed logins from 10.0.0.66; retry in 1000 ms"
        );
        assert!(matches!(
            throttle.admit(bad, "d", 999),
            Admission::Refused(_)
        ));
        assert_eq!(throttle.admit(bad, "d", 1_000), Admission::Open);
        attempt(&mut throttle, bad, "d", CheckOutcome::Failed, 1_000).unwrap();
        assert!(matches!(
            throttle.admit(bad, "e", 1_500),
            Admission::Refused(_)
        ));
        // Another source is not affected.
        assert_eq!(throttle.admit(ip("10.0.0.1"), "a", 1_500), Admission::Open);
        // Quiet for a whole refill of the burst: a full bucket again.
        for user in ["a", "b", "c"] {
            attempt(&mut throttle, bad, user, CheckOutcome::Failed, 5_000).unwrap();
        }
    }

    #[test]
    fn concurrent_checks_hold_their_tokens_and_good_passwords_give_them_back() {
        let mut throttle = LoginThrottle::new(limits());
        let source = ip("10.0.0.7");
        for _ in 0..3 {
            throttle.begin_check(source, "app", 0).unwrap();
        }
        assert_eq!(
            throttle.begin_check(source, "app", 0).unwrap_err().limit,
            Limit::Source,
            "three checks in flight take the burst"
        );
        for _ in 0..3 {
            throttle.end_check(source, "app", CheckOutcome::Verified, 0);
        }
        assert_eq!(throttle.pending_checks(), 0);
        for _ in 0..10 {
            attempt(&mut throttle, source, "app", CheckOutcome::Verified, 0).unwrap();
            attempt(&mut throttle, source, "app", CheckOutcome::Abandoned, 0).unwrap();
        }
    }

    #[test]
    fn a_user_is_spaced_out_after_its_free_failures_and_forgotten_when_quiet() {
        let mut throttle = LoginThrottle::new(limits());
        // Five sources, one failure each: the free failures.
        for i in 0..5 {
            let source = ip(&format!("10.1.0.{i}"));
            attempt(&mut throttle, source, "admin", CheckOutcome::Failed, 0).unwrap();
        }
        let next = ip("10.1.0.99");
        let refused = attempt(&mut throttle, next, "admin", CheckOutcome::Failed, 0).unwrap_err();
        assert_eq!(refused.limit, Limit::User);
        assert_eq!(refused.retry_after_ms, 100);
        assert_eq!(
            refused.to_string(),
            "too many failed logins as user admin; retry in 100 ms"
        );
        // Each failure past them doubles the spacing, up to the cap.
        let mut now = 0;
        for (i, backoff) in [100, 200, 400, 800, 800].into_iter().enumerate() {
            now += backoff;
            assert!(matches!(
                throttle.admit(next, "admin", now - 1),
                Admission::Refused(_)
            ));
            let source = ip(&format!("10.2.0.{i}"));
            attempt(&mut throttle, source, "admin", CheckOutcome::Failed, now).unwrap();
        }
        // Another user is not affected; the quiet user is forgotten.
        assert_eq!(throttle.admit(next, "other", now), Admission::Open);
        assert_eq!(throttle.admit(next, "admin", now + 60_000), Admission::Open);
        attempt(
            &mut throttle,
            next,
            "admin",
            CheckOutcome::Failed,
            now + 60_000,
        )
        .unwrap();
        assert_eq!(
            throttle.admit(ip("10.3.0.1"), "admin", now + 60_000),
            Admission::Open
        );
    }

    #[test]
    fn past_its_free_failures_a_user_is_checked_one_attempt_at_a_time() {
        let mut throttle = LoginThrottle::new(LoginLimits {
            max_pending_checks: 10,
            ..limits()
        });
        for i in 0..5 {
            throttle
                .begin_check(ip(&format!("10.1.0.{i}")), "admin", 0)
                .unwrap();
        }
        let sixth = throttle
            .begin_check(ip("10.1.0.9"), "admin", 0)
            .unwrap_err();
        assert_eq!(
            sixth.limit,
            Limit::User,
            "five in flight take the free failures"
        );
    }

    #[test]
    fn a_source_known_to_a_user_is_exempt_from_the_users_limit_and_only_its_cached_password_passes_its_own()
     {
        let mut throttle = LoginThrottle::new(limits());
        let home = ip("10.0.0.1");
        attempt(&mut throttle, home, "alice", CheckOutcome::Verified, 0).unwrap();
        assert!(throttle.is_known(home, "alice", 0));
        // A botnet spaces alice's logins out; her known client goes on.
        for i in 0..5 {
            attempt(
                &mut throttle,
                ip(&format!("10.9.0.{i}")),
                "alice",
                CheckOutcome::Failed,
                0,
            )
            .unwrap();
        }
        assert!(matches!(
            throttle.admit(ip("10.0.0.2"), "alice", 1),
            Admission::Refused(_)
        ));
        assert_eq!(throttle.admit(home, "alice", 1), Admission::Open);
        attempt(&mut throttle, home, "alice", CheckOutcome::Verified, 1).unwrap();
        // A client sharing her address exhausts its bucket: alice's client
        // may still pass with her cached password, others are refused.
        for user in ["x", "y", "z"] {
            attempt(&mut throttle, home, user, CheckOutcome::Failed, 2).unwrap();
        }
        assert!(matches!(
            throttle.admit(home, "x", 2),
            Admission::Refused(_)
        ));
        let Admission::KnownOnly(refusal) = throttle.admit(home, "alice", 2) else {
            panic!("alice's source is known");
        };
        assert_eq!(refusal.limit, Limit::Source);
        throttle.verified_by_cache(home, "alice", 2);
        assert!(throttle.is_known(home, "alice", 3_600_001));
        assert!(!throttle.is_known(home, "alice", 3_600_002));
        // A guess that the cache does not verify counts as a failure.
        throttle.refused_known(home, "alice", 2);
        assert!(throttle.admit(home, "alice", 2_000).ne(&Admission::Open));
    }

    #[test]
    fn pending_checks_are_bounded_node_wide() {
        let mut throttle = LoginThrottle::new(limits());
        for i in 0..4 {
            throttle
                .begin_check(ip(&format!("10.4.0.{i}")), &format!("u{i}"), 0)
                .unwrap();
        }
        let busy = throttle.begin_check(ip("10.4.0.9"), "u9", 0).unwrap_err();
        assert_eq!(busy.limit, Limit::Busy);
        assert!(
            busy.to_string().starts_with("too many logins waiting"),
            "{busy}"
        );
        throttle.end_check(ip("10.4.0.0"), "u0", CheckOutcome::Failed, 0);
        throttle.begin_check(ip("10.4.0.9"), "u9", 0).unwrap();
    }

    #[test]
    fn sources_are_addresses_and_ipv6_ones_their_64_bit_prefix() {
        let a = Source::of(Some("2001:db8:1:2:aaaa::1".parse().unwrap()));
        let b = Source::of(Some("2001:db8:1:2:bbbb::9".parse().unwrap()));
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_ne!(a, Source::of(Some("2001:db8:1:3::1".parse().unwrap())));
        assert_eq!(
            Source::of(Some("::ffff:10.0.0.1".parse().unwrap())),
            ip("10.0.0.1")
        );
        assert_eq!(Source::of(None).to_string(), "an unknown address");
    }

    #[test]
    fn the_tables_stay_bounded_whatever_names_and_addresses_are_invented() {
        let mut throttle = LoginThrottle::new(limits());
        for i in 0..1_000u32 {
            let source = Source::of(Some(std::net::Ipv4Addr::from(i).into()));
            attempt(
                &mut throttle,
                source,
                &format!("user{i}"),
                CheckOutcome::Failed,
                0,
            )
            .unwrap();
            attempt(
                &mut throttle,
                source,
                &format!("user{i}"),
                CheckOutcome::Verified,
                0,
            )
            .unwrap();
        }
        assert!(throttle.sources.len() <= 100);
        assert!(throttle.users.len() <= 100);
        assert!(throttle.known.len() <= 100);
    }
}
