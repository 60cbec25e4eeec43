//! Lightweight transactions from the client: [`Client::put_if`],
//! [`Client::delete_if`] and [`Client::get_serial`].
//!
//! Each goes to one coordinator per key — the key's first replica that is
//! up, in placement order (for `LOCAL_SERIAL`, the first in the local data
//! center): [`crate::RoutingTable::plan_for_serial`]. Every client picks the
//! same one, so rivals on a key wait in that node's queue for the key
//! instead of pre-empting each other's ballots from several coordinators
//! and backing off at random, which is how Cassandra's lightweight
//! transactions collapse under contention (CASSANDRA-15746).
//!
//! A compare-and-set is retried on the next node of that plan only when it
//! certainly did not apply ([`crate::Idempotence::CompareAndSet`]); an
//! outcome that is unknown is the caller's, who reads the key with a
//! serial read to learn it ([`crate::ClientError::is_cas_unknown`]). A
//! serial read is retried as any read is.

use ringstore_proto::v1 as pb;

use crate::client::Client;
use crate::error::Result;
use crate::retry::Idempotence;
use crate::sent_at::timed;

/// The conditions of a compare-and-set, as its request's `expected` field
/// takes them.
pub mod expect {
    use ringstore_proto::v1 as pb;

    /// The key's visible value is exactly `value`.
    pub fn value(value: impl Into<Vec<u8>>) -> Option<pb::Expected> {
        condition(pb::expected::Condition::Value(value.into()))
    }

    /// The key has no visible value (never written, deleted or expired):
    /// Cassandra's `IF NOT EXISTS`.
    pub fn absent() -> Option<pb::Expected> {
        condition(pb::expected::Condition::Absent(pb::ExpectAbsent {}))
    }

    /// Anything: an unconditional write, made linearizable.
    pub fn any() -> Option<pb::Expected> {
        condition(pb::expected::Condition::Any(pb::ExpectAny {}))
    }

    fn condition(condition: pb::expected::Condition) -> Option<pb::Expected> {
        Some(pb::Expected {
            condition: Some(condition),
        })
    }
}

impl Client {
    /// Writes `value` if the key's current value meets `expected`
    /// (linearizably, by per-key Paxos among its replicas). The answer says
    /// whether it applied and, when not, what the key holds. A failure
    /// that [`is_cas_unknown`](crate::ClientError::is_cas_unknown) may
    /// have applied: read the key with [`Client::get_serial`].
    ///
    /// ```no_run
    /// # async fn example(client: ringstore_client::Client) -> ringstore_client::Result<()> {
    /// use ringstore_client::{expect, pb};
    ///
    /// let claimed = client
    ///     .put_if(pb::PutIfRequest {
    ///         keyspace: "ks".into(),
    ///         key: b"lease".to_vec(),
    ///         expected: expect::absent(),
    ///         value: b"me".to_vec(),
    ///         ..Default::default()
    ///     })
    ///     .await?;
    /// if !claimed.applied {
    ///     println!("held by {:?}", String::from_utf8_lossy(&claimed.value));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn put_if(&self, request: pb::PutIfRequest) -> Result<pb::CasResponse> {
        let plan = self.serial_plan(&request.keyspace, &request.key, request.serial_consistency);
        let timeout = self.config().request_timeout;
        self.execute(plan, Idempotence::CompareAndSet, |mut client| {
            let request = timed(request.clone(), timeout);
            async move { client.put_if(request).await }
        })
        .await
    }

    /// Deletes the key if its current value meets `expected`, as
    /// [`Client::put_if`] writes.
    pub async fn delete_if(&self, request: pb::DeleteIfRequest) -> Result<pb::CasResponse> {
        let plan = self.serial_plan(&request.keyspace, &request.key, request.serial_consistency);
        let timeout = self.config().request_timeout;
        self.execute(plan, Idempotence::CompareAndSet, |mut client| {
            let request = timed(request.clone(), timeout);
            async move { client.delete_if(request).await }
        })
        .await
    }

    /// A linearizable read (Cassandra's `SERIAL` read): the key's value as
    /// of a moment between the call and its answer, finishing any
    /// compare-and-set left half done. Retried as any read.
    pub async fn get_serial(&self, request: pb::GetSerialRequest) -> Result<pb::GetResponse> {
        let plan = self.serial_plan(&request.keyspace, &request.key, request.serial_consistency);
        self.execute(plan, Idempotence::Idempotent, |mut client| {
            let request = request.clone();
            async move { client.get_serial(request).await }
        })
        .await
    }
}
