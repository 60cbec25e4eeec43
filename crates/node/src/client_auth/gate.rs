//! Logging a client in: the login throttle, the credential cache, the
//! store, and Argon2 verification off the async threads.
//!
//! A login goes through, in order:
//!
//! 1. the throttle ([`LoginThrottle::admit`], `ringstore-client-auth`): a source
//!    or user name over its limit of failed logins is refused at once
//!    (`RESOURCE_EXHAUSTED`), unless the source logged in as that user
//!    before, which may then pass with a cached password only;
//! 2. the cache: a password that verified against the user's current hash
//!    passes with a digest comparison, its record read again (at QUORUM) if
//!    older than the validity. This is the lane of known users: it never
//!    waits for a check slot, whatever queues there;
//! 3. a full check, for everything else: joined with a check in flight
//!    for the same credentials ([`flights`](super::flights)), else begun
//!    with the throttle (a token of the source, a pending check), the
//!    record read, and Argon2 on the blocking pool, one check per core at
//!    a time. The outcome goes back to the throttle: a failure counts
//!    against the source and the user name.
//!
//! Before any user exists (`system_auth` is being set up), a login is
//! answered `UNAVAILABLE` (retry), not counted as a failure: clients
//! waiting for the default superuser are not throttled for it.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use ringstore_client_auth::{
    Admission, Cached, CheckOutcome, CredentialCache, DEFAULT_PASSWORD, DEFAULT_SUPERUSER,
    LoginLimits, LoginThrottle, Principal, Source, StoredHash, Throttled, UserName, UserRecord,
};
use ringstore_metrics::NodeMetrics;
use tonic::Status;

use super::flights::{Flight, Flights, Verdict, verdict};
use super::refused::Refused;

/// What the gate needs from the running node, and nothing more: the users
/// of `system_auth`, the password check, the clock and the metrics. The
/// node is one through [`NodeUsers`](super::store::NodeUsers); tests drive
/// the gate with a double whose checks they can hold and count.
pub trait GateHost: Send + Sync + 'static {
    /// `name`'s record in `system_auth` (none: no such user).
    fn read_user<'a>(
        &'a self,
        name: &'a UserName,
    ) -> BoxFuture<'a, crate::error::Result<Option<UserRecord>>>;
    /// Whether any user was ever created (the user index exists).
    fn users_exist(&self) -> BoxFuture<'_, crate::error::Result<bool>>;
    /// Whether `password` matches `hash` (none: no such user), taking the
    /// same time either way: [`ringstore_client_auth::verify`] on a node. It
    /// blocks (tens of milliseconds), so the gate calls it on the
    /// blocking pool.
    fn verify(&self, password: &str, hash: Option<&StoredHash>) -> bool;
    /// Where refusals are counted.
    fn metrics(&self) -> &NodeMetrics;
    /// The wall clock, in milliseconds since the Unix epoch (what the
    /// cache's validity and the throttle's limits are measured on).
    fn now_ms(&self) -> u64;
}

/// Checks credentials for the client port; shared by the layer and the
/// `Users` service (which invalidates what it changes).
pub struct Gate {
    host: Arc<dyn GateHost>,
    /// How long a user record is trusted, in milliseconds.
    validity_ms: u64,
    /// Held for lookups and inserts only, never across an await.
    cache: Mutex<CredentialCache>,
    /// Held for decisions only, never across an await.
    throttle: Mutex<LoginThrottle>,
    flights: Flights,
    /// Set once a user index was seen (users never stop existing).
    users_exist: AtomicBool,
    /// Failed logins since start.
    failed_logins: AtomicU64,
    /// Logins refused by the throttle since start.
    throttled_logins: AtomicU64,
    /// Argon2 checks running at once, at most one per core: each takes
    /// 19 MiB and tens of milliseconds. The throttle bounds how many wait.
    checks: tokio::sync::Semaphore,
}

/// How a full check ended, for the throttle: `Failed` unless set
/// otherwise, so a request cancelled mid-check (whose Argon2 work goes on)
/// counts as the failure it most likely was.
struct CheckEnd<'a> {
    gate: &'a Gate,
    source: Source,
    user: &'a str,
    outcome: CheckOutcome,
}

impl Drop for CheckEnd<'_> {
    fn drop(&mut self) {
        let now = self.gate.host.now_ms();
        self.gate
            .throttle()
            .end_check(self.source, self.user, self.outcome, now);
    }
}

impl Gate {
    /// The gate of `host`, trusting what it read for `validity_ms`
    /// (`auth.validity_ms`), with the default [`LoginLimits`].
    pub fn new(host: Arc<dyn GateHost>, validity_ms: u64) -> Gate {
        Gate::with_limits(host, validity_ms, LoginLimits::default())
    }

    /// The gate of `host` with these login limits.
    pub fn with_limits(host: Arc<dyn GateHost>, validity_ms: u64, limits: LoginLimits) -> Gate {
        Gate {
            host,
            validity_ms,
            cache: Mutex::new(CredentialCache::new(validity_ms)),
            throttle: Mutex::new(LoginThrottle::new(limits)),
            flights: Flights::default(),
            users_exist: AtomicBool::new(false),
            failed_logins: AtomicU64::new(0),
            throttled_logins: AtomicU64::new(0),
            checks: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, usize::from),
            ),
        }
    }

    fn cache(&self) -> MutexGuard<'_, CredentialCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn throttle(&self) -> MutexGuard<'_, LoginThrottle> {
        self.throttle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The node's metrics.
    pub fn metrics(&self) -> &NodeMetrics {
        self.host.metrics()
    }

    /// Forgets `name`'s cached record (changed through this node).
    pub fn invalidate(&self, name: &UserName) {
        self.cache().invalidate(name.as_str());
    }

    /// Who `user` with `password`, calling from `source` (the peer's IP
    /// address, if known), is, or why not. The work is the same (one
    /// Argon2 check) for an unknown user as for a wrong password.
    pub async fn authenticate(
        &self,
        source: Option<IpAddr>,
        user: Option<String>,
        password: Option<String>,
    ) -> Result<Principal, Refused> {
        let (Some(user), Some(password)) = (user, password) else {
            return Err(Refused::Missing);
        };
        let source = Source::of(source);
        let name = UserName::new(&user).ok();
        // The throttle's key: the name, or (malformed) at most 64 characters
        // of what was sent, so malformed names are limited too.
        let key: String = match &name {
            Some(name) => name.to_string(),
            None => user.chars().take(64).collect(),
        };
        let now = self.host.now_ms();
        let admission = self.throttle().admit(source, &key, now);
        let known_only = match admission {
            Admission::Open => None,
            Admission::KnownOnly(throttled) => Some(throttled),
            Admission::Refused(throttled) => return Err(self.throttled(throttled)),
        };
        if let Some(name) = &name
            && let Some(record) = self.cached_login(name, &password, now).await?
        {
            self.throttle().verified_by_cache(source, &key, now);
            return Ok(principal(record, &password));
        }
        if let Some(throttled) = known_only {
            self.throttle().refused_known(source, &key, now);
            return Err(self.throttled(throttled));
        }
        loop {
            // Requests with the same credentials wait for one check (a
            // malformed name has nothing to share).
            let lead = match &name {
                None => None,
                Some(name) => {
                    let fingerprint = self.cache().fingerprint(name.as_str(), &password);
                    match self.flights.join(fingerprint) {
                        Flight::Lead(lead) => Some(lead),
                        Flight::Follow(waiters) => match verdict(waiters).await {
                            Some(Verdict::Verified(record)) => {
                                self.throttle().verified_by_cache(source, &key, now);
                                return Ok(principal(record, &password));
                            }
                            Some(Verdict::Failed) => {
                                return Err(self.failed_login(source, &user));
                            }
                            Some(Verdict::Unavailable(status)) => {
                                return Err(Refused::Unavailable(status));
                            }
                            // Its leader went away: lead this time.
                            None => continue,
                        },
                    }
                }
            };
            let verdict = self.check(source, &key, name.as_ref(), &password).await;
            let result = match &verdict {
                Ok(Verdict::Verified(record)) => Ok(principal(record.clone(), &password)),
                Ok(Verdict::Failed) => Err(self.failed_login(source, &user)),
                Ok(Verdict::Unavailable(status)) => Err(Refused::Unavailable(status.clone())),
                Err(throttled) => Err(self.throttled(throttled.clone())),
            };
            if let (Some(lead), Ok(verdict)) = (lead, verdict) {
                lead.finish(verdict);
            }
            return result;
        }
    }

    /// The record of `name` if `password` is the one the cache knows
    /// verified against its hash, read again if stale (no check slot, no
    /// throttle token: this is the known users' lane).
    async fn cached_login(
        &self,
        name: &UserName,
        password: &str,
        now: u64,
    ) -> Result<Option<UserRecord>, Refused> {
        match self.cache().lookup(name.as_str(), password, now) {
            Cached::Known {
                record: Some(record),
                verified: true,
            } => return Ok(Some(record.clone())),
            Cached::Stale { verified: true } => {}
            _ => return Ok(None),
        }
        let record = self.read_user(name).await?;
        let mut cache = self.cache();
        cache.store(name.as_str(), record, now);
        Ok(match cache.lookup(name.as_str(), password, now) {
            Cached::Known {
                record: Some(record),
                verified: true,
            } => Some(record.clone()),
            // Its hash changed: a full check.
            _ => None,
        })
    }

    /// A full check of `password` for `name` (none: malformed), begun with
    /// the throttle; refused if over a limit.
    async fn check(
        &self,
        source: Source,
        key: &str,
        name: Option<&UserName>,
        password: &str,
    ) -> Result<Verdict, Throttled> {
        let now = self.host.now_ms();
        self.throttle().begin_check(source, key, now)?;
        let mut end = CheckEnd {
            gate: self,
            source,
            user: key,
            outcome: CheckOutcome::Failed,
        };
        let record = match name {
            None => None,
            Some(name) => match self.current_record(name, now).await {
                Ok(record) => record,
                Err(status) => {
                    end.outcome = CheckOutcome::Abandoned;
                    return Ok(Verdict::Unavailable(status));
                }
            },
        };
        tracing::debug!(
            user = %key.escape_debug(),
            %source,
            found = record.is_some(),
            "checking a client password"
        );
        let Ok(_turn) = self.checks.acquire().await else {
            return Ok(Verdict::Failed);
        };
        let (host, hash, checked) = (
            self.host.clone(),
            record.as_ref().map(|r| r.hash.clone()),
            password.to_string(),
        );
        let verified = ringstore_storage::offload::spawn_blocking(move || {
            host.verify(&checked, hash.as_ref())
        })
        .await
        .unwrap_or(false);
        match (record, name) {
            (Some(record), Some(name)) if verified => {
                let mut cache = self.cache();
                cache.store(name.as_str(), Some(record.clone()), now);
                cache.mark_verified(name.as_str(), password);
                end.outcome = CheckOutcome::Verified;
                Ok(Verdict::Verified(record))
            }
            _ => Ok(Verdict::Failed),
        }
    }

    /// `name`'s record, cached if fresh, else read (and cached); the
    /// status if it cannot be read, or if no user exists yet.
    async fn current_record(
        &self,
        name: &UserName,
        now: u64,
    ) -> Result<Option<UserRecord>, Status> {
        if let Some(record) = self.cache().fresh_record(name.as_str(), now) {
            return Ok(record.cloned());
        }
        let record = self
            .read_user(name)
            .await
            .map_err(|refused| refused.status())?;
        if record.is_none() && !self.users_exist.load(Ordering::Relaxed) {
            let exist = self.host.users_exist().await.map_err(unreadable)?;
            if !exist {
                return Err(Status::unavailable(
                    "no users yet: system_auth is being set up (the default superuser \
                     appears once a quorum of its replicas is up); retry",
                ));
            }
            self.users_exist.store(true, Ordering::Relaxed);
        }
        self.cache().store(name.as_str(), record.clone(), now);
        Ok(record)
    }

    /// `principal`'s record as the store holds it now, for a stream that
    /// logged in once and outlives the cache's validity (grants revoked
    /// meanwhile apply to it): refused if the user was dropped. The
    /// password is not checked again, as a Cassandra connection is not
    /// logged in again when its user's password changes.
    pub async fn reload(&self, principal: &Principal) -> Result<Principal, Refused> {
        match self.read_user(&principal.user.name).await? {
            Some(user) => Ok(Principal {
                user,
                default_password: principal.default_password,
            }),
            None => Err(Refused::BadCredentials),
        }
    }

    /// `name`'s record from `system_auth`; `UNAVAILABLE` if too few of its
    /// replicas answer.
    async fn read_user(&self, name: &UserName) -> Result<Option<UserRecord>, Refused> {
        self.host
            .read_user(name)
            .await
            .map_err(|error| Refused::Unavailable(unreadable(error)))
    }

    /// How long a stream may use a principal before [`Gate::reload`].
    pub fn validity(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.validity_ms)
    }

    /// A failed login: logged (the 1st, 2nd, 4th, 8th… so a flood cannot
    /// flood the log), naming the user as sent and its source, never the
    /// password.
    fn failed_login(&self, source: Source, user: &str) -> Refused {
        let count = self.failed_logins.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            let user: String = user.chars().take(64).collect();
            tracing::warn!(
                user = %user.escape_debug(),
                %source,
                failed_so_far = count,
                "client login failed: unknown user or wrong password"
            );
        }
        Refused::BadCredentials
    }

    /// A login refused by the throttle, logged as failures are.
    fn throttled(&self, throttled: Throttled) -> Refused {
        let count = self.throttled_logins.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            tracing::warn!(
                reason = %throttled,
                throttled_so_far = count,
                "client login refused without a password check"
            );
        }
        Refused::Throttled(throttled)
    }
}

fn unreadable(error: crate::error::NodeError) -> Status {
    Status::unavailable(format!("cannot read users from system_auth: {error}"))
}

fn principal(user: UserRecord, password: &str) -> Principal {
    let default_password =
        user.superuser && user.name.as_str() == DEFAULT_SUPERUSER && password == DEFAULT_PASSWORD;
    Principal {
        user,
        default_password,
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
