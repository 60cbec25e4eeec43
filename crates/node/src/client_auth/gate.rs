//! Logging a client in: the credential cache, the store, and Argon2
//! verification off the async threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use ringstore_access::{
    Cached, CredentialCache, DEFAULT_PASSWORD, DEFAULT_SUPERUSER, Principal, UserName, UserRecord,
    verify,
};
use ringstore_metrics::AuthRefusal;
use tonic::Status;

use super::store;
use crate::context::NodeContext;

/// Checks credentials for the client port; shared by the layer and the
/// `Users` service (which invalidates what it changes).
pub struct Gate {
    context: Arc<NodeContext>,
    /// Held for lookups and inserts only, never across an await.
    cache: Mutex<CredentialCache>,
    /// Failed logins since start.
    failed_logins: AtomicU64,
    /// Argon2 checks running at once, at most one per core: each takes
    /// 19 MiB and tens of milliseconds, so a flood of bad logins queues
    /// here instead of exhausting memory and the blocking pool.
    checks: tokio::sync::Semaphore,
}

/// Why a request is refused before any service sees it.
#[derive(Debug)]
pub enum Refused {
    /// No user name or no password in the metadata.
    Missing,
    /// An unknown user, a wrong password or a malformed name (not told apart).
    BadCredentials,
    /// The user lacks the permission (the message names it).
    Denied(String),
    /// The request does not decode.
    Malformed(String),
    /// The users could not be read (too few `system_auth` replicas up).
    Unavailable(Status),
}

impl Refused {
    /// The status the client gets. Never holds the password.
    pub fn status(&self) -> Status {
        match self {
            Refused::Missing => Status::unauthenticated(
                "this node requires a user name and password (--user and --password, or \
                 RINGSTORE_USER and RINGSTORE_PASSWORD)",
            ),
            Refused::BadCredentials => {
                Status::unauthenticated("authentication failed: unknown user or wrong password")
            }
            Refused::Denied(message) => Status::permission_denied(message.clone()),
            Refused::Malformed(message) => Status::invalid_argument(message.clone()),
            Refused::Unavailable(status) => status.clone(),
        }
    }

    /// The metrics reason, if it is counted.
    pub fn reason(&self) -> Option<AuthRefusal> {
        match self {
            Refused::Missing => Some(AuthRefusal::MissingCredentials),
            Refused::BadCredentials => Some(AuthRefusal::BadCredentials),
            Refused::Denied(_) => Some(AuthRefusal::PermissionDenied),
            Refused::Malformed(_) | Refused::Unavailable(_) => None,
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Gate {
    /// The gate of `context`'s node, caching for `auth.validity_ms`.
    pub fn new(context: Arc<NodeContext>) -> Gate {
        let validity = context.config.auth.validity_ms;
        Gate {
            context,
            cache: Mutex::new(CredentialCache::new(validity)),
            failed_logins: AtomicU64::new(0),
            checks: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, usize::from),
            ),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, CredentialCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's metrics.
    pub fn metrics(&self) -> &ringstore_metrics::NodeMetrics {
        &self.context.metrics
    }

    /// Forgets `name`'s cached record (changed through this node).
    pub fn invalidate(&self, name: &UserName) {
        self.cache().invalidate(name.as_str());
    }

    /// Who `user` with `password` is, or why not. The work is the same
    /// (one Argon2 check) for an unknown user as for a wrong password.
    pub async fn authenticate(
        &self,
        user: Option<String>,
        password: Option<String>,
    ) -> Result<Principal, Refused> {
        let (Some(user), Some(password)) = (user, password) else {
            return Err(Refused::Missing);
        };
        let name = UserName::new(&user).ok();
        let now = now_ms();
        let cached = match &name {
            None => Some((None, false)),
            Some(name) => match self.cache().lookup(name.as_str(), &password, now) {
                Cached::Miss => None,
                Cached::Known { record, verified } => Some((record.cloned(), verified)),
            },
        };
        let (record, verified) = match (cached, &name) {
            (Some(known), _) => known,
            (None, Some(name)) => {
                let record = self.read_user(name).await?;
                self.cache().store(name.as_str(), record.clone(), now);
                (record, false)
            }
            (None, None) => (None, false),
        };
        tracing::debug!(
            user = %user.escape_debug(),
            found = record.is_some(),
            cached_verified = verified,
            "checking a client login"
        );
        let verified = verified || {
            let hash = record.as_ref().map(|r| r.hash.clone());
            let checked = password.clone();
            let _turn = self
                .checks
                .acquire()
                .await
                .map_err(|_| Refused::BadCredentials)?;
            // Requests arriving together with one user's credentials check
            // them once: the others find the password verified meanwhile.
            let meanwhile = name.as_ref().is_some_and(|name| {
                matches!(
                    self.cache().lookup(name.as_str(), &password, now_ms()),
                    Cached::Known { verified: true, .. }
                )
            });
            meanwhile
                || ringstore_storage::offload::spawn_blocking(move || {
                    verify(&checked, hash.as_ref())
                })
                .await
                .unwrap_or(false)
        };
        match (record, name) {
            (Some(record), Some(name)) if verified => {
                self.cache().mark_verified(name.as_str(), &password);
                Ok(principal(record, &password))
            }
            _ => {
                self.log_failed_login(&user);
                Err(Refused::BadCredentials)
            }
        }
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
        store::read_user(&self.context, name)
            .await
            .map_err(|error| {
                Refused::Unavailable(Status::unavailable(format!(
                    "cannot read users from system_auth: {error}"
                )))
            })
    }

    /// How long a stream may use a principal before [`Gate::reload`].
    pub fn validity(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.context.config.auth.validity_ms)
    }

    /// Logs a failed login (the 1st, 2nd, 4th, 8th… so a flood cannot
    /// flood the log), naming the user as sent, never the password.
    fn log_failed_login(&self, user: &str) {
        let count = self.failed_logins.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            let user: String = user.chars().take(64).collect();
            tracing::warn!(
                user = %user.escape_debug(),
                failed_so_far = count,
                "client login failed: unknown user or wrong password"
            );
        }
    }
}

fn principal(user: UserRecord, password: &str) -> Principal {
    let default_password =
        user.superuser && user.name.as_str() == DEFAULT_SUPERUSER && password == DEFAULT_PASSWORD;
    Principal {
        user,
        default_password,
    }
}
