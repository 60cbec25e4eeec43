//! The default superuser, written at a cluster's first start with the
//! password authenticator (see `ringstore-client-auth`'s essay for why every
//! node may do it at once).

use std::collections::BTreeSet;
use std::time::Duration;

use ringstore_client_auth::{BOOTSTRAP_TIMESTAMP_MICROS, DEFAULT_SUPERUSER, UserRecord};
use ringstore_storage::Timestamp;

use super::host::AuthHost;
use super::store;
use crate::error::Result;

/// How often a node retries while `system_auth` has too few replicas up.
const RETRY: Duration = Duration::from_secs(2);
/// After how many failed tries a node warns (then every as many again).
const WARN_EVERY: u32 = 15;

/// Until it succeeds: creates `system_auth` if missing and, if no user was
/// ever created, the default superuser. Runs on every node with
/// `authenticator = "password"`.
pub async fn run(host: impl AuthHost) {
    let mut failures = 0u32;
    loop {
        match once(&host).await {
            Ok(()) => return,
            Err(error) => {
                failures += 1;
                if failures.is_multiple_of(WARN_EVERY) {
                    tracing::warn!(
                        %error,
                        replication_factor = host.auth_replication_factor(),
                        "cannot set up system_auth yet (a quorum of its replicas must be up; \
                         a smaller cluster needs a smaller auth.replication_factor)"
                    );
                } else {
                    tracing::debug!(%error, "system_auth not set up yet; retrying");
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

async fn once(host: &impl AuthHost) -> Result<()> {
    store::ensure_keyspace(host).await?;
    if store::read_index(host).await?.is_some() {
        return Ok(());
    }
    // The same bytes at the same timestamp from every node: no conflict,
    // and any real change wins over it.
    let at = Some(Timestamp(BOOTSTRAP_TIMESTAMP_MICROS));
    let record = UserRecord::default_superuser()?;
    store::write_user(host, &record, at).await?;
    store::write_index(host, &BTreeSet::from([record.name.clone()]), at).await?;
    tracing::warn!(
        user = DEFAULT_SUPERUSER,
        "no users yet: created the default superuser {DEFAULT_SUPERUSER} with Cassandra's \
         default password; it can do nothing but change that password until it has: \
         ringstore --user {DEFAULT_SUPERUSER} user password {DEFAULT_SUPERUSER}"
    );
    Ok(())
}
