//! A replica's read of its own copy of a cell, for a coordinator: this
//! node's (`coordinator/`, when it is a replica of the key) or a peer's
//! (`services/replica_reads.rs`).
//!
//! A copy that does not read back (a damaged cell: its checksum, its
//! layout or the engine caught it; see the storage crate's essay) is a
//! replica fault, not a failed request. The read fails with the store's
//! corruption error, which a peer answers as `DATA_LOSS`
//! ([`NodeError::is_damaged_replica`]), so the coordinator reads another
//! replica instead and read repair rewrites this one. The store counts it
//! (`ringstore_storage_corrupt_reads_total`); this module logs it at error
//! level with the keyspace and the key, once per read that met it.
//!
//! It asks its host ([`CoordinatorHost`]) for the store and for recording
//! the read as served locally, nothing else.

use std::time::Instant;

use ringstore_metrics::LocalOp;
use ringstore_storage::{Cell, KeyspaceId, printable_key};

use crate::coordinator::host::CoordinatorHost;
use crate::error::{NodeError, Result};

/// This node's cell of `key` in keyspace `id` (named `name`), recorded as
/// served locally; a damaged one is logged and is an error (see the
/// module docs).
pub(crate) fn read_own_copy(
    host: &impl CoordinatorHost,
    id: KeyspaceId,
    name: &str,
    key: &[u8],
) -> Result<Option<Cell>> {
    let started = Instant::now();
    let cell = host.store().read(id, key).map_err(|error| {
        if error.is_corruption() {
            tracing::error!(
                keyspace = %name,
                keyspace_id = %id,
                key = %printable_key(key),
                %error,
                "this replica's copy of a cell does not read back: the read goes to \
                 another replica, and read repair or repair rewrites this copy"
            );
        }
        NodeError::from(error)
    })?;
    host.served_locally(id, name, LocalOp::Read, key, started.elapsed());
    Ok(cell)
}
