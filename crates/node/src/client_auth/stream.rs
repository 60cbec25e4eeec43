//! Permissions on a stream that carries requests of other RPCs
//! (`Client/Pipeline`). The layer logs the stream in once, at its start,
//! and cannot see the messages; so each message is checked here against
//! the rule of the unary RPC it stands for (a pipelined put needs what a
//! `Client/Put` needs, on its own keyspace).
//!
//! A stream may live for hours. Its user's record is read again from
//! `system_auth` once it is older than the credential cache's validity
//! (`auth.validity_ms`), so a revoked grant or a dropped user takes effect
//! on open streams as soon as on new requests. The password is not checked
//! again (a Cassandra connection is not logged in again either).
//!
//! [`Grants`] is the decision, with the clock passed in; [`StreamAuth`]
//! adds the reload and the refusal counts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_client_auth::{Denied, Principal, is_password_change, rule_for};

use super::gate::Gate;
use super::refused::Refused;

/// A stream's principal and when it was read.
#[derive(Debug)]
pub struct Grants {
    principal: Principal,
    loaded_at: Instant,
    validity: Duration,
}

impl Grants {
    /// `principal`, read at `now`, trusted for `validity`.
    pub fn new(principal: Principal, now: Instant, validity: Duration) -> Grants {
        Grants {
            principal,
            loaded_at: now,
            validity,
        }
    }

    /// Whether the record must be read again before it is used at `now`.
    pub fn stale(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.loaded_at) >= self.validity
    }

    /// Replaces the record with one read at `now`.
    pub fn renew(&mut self, principal: Principal, now: Instant) {
        self.principal = principal;
        self.loaded_at = now;
    }

    /// Whether a request to the unary RPC at `path` on `keyspace` is allowed.
    pub fn check(&self, path: &str, keyspace: &str) -> Result<(), Denied> {
        let need = rule_for(path).need(Some(keyspace));
        self.principal.check(&need, is_password_change(path))
    }

    /// The principal the stream runs as.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }
}

/// The permission checks of one stream under `authenticator = "password"`.
pub struct StreamAuth {
    gate: Arc<Gate>,
    /// Held across the reload's read, so concurrent messages wait for one
    /// reload instead of each starting their own.
    grants: tokio::sync::Mutex<Grants>,
}

impl StreamAuth {
    /// The checks of a stream that logged in as `principal` through `gate`.
    pub fn new(gate: Arc<Gate>, principal: Principal) -> StreamAuth {
        let grants = Grants::new(principal, Instant::now(), gate.validity());
        StreamAuth {
            gate,
            grants: tokio::sync::Mutex::new(grants),
        }
    }

    /// Whether a message standing for the RPC at `path` may touch
    /// `keyspace`; the refusal is counted as the layer counts its own.
    pub async fn admit(&self, path: &str, keyspace: &str) -> Result<(), Refused> {
        let mut grants = self.grants.lock().await;
        if grants.stale(Instant::now()) {
            let fresh = self.gate.reload(grants.principal()).await;
            match fresh {
                Ok(principal) => grants.renew(principal, Instant::now()),
                Err(refused) => return Err(self.counted(refused)),
            }
        }
        grants
            .check(path, keyspace)
            .map_err(|denied| self.counted(Refused::Denied(denied)))
    }

    fn counted(&self, refused: Refused) -> Refused {
        if let Some(reason) = refused.reason() {
            self.gate.metrics().auth_refused(reason);
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use ringstore_client_auth::{Grant, Permission, Scope, UserName, UserRecord};

    use super::*;

    fn principal(grants: impl IntoIterator<Item = Grant>) -> Principal {
        let mut user = UserRecord::default_superuser().unwrap();
        user.name = UserName::new("alice").unwrap();
        user.superuser = false;
        user.grants = grants.into_iter().collect();
        Principal {
            user,
            default_password: false,
        }
    }

    #[test]
    fn each_message_needs_its_own_rpcs_permission_on_its_own_keyspace() {
        let reader = principal([Grant {
            permission: Permission::Read,
            scope: Scope::Keyspace("a".into()),
        }]);
        let grants = Grants::new(reader, Instant::now(), Duration::from_secs(2));
        assert_eq!(grants.check("/ringstore.v1.Client/Get", "a"), Ok(()));
        let put = grants.check("/ringstore.v1.Client/Put", "a").unwrap_err();
        assert!(put.to_string().contains("no write permission"), "{put}");
        assert!(grants.check("/ringstore.v1.Client/Get", "b").is_err());
        assert!(grants.check("/ringstore.v1.Client/Batch", "a").is_err());
    }

    #[test]
    fn the_record_is_stale_once_the_validity_has_passed() {
        let start = Instant::now();
        let mut grants = Grants::new(principal([]), start, Duration::from_secs(2));
        assert!(!grants.stale(start + Duration::from_millis(1999)));
        assert!(grants.stale(start + Duration::from_secs(2)));
        let writer = principal([Grant {
            permission: Permission::Write,
            scope: Scope::All,
        }]);
        grants.renew(writer, start + Duration::from_secs(2));
        assert!(!grants.stale(start + Duration::from_secs(3)));
        assert_eq!(grants.check("/ringstore.v1.Client/Put", "x"), Ok(()));
    }

    #[test]
    fn the_default_password_allows_no_data_on_a_stream_either() {
        let mut admin = principal([]);
        admin.user.superuser = true;
        admin.default_password = true;
        let grants = Grants::new(admin, Instant::now(), Duration::from_secs(2));
        assert!(matches!(
            grants.check("/ringstore.v1.Client/Get", "a"),
            Err(Denied::DefaultPassword)
        ));
    }
}
