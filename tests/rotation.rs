//! Rotating the cluster secret and the internode certificates without a
//! restart (issue 40). Three nodes with a secret file and mutual internode
//! TLS take a `QUORUM` load while both are rolled in three steps, each
//! reloaded on every node (`ReloadSecrets`) before the next: the new
//! secret and CA accepted; the new secret sealing and the new certificates
//! served; the old secret and CA dropped. No operation fails, no read is
//! stale, every acknowledged write reads back, and afterwards the old
//! secret and the old CA's certificates are refused.
//!
//! Address block 212.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::load::{Coordinators, Load, LoadSettings, check_read, version_of};
use common::tls::create_certs;
use common::{TestCluster, eventually};
use ringstore_membership::envelope::Envelope;
use ringstore_membership::{ClusterSecret, Generation};
use ringstore_node::tls::{InternodeEncryption, ServerEncryption};
use ringstore_proto::v1 as pb;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const OLD: &str = "rotation-old-secret-0123456789";
const NEW: &str = "rotation-new-secret-9876543210";
const BLOCK: u8 = 212;

/// The files every node reads, swapped in place as the rotation goes.
struct Files {
    dir: PathBuf,
    old_ca: PathBuf,
    new_ca: PathBuf,
    ips: Vec<String>,
}

impl Files {
    fn secret(&self) -> PathBuf {
        self.dir.join("secret")
    }
    fn certificate(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}.crt"))
    }
    fn key(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}.key"))
    }
    fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn write_secrets(&self, secrets: &[&str]) {
        std::fs::write(self.secret(), secrets.join("\n") + "\n").unwrap();
    }

    fn trust(&self, cas: &[&Path]) {
        let bundle: Vec<u8> = cas
            .iter()
            .flat_map(|ca| std::fs::read(ca.join("ca.crt")).unwrap())
            .collect();
        std::fs::write(self.ca(), bundle).unwrap();
    }

    fn serve_certificates_of(&self, ca: &Path) {
        for (i, ip) in self.ips.iter().enumerate() {
            std::fs::copy(ca.join(format!("node-{ip}.crt")), self.certificate(i)).unwrap();
            std::fs::copy(ca.join(format!("node-{ip}.key")), self.key(i)).unwrap();
        }
    }
}

async fn reload_everywhere(cluster: &TestCluster) {
    for i in 0..3 {
        let reloaded = cluster
            .admin(i)
            .await
            .reload_secrets(pb::ReloadSecretsRequest {})
            .await
            .unwrap_or_else(|status| panic!("node {i} reloads: {status:?}"))
            .into_inner();
        assert!(reloaded.secrets_reloaded, "{reloaded:?}");
        assert_eq!(reloaded.tls_reloaded, ["internode"], "{reloaded:?}");
    }
}

/// Waits until the load has acknowledged `more` writes past now.
async fn more_writes(load: &Load, more: u64, step: &str) {
    let target = load.writes_ok() + more;
    eventually(Duration::from_secs(30), step, || async {
        load.writes_ok() >= target
    })
    .await;
}

/// Whether a TLS connection to `node`'s internode port presenting `ca`'s
/// certificate for `ip` (and trusting `ca`) completes a call far enough to
/// be answered by the server (any status but a transport failure).
async fn internode_tls_accepts(cluster: &TestCluster, node: usize, ca: &Path, ip: &str) -> bool {
    let read = |name: String| std::fs::read(ca.join(name)).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.crt".into())))
        .identity(Identity::from_pem(
            read(format!("node-{ip}.crt")),
            read(format!("node-{ip}.key")),
        ));
    let address = cluster.node_config(node).internode_address;
    let channel = Channel::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await;
    let Ok(channel) = channel else {
        return false;
    };
    let answer = ringstore_proto::v1::internode_client::InternodeClient::new(channel)
        .pull_schema(pb::PullSchemaRequest {})
        .await;
    // Unauthenticated (no proof) means TLS let it through to the layer.
    !matches!(answer, Err(status) if status.code() == tonic::Code::Unavailable || status.code() == tonic::Code::Unknown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_secret_and_certificates_roll_under_quorum_load_with_no_failed_operation() {
    let dirs = tempfile::tempdir().unwrap();
    let root = dirs.path().to_path_buf();
    let ips: Vec<String> = (0..3)
        .map(|i| {
            TestCluster::config(BLOCK, i, 3, &root)
                .internode_address
                .ip()
                .to_string()
        })
        .collect();
    let files = Files {
        dir: root.join("live"),
        old_ca: root.join("ca-old"),
        new_ca: root.join("ca-new"),
        ips: ips.clone(),
    };
    std::fs::create_dir_all(&files.dir).unwrap();
    create_certs(&files.old_ca, &ips);
    create_certs(&files.new_ca, &ips);
    files.write_secrets(&[OLD]);
    files.trust(&[&files.old_ca]);
    files.serve_certificates_of(&files.old_ca);
    let configs = (0..3)
        .map(|i| {
            let mut config = TestCluster::config(BLOCK, i, 3, &root);
            config.cluster_secret_file = Some(files.secret());
            config.server_encryption = ServerEncryption {
                internode_encryption: InternodeEncryption::All,
                certificate: Some(files.certificate(i)),
                private_key: Some(files.key(i)),
                ca: Some(files.ca()),
                require_client_auth: true,
            };
            config
        })
        .collect();
    let cluster = TestCluster::start_with(configs, dirs).await;
    cluster.create_keyspace(0, "ks", 3).await;

    let coordinators = Coordinators::default();
    for i in 0..3 {
        coordinators.add(&format!("node{i}"), cluster.client(i).await);
    }
    let load = Load::start(
        LoadSettings {
            keyspace: "ks".into(),
            clients: 4,
            keys_per_client: 25,
            max_ops: 1_000_000,
            deadline: Instant::now() + Duration::from_secs(120),
        },
        coordinators,
    );
    more_writes(&load, 100, "the load runs").await;
    let began = Instant::now();

    // 1. Every node accepts the new secret and trusts the new CA.
    files.write_secrets(&[OLD, NEW]);
    files.trust(&[&files.old_ca, &files.new_ca]);
    reload_everywhere(&cluster).await;
    more_writes(&load, 100, "writes after step 1").await;
    // 2. Every node seals with the new secret and serves the new certificate.
    files.write_secrets(&[NEW, OLD]);
    files.serve_certificates_of(&files.new_ca);
    reload_everywhere(&cluster).await;
    more_writes(&load, 100, "writes after step 2").await;
    // 3. The old secret and the old CA are dropped.
    files.write_secrets(&[NEW]);
    files.trust(&[&files.new_ca]);
    reload_everywhere(&cluster).await;
    more_writes(&load, 100, "writes after step 3").await;
    let ended = Instant::now();
    let report = load.stop().await;

    assert!(
        report.failures.is_empty(),
        "{}: {:?}",
        report.summary(),
        &report.failures[..report.failures.len().min(5)]
    );
    assert!(report.stale_reads.is_empty(), "{:?}", report.stale_reads);
    let (writes, reads) = report.completed_between(began, ended);
    assert!(
        writes >= 300 && reads >= 100,
        "the load overlapped the rotation: {writes} writes and {reads} reads during it"
    );
    // Every acknowledged write reads back at QUORUM (every key).
    let mut client = cluster.client(1).await;
    for (key, acked) in &report.acked {
        let read = client
            .get(common::get("ks", key, pb::ConsistencyLevel::Quorum))
            .await
            .expect("a QUORUM read after the rotation")
            .into_inner();
        check_read(key, Some(*acked), read.found, &read.value).unwrap();
        assert!(version_of(key, &read.value).is_some());
    }

    // The rotation took: the old CA's certificates and the old secret are
    // refused, the new ones accepted.
    assert!(
        internode_tls_accepts(&cluster, 0, &files.new_ca, &ips[1]).await,
        "a certificate of the new CA"
    );
    assert!(
        !internode_tls_accepts(&cluster, 0, &files.old_ca, &ips[1]).await,
        "a certificate of the old CA is refused"
    );
    let membership = cluster.context(0).membership().clone();
    let refused = || {
        let membership = membership.clone();
        async move { membership.stats().await.unwrap().dropped_bad_auth }
    };
    let before = refused().await;
    let mut old = Envelope::new(
        &cluster.node_config(0).cluster_name,
        ClusterSecret::new(OLD).as_ref(),
        ringstore_placement::HostId::from_u128(7),
        Generation(1),
    );
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket
        .send_to(&old.seal(b"\x00"), cluster.node_config(0).gossip_address)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the old secret's packet refused",
        || async { refused().await > before },
    )
    .await;
    cluster.shutdown().await;
}

/// A client port's certificate is swapped by a reload: a client that trusts
/// only the new CA is refused before and served after, one that trusts only
/// the old CA the other way round; connections in between need no restart.
/// Address block 214.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_port_serves_its_new_certificate_after_a_reload() {
    let dirs = tempfile::tempdir().unwrap();
    let root = dirs.path().to_path_buf();
    let mut config = TestCluster::config(214, 0, 1, &root);
    let ip = config.listen_address.ip().to_string();
    let (old_ca, new_ca, live) = (root.join("ca-old"), root.join("ca-new"), root.join("live"));
    create_certs(&old_ca, std::slice::from_ref(&ip));
    create_certs(&new_ca, std::slice::from_ref(&ip));
    std::fs::create_dir_all(&live).unwrap();
    let serve = |ca: &Path| {
        std::fs::copy(ca.join(format!("node-{ip}.crt")), live.join("node.crt")).unwrap();
        std::fs::copy(ca.join(format!("node-{ip}.key")), live.join("node.key")).unwrap();
    };
    serve(&old_ca);
    config.client_encryption = ringstore_node::tls::ClientEncryption {
        enabled: true,
        certificate: Some(live.join("node.crt")),
        private_key: Some(live.join("node.key")),
        ca: None,
        require_client_auth: false,
    };
    let address = config.listen_address;
    // Its client port serves TLS only, which the test cluster's helpers do
    // not speak: the node alone, started directly.
    let node = ringstore_node::start(config)
        .await
        .expect("the node starts");
    let admin = |ca: PathBuf| async move {
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(
            std::fs::read(ca.join("ca.crt")).unwrap(),
        ));
        let channel = Channel::from_shared(format!("https://{address}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await
            .ok()?;
        Some(ringstore_proto::v1::admin_client::AdminClient::new(channel))
    };
    let served = |ca: PathBuf| async move {
        match admin(ca).await {
            None => false,
            Some(mut admin) => admin.status(pb::StatusRequest::default()).await.is_ok(),
        }
    };
    eventually(Duration::from_secs(30), "the node serves TLS", || {
        served(old_ca.clone())
    })
    .await;
    assert!(!served(new_ca.clone()).await, "the new CA's client before");

    serve(&new_ca);
    let reloaded = admin(old_ca.clone())
        .await
        .expect("the old certificate is still served")
        .reload_secrets(pb::ReloadSecretsRequest {})
        .await
        .expect("reloadsecrets")
        .into_inner();
    assert_eq!(reloaded.tls_reloaded, ["client"], "{reloaded:?}");
    assert!(!reloaded.secrets_reloaded, "no secret file");

    assert!(served(new_ca).await, "the new CA's client after the reload");
    assert!(
        !served(old_ca).await,
        "the old CA's client after the reload"
    );
    node.shutdown().await.expect("the node stops");
    drop(dirs);
}
