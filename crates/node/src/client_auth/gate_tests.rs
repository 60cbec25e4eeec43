//! The gate driven through a double of its host: users in a map, password
//! checks the test can hold and counts, and a clock the test moves.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use ringstore_client_auth::{Principal, StoredHash, UserName, UserRecord};
use ringstore_metrics::NodeMetrics;

use super::{Gate, GateHost, Refused};

/// The longest a held check waits for its release: a test that forgets to
/// release fails instead of hanging.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

struct Users {
    records: Mutex<HashMap<String, UserRecord>>,
    /// Password checks started.
    checks: AtomicUsize,
    /// While set, password checks wait.
    held: Mutex<bool>,
    released: Condvar,
    now_ms: AtomicU64,
    metrics: NodeMetrics,
}

impl Users {
    /// Users with these names and passwords, the clock at 1,000,000 ms.
    fn with(users: &[(&str, &str)]) -> Arc<Users> {
        let records = users
            .iter()
            .map(|(name, password)| (name.to_string(), record(name, password)))
            .collect();
        Arc::new(Users {
            records: Mutex::new(records),
            checks: AtomicUsize::new(0),
            held: Mutex::new(false),
            released: Condvar::new(),
            now_ms: AtomicU64::new(1_000_000),
            metrics: NodeMetrics::new().unwrap(),
        })
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    fn hold(&self) {
        *self.held.lock().unwrap() = true;
    }

    fn release(&self) {
        *self.held.lock().unwrap() = false;
        self.released.notify_all();
    }

    fn advance(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

/// A record whose "hash" is the password in clear: the double's check is
/// a comparison, so tests spend no Argon2 time.
fn record(name: &str, password: &str) -> UserRecord {
    UserRecord {
        name: UserName::new(name).unwrap(),
        hash: StoredHash::from_phc(format!("plain:{password}")),
        superuser: false,
        grants: BTreeSet::new(),
    }
}

impl GateHost for Users {
    fn read_user<'a>(
        &'a self,
        name: &'a UserName,
    ) -> BoxFuture<'a, crate::error::Result<Option<UserRecord>>> {
        let record = self.records.lock().unwrap().get(name.as_str()).cloned();
        Box::pin(async move { Ok(record) })
    }

    fn users_exist(&self) -> BoxFuture<'_, crate::error::Result<bool>> {
        let exist = !self.records.lock().unwrap().is_empty();
        Box::pin(async move { Ok(exist) })
    }

    fn verify(&self, password: &str, hash: Option<&StoredHash>) -> bool {
        self.checks.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        let mut held = self.held.lock().unwrap();
        while *held && started.elapsed() < HOLD_LIMIT {
            held = self
                .released
                .wait_timeout(held, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        hash.is_some_and(|hash| hash.as_phc() == format!("plain:{password}"))
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

async fn login(
    gate: &Gate,
    source: &str,
    user: &str,
    password: &str,
) -> Result<Principal, Refused> {
    gate.authenticate(
        Some(source.parse().unwrap()),
        Some(user.to_string()),
        Some(password.to_string()),
    )
    .await
}

/// Waits (polling, at most 10 s) until `done`.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn codes(refusals: &[Refused]) -> BTreeMap<String, usize> {
    let mut codes = BTreeMap::new();
    for refused in refusals {
        *codes
            .entry(format!("{:?}", refused.status().code()))
            .or_default() += 1;
    }
    codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_user_logs_in_again_without_waiting_behind_unverified_checks() {
    let users = Users::with(&[("good", "pw")]);
    let gate = Arc::new(Gate::new(users.clone(), 1_000));
    login(&gate, "10.0.0.1", "good", "pw").await.unwrap();
    assert_eq!(users.checks(), 1);

    // Bad logins, each from a source and for a name of its own, take every
    // check slot and queue behind them.
    users.hold();
    let slots = std::thread::available_parallelism().map_or(2, usize::from);
    let bad: Vec<_> = (0..slots + 4)
        .map(|i| {
            let gate = gate.clone();
            tokio::spawn(async move {
                login(
                    &gate,
                    &format!("10.0.1.{i}"),
                    &format!("nobody{i}"),
                    "guess",
                )
                .await
            })
        })
        .collect();
    wait_until("every check slot holds a bad login", || {
        users.checks() == 1 + slots
    })
    .await;

    // The good user's record is stale: it is read again, and its password,
    // which verified against that same hash, is not checked again.
    users.advance(1_000);
    let again = tokio::time::timeout(
        Duration::from_secs(5),
        login(&gate, "10.0.0.1", "good", "pw"),
    )
    .await;
    let checks = users.checks();
    users.release();
    assert!(
        matches!(again, Ok(Ok(_))),
        "the known user's login waited behind the held checks: {again:?}"
    );
    assert_eq!(checks, 1 + slots, "no password check for the known user");
    for task in bad {
        let refused = task.await.unwrap().unwrap_err().status();
        assert!(
            [tonic::Code::Unauthenticated, tonic::Code::ResourceExhausted]
                .contains(&refused.code()),
            "{refused:?}"
        );
    }
}

#[tokio::test]
async fn a_flood_of_bad_logins_from_one_source_is_refused_without_checks_once_over_its_limit() {
    let users = Users::with(&[("good", "pw")]);
    let gate = Gate::new(users.clone(), 2_000);
    let mut refusals = Vec::new();
    for _ in 0..100 {
        refusals.push(
            login(&gate, "10.0.0.66", "good", "guess")
                .await
                .unwrap_err(),
        );
    }
    let codes = codes(&refusals);
    assert!(
        users.checks() <= 10,
        "{} password checks for 100 bad logins from one source: {codes:?}",
        users.checks()
    );
    assert!(codes.contains_key("ResourceExhausted"), "{codes:?}");
    let throttled = refusals.last().unwrap().status();
    assert!(
        throttled.message().contains("too many failed logins"),
        "{throttled:?}"
    );
    // Another source logs in as the user under attack.
    login(&gate, "10.0.0.1", "good", "pw").await.unwrap();
}

#[tokio::test]
async fn a_botnet_guessing_one_password_is_slowed_but_the_users_known_client_still_logs_in() {
    let users = Users::with(&[("good", "pw")]);
    let gate = Gate::new(users.clone(), 1_000);
    login(&gate, "10.0.0.1", "good", "pw").await.unwrap();
    // Two seconds of guesses, one every 10 ms, each from an address of its own.
    let mut refusals = Vec::new();
    for i in 0..200u32 {
        users.advance(10);
        let source = format!("10.1.{}.{}", i / 100, i % 100);
        refusals.push(login(&gate, &source, "good", "guess").await.unwrap_err());
    }
    let codes = codes(&refusals);
    assert!(
        users.checks() <= 1 + 25,
        "{} password checks for 200 bad logins as one user: {codes:?}",
        users.checks()
    );
    // The client that logged in before goes on, its record read again.
    login(&gate, "10.0.0.1", "good", "pw").await.unwrap();
    // A new client of that user waits out the backoff like the guesses.
    let new = login(&gate, "10.0.0.2", "good", "pw").await.unwrap_err();
    assert_eq!(
        new.status().code(),
        tonic::Code::ResourceExhausted,
        "{new:?}"
    );
}
