//! Secrets never leak (issue 14): nodes running with a cluster secret and
//! TLS keys, logging at `debug`, driven through the CLI (including failing
//! commands) and sent refused internode calls, never write the secret or
//! a private key to their logs, and the CLI never prints them.
//!
//! Address block 88.

mod common;

use std::process::Output;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::processes::{Processes, text};
use common::tls::{create_certs, start_tls};
use ringstore_identity::NodeKeys;
use ringstore_internode_auth::{Nonce, PROOF_HEADER, Proof};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

const SECRET: &str = "s3cret-that-must-never-be-logged-88";

#[test]
fn no_log_line_or_cli_output_contains_the_cluster_secret_or_a_private_key() {
    let mut servers = Processes::new(88);
    let certs = servers.dir().join("certs");
    let ips: Vec<String> = (1..=2).map(|i| format!("127.88.0.{i}")).collect();
    create_certs(&certs, &ips);
    let ca = certs.join("ca.crt");
    servers.set_cli_args(&["--ca-cert", ca.to_str().unwrap()]);
    for i in 0..2 {
        start_tls(&mut servers, i, &certs, SECRET, &[("RUST_LOG", "debug")]);
    }
    servers.wait_until_all_un(0, 2);
    servers.create_keyspace("ks", "SimpleStrategy:2");

    let mut outputs: Vec<Output> = Vec::new();
    for args in [
        &["status"][..],
        &["info"],
        &["describecluster"],
        &["gossipinfo"],
        &["metrics"],
        &["getlogginglevels"],
        &["keyspace", "list"],
        &["put", "ks", "k", "v", "--consistency", "ALL"],
        &["get", "ks", "k"],
        &["get", "ks", "missing"],
        &[
            "keyspace",
            "create",
            "ks",
            "--replication",
            "SimpleStrategy:2",
        ],
        &["hints"],
        &["netstats"],
    ] {
        outputs.push(servers.cli(0, args));
    }
    // A plaintext CLI (refused) and bad TLS flags fail with their errors.
    outputs.push(
        std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .args(["--host", &servers.address(1, 7100), "status"])
            .output()
            .unwrap(),
    );
    outputs.push(servers.cli(
        0,
        &[
            "--client-cert",
            "/nonexistent",
            "--client-key",
            "/x",
            "status",
        ],
    ));

    // Refused internode calls: no proof, a stranger's proof, and a replay of
    // it, logged by the node.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let read = |p: std::path::PathBuf| std::fs::read(p).unwrap();
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(ca.clone())))
            .identity(Identity::from_pem(
                read(certs.join("node-127.88.0.1.crt")),
                read(certs.join("node-127.88.0.1.key")),
            ));
        let channel = Endpoint::from_shared(format!("https://{}", servers.address(1, 7101)))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect_lazy();
        let mut internode = ringstore_proto::v1::internode_client::InternodeClient::new(channel);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let method = "/ringstore.v1.Internode/PullSchema";
        let (stranger, other) = (NodeKeys::generate(), NodeKeys::generate());
        let key = stranger
            .pair_key(stranger.host_id(), other.host_id(), &other.public())
            .unwrap();
        let proof = Proof::sign(
            &key,
            method,
            HostId::from_u128(1),
            HostId::from_u128(2),
            now,
            Nonce([7; 16]),
        );
        for proof in [None, Some(&proof), Some(&proof)] {
            let mut request = tonic::Request::new(pb::PullSchemaRequest {});
            if let Some(proof) = proof {
                request.metadata_mut().insert(
                    PROOF_HEADER,
                    MetadataValue::try_from(proof.to_text()).unwrap(),
                );
            }
            let _ = internode.pull_schema(request).await;
        }
    });
    common::processes::eventually(Duration::from_secs(10), "the refusals are logged", || {
        servers.log(1).contains("internode call refused")
    });

    let key_lines: Vec<String> = std::fs::read_dir(&certs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "key"))
        .flat_map(|path| {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut texts: Vec<(String, String)> = (0..2)
        .map(|i| (format!("node {i}'s log"), servers.log(i)))
        .collect();
    for (n, output) in outputs.iter().enumerate() {
        texts.push((
            format!("CLI run {n}"),
            text(&output.stdout) + &text(&output.stderr),
        ));
    }
    assert!(texts[0].1.contains("DEBUG"), "the nodes log at debug");
    assert!(
        !texts[0].1.contains("no cluster_secret"),
        "a node with a secret warns that it has none"
    );
    for (what, text) in &texts {
        assert!(!text.contains(SECRET), "{what} contains the cluster secret");
        for line in &key_lines {
            assert!(
                !text.contains(line.as_str()),
                "{what} contains private key material"
            );
        }
    }
}
