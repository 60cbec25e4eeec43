//! TLS (issue 14) on real server processes: certificates from
//! `ringstore certs create`, a cluster serving TLS only on both ports (with
//! the cluster secret too) that works for TLS clients, including a node
//! joining by streaming, and refuses plaintext; and nodes whose certificates
//! come from different CAs that cannot exchange internode traffic.
//!
//! Address blocks 86 and 87.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::processes::{Processes, eventually, text};
use common::tls::{create_certs, start_tls};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::internode_client::InternodeClient;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");
const SECRET: &str = "tls-test-cluster-secret";

/// An internode client of `address` over TLS trusting `ca`, presenting the
/// certificate `identity` (`node-IP` in `identity_dir`).
fn internode_tls(
    address: &str,
    ca: &Path,
    identity_dir: &Path,
    identity_ip: &str,
) -> InternodeClient<tonic::transport::Channel> {
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(ca.to_path_buf())))
        .identity(Identity::from_pem(
            read(identity_dir.join(format!("node-{identity_ip}.crt"))),
            read(identity_dir.join(format!("node-{identity_ip}.key"))),
        ));
    let channel = Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .tls_config(tls)
        .unwrap()
        .connect_lazy();
    InternodeClient::new(channel)
}

async fn pull_schema(
    client: &mut InternodeClient<tonic::transport::Channel>,
) -> Result<pb::SchemaSnapshot, tonic::Status> {
    client
        .pull_schema(pb::PullSchemaRequest {})
        .await
        .map(|r| r.into_inner())
}

/// `status` is a transport failure (the TLS handshake), not an answer of
/// the internode service (which would be `UNAUTHENTICATED` without a proof).
fn assert_refused_by_tls(status: &tonic::Status) {
    // A status the server sent has no source; a failed connection has one.
    let transport = std::error::Error::source(status)
        .is_some_and(|source| source.is::<tonic::transport::Error>());
    assert!(
        transport && status.code() != tonic::Code::Unauthenticated,
        "{status:?}"
    );
}

#[test]
fn a_tls_only_cluster_serves_tls_clients_and_refuses_plaintext() {
    let mut servers = Processes::new(86);
    let certs = servers.dir().join("certs");
    let ips: Vec<String> = (1..=4).map(|i| format!("127.86.0.{i}")).collect();
    create_certs(&certs, &ips);
    let ca = certs.join("ca.crt");
    servers.set_cli_args(&["--ca-cert", ca.to_str().unwrap()]);
    for i in 0..3 {
        start_tls(&mut servers, i, &certs, SECRET, &[]);
    }
    servers.wait_until_all_un(0, 3);

    // Schema and replica writes travel over internode TLS.
    servers.create_keyspace("ks", "SimpleStrategy:3");
    let put = servers.cli(0, &["put", "ks", "k", "v", "--consistency", "ALL"]);
    assert!(
        put.status.success(),
        "{}\nnode 0 logged: {}",
        text(&put.stderr),
        servers.log(0)
    );
    let get = servers.cli(2, &["get", "ks", "k", "--consistency", "ALL"]);
    assert_eq!(text(&get.stdout).trim(), "v", "{}", text(&get.stderr));

    // A fourth node joins, streaming its ranges over TLS.
    start_tls(&mut servers, 3, &certs, SECRET, &[]);
    servers.wait_until_all_un(0, 4);
    let get = servers.cli(3, &["get", "ks", "k", "--consistency", "ALL"]);
    assert_eq!(text(&get.stdout).trim(), "v", "{}", text(&get.stderr));

    // Plaintext is refused on the client port, with a hint about TLS…
    let plain = Command::new(BIN)
        .args(["--host", &servers.address(0, 7100), "status"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(2));
    let message = text(&plain.stderr);
    assert!(message.contains("--ca-cert"), "{message}");
    // …and on the internode port.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut plain = servers.internode(0);
        let refused = pull_schema(&mut plain).await.unwrap_err();
        assert_ne!(refused.code(), tonic::Code::Ok);
    });
}

#[test]
fn a_node_with_a_certificate_from_another_ca_cannot_exchange_internode_traffic() {
    let mut servers = Processes::new(87);
    let certs = servers.dir().join("certs");
    let rogue_certs = servers.dir().join("rogue-certs");
    create_certs(&certs, &["127.87.0.1".into(), "127.87.0.2".into()]);
    create_certs(&rogue_certs, &["127.87.0.3".into()]);
    servers.set_cli_args(&["--ca-cert", certs.join("ca.crt").to_str().unwrap()]);
    for i in 0..2 {
        start_tls(&mut servers, i, &certs, SECRET, &[]);
    }
    servers.wait_until_all_un(0, 2);
    servers.create_keyspace("ks", "SimpleStrategy:2");
    // The third node holds the cluster secret but a certificate of its own CA.
    start_tls(&mut servers, 2, &rogue_certs, SECRET, &[]);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let ca = certs.join("ca.crt");
        let rogue_ca = rogue_certs.join("ca.crt");
        // A certificate of the cluster's CA gets through TLS to the
        // internode service (which then wants the secret's proof).
        let mut member = internode_tls(&servers.address(1, 7101), &ca, &certs, "127.87.0.1");
        let status = pull_schema(&mut member).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
        // The rogue node's certificate is refused by the cluster's nodes,
        // even by a client that trusts their CA.
        let mut rogue = internode_tls(&servers.address(0, 7101), &ca, &rogue_certs, "127.87.0.3");
        let status = pull_schema(&mut rogue).await.unwrap_err();
        assert_refused_by_tls(&status);
        // And the rogue node refuses the cluster's nodes.
        eventually(Duration::from_secs(20), "the rogue node serves", || {
            std::net::TcpStream::connect(servers.address(2, 7101)).is_ok()
        });
        let mut to_rogue =
            internode_tls(&servers.address(2, 7101), &rogue_ca, &certs, "127.87.0.1");
        let status = pull_schema(&mut to_rogue).await.unwrap_err();
        assert_refused_by_tls(&status);
    });
    // The rogue node cannot even pull the schema, and says why in its log.
    eventually(
        Duration::from_secs(30),
        "the rogue node logs that it cannot pull the schema",
        || {
            let log = servers.log(2);
            log.contains("schema exchange failed") && log.contains("certificate")
        },
    );
}
