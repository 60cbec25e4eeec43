//! `ringstore scan`, `export`, `import` and `batch` as a user runs them: the
//! real binary against in-process clusters. An export imported into a fresh
//! cluster reproduces every key, value, timestamp and expiry; importing it
//! again changes nothing; malformed lines and failed mutations are reported
//! by line number. With `--token-aware` (ranges read from replicas, batches
//! sent to a replica) they print what they print through `--host`.
//!
//! Address block 164: the source cluster on 127.164.0.1-3, the destination
//! on 127.164.0.11-13, the batch test's node on .21, the token-aware test's
//! on .31-.33.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};

use common::TestCluster;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

use pb::ConsistencyLevel as Cl;

/// Runs the real binary against `host`, with `stdin` as its input, off the
/// async runtime.
async fn ringstore(host: SocketAddr, args: &[&str], stdin: &[u8]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .arg("--host")
            .arg(host.to_string())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ringstore binary runs");
        child.stdin.take().unwrap().write_all(&stdin).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// Runs the binary as [`ringstore`] does with no input, asserting that it
/// succeeds; its standard output.
async fn succeeds(host: SocketAddr, args: &[&str]) -> String {
    let output = ringstore(host, args, b"").await;
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts two scans' rows are the same, naming the first difference.
fn assert_same_rows(got: &[pb::ScanRow], expected: &[pb::ScanRow]) {
    assert_eq!(got.len(), expected.len(), "row counts differ");
    if let Some((a, b)) = got.iter().zip(expected).find(|(a, b)| a != b) {
        panic!("rows differ: {a:?} instead of {b:?}");
    }
}

/// Every row of `keyspace`, read at ALL through `Scan`.
async fn all_rows(client: &mut ClientClient<Channel>, keyspace: &str) -> Vec<pb::ScanRow> {
    let mut request = pb::ScanRequest {
        keyspace: keyspace.into(),
        consistency: Cl::All as i32,
        ..pb::ScanRequest::default()
    };
    let mut rows = Vec::new();
    loop {
        let page = client.scan(request.clone()).await.unwrap().into_inner();
        rows.extend(page.rows);
        if page.resume_token.is_empty() {
            return rows;
        }
        request.resume_token = page.resume_token;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_export_imported_into_a_fresh_cluster_reproduces_every_key_value_timestamp_and_ttl() {
    let source = TestCluster::start(164, 3, 1).await;
    let dirs = tempfile::tempdir().unwrap();
    let configs = TestCluster::configs_from(164, 10, 3, dirs.path());
    let destination = TestCluster::start_with(configs, dirs).await;
    source.create_keyspace(0, "ks", 3).await;
    destination.create_keyspace(0, "ks", 2).await;

    // 1,500 keys: binary keys and values, client timestamps, TTLs, deletes.
    let mut client = source.client(0).await;
    let n = 1500u32;
    let mutations = (0..n).map(|i| pb::Mutation {
        key: [b"k\x00".as_slice(), &i.to_be_bytes()].concat(),
        value: Some([b"v\n\xff ".as_slice(), &i.to_le_bytes()].concat()),
        timestamp_micros: (i % 3 == 0).then_some(1_000_000 + i64::from(i)),
        ttl_seconds: (i % 5 == 0).then_some(3600 + i),
        expires_at_micros: None,
    });
    common::write_batches(&mut client, "ks", mutations, Cl::All).await;
    for i in (1..n).step_by(7) {
        let key = [b"k\x00".as_slice(), &i.to_be_bytes()].concat();
        client
            .delete(pb::DeleteRequest {
                keyspace: "ks".into(),
                key,
                consistency: Cl::All as i32,
                timestamp_micros: None,
            })
            .await
            .unwrap();
    }
    let exported_rows = all_rows(&mut client, "ks").await;
    assert_eq!(exported_rows.len(), n as usize - (1..n).step_by(7).count());
    assert!(exported_rows.iter().any(|r| r.expires_at_micros.is_some()));

    let export = ringstore(source.address(1), &["export", "ks"], b"").await;
    assert!(export.status.success(), "{}", text(&export.stderr));
    assert_eq!(text(&export.stdout).lines().count(), exported_rows.len());
    let file = destination.dir().join("ks.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let path = file.to_str().unwrap();

    let import = ringstore(
        destination.address(0),
        &["import", "ks", path, "--rate", "20000"],
        b"",
    )
    .await;
    assert!(import.status.success(), "{}", text(&import.stderr));
    assert!(
        text(&import.stdout).contains(&format!("{} rows imported", exported_rows.len())),
        "{}",
        text(&import.stdout)
    );
    let mut imported = destination.client(1).await;
    assert_same_rows(&all_rows(&mut imported, "ks").await, &exported_rows);
    // Every replica holds the very cells: the same timestamp and expiry.
    let context = destination.context(2);
    let id = context.keyspace("ks").unwrap().id;
    let (_, map) = context.placement(&context.keyspace("ks").unwrap());
    let mut held = 0;
    for row in &exported_rows {
        if map
            .replicas(ringstore_placement::Token(row.token))
            .contains(context.host_id)
        {
            let cell = context.store.read(id, &row.key).unwrap().unwrap();
            assert_eq!(cell.timestamp.0, row.timestamp_micros);
            assert_eq!(cell.expires_at.map(|t| t.0), row.expires_at_micros);
            assert_eq!(cell.value.as_deref(), Some(&row.value[..]));
            held += 1;
        }
    }
    assert!(held > exported_rows.len() / 2, "RF 2 of 3 nodes: {held}");

    // Importing again changes nothing (last write wins on equal cells).
    let again = ringstore(destination.address(2), &["import", "ks", path], b"").await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_same_rows(&all_rows(&mut imported, "ks").await, &exported_rows);

    // Malformed lines are reported by number; the good ones still land.
    let good = r#"{"key":"bmV3","value":"dmFs","timestamp_micros":5}"#;
    let input = format!("{good}\nnot json\n\n{{\"key\":\"bmV3\"}}\n");
    let bad = ringstore(
        destination.address(0),
        &["import", "ks", "-"],
        input.as_bytes(),
    )
    .await;
    assert_eq!(bad.status.code(), Some(2));
    let stderr = text(&bad.stderr);
    assert!(stderr.contains("line 2: not a JSON row"), "{stderr}");
    assert!(stderr.contains("line 4:"), "{stderr}");
    assert!(stderr.contains("2 malformed lines"), "{stderr}");
    assert!(text(&bad.stdout).contains("1 rows imported"));
    let unknown = ringstore(destination.address(0), &["import", "nope", path], b"").await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("NOT_FOUND"),
        "{}",
        text(&unknown.stderr)
    );

    source.shutdown().await;
    destination.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_applies_mutations_from_stdin_and_scan_prints_them_in_token_order() {
    // The destination addresses of block 164 are free in this test's
    // lifetime only if it runs alone: use .21-.23 instead.
    let cluster = TestCluster::start_from(164, 20, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let host = cluster.address(0);

    let input = "# a comment\nput a 1\nput b 2 ttl=3600\nput c 3 timestamp=7\nput d 4 ttl=999999999\n\
                 delete a\nfrobnicate x\nput e\n";
    let batch = ringstore(
        host,
        &["batch", "ks", "--batch-size", "2"],
        input.as_bytes(),
    )
    .await;
    assert_eq!(batch.status.code(), Some(2), "{}", text(&batch.stderr));
    let stderr = text(&batch.stderr);
    assert!(stderr.contains("line 5: INVALID_ARGUMENT: ttl"), "{stderr}");
    assert!(stderr.contains("line 7: unknown operation"), "{stderr}");
    assert!(stderr.contains("line 8: put needs a value"), "{stderr}");
    assert!(text(&batch.stdout).contains("4 mutations applied"));

    let scan = ringstore(host, &["scan", "ks"], b"").await;
    assert!(scan.status.success(), "{}", text(&scan.stderr));
    let lines: Vec<String> = text(&scan.stdout).lines().map(String::from).collect();
    let mut expected = vec!["b 2", "c 3"];
    expected.sort_by_key(|l| {
        ringstore_placement::Murmur3Partitioner::token(&l.as_bytes()[..1]).unwrap()
    });
    assert_eq!(lines, expected);
    let hex = ringstore(
        host,
        &["scan", "ks", "--hex", "--limit", "1", "--page-size", "1"],
        b"",
    )
    .await;
    assert_eq!(
        text(&hex.stdout).lines().count(),
        1,
        "{}",
        text(&hex.stdout)
    );
    assert!(text(&hex.stdout).starts_with("62 32") || text(&hex.stdout).starts_with("63 33"));
    let bad = ringstore(host, &["scan", "ks", "--page-size", "0"], b"").await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("INVALID_ARGUMENT: page_size"),
        "{}",
        text(&bad.stderr)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn token_aware_batch_scan_export_and_import_match_what_the_host_coordinates() {
    // Block 164's .31-.33: three nodes, RF 2, so no node holds every key.
    let cluster = TestCluster::start_from(164, 30, 3).await;
    cluster.create_keyspace(0, "ks", 2).await;
    let host = cluster.address(0);
    let input: String = (0..300).map(|i| format!("put k{i} v{i}\n")).collect();
    let batch = ringstore(host, &["batch", "ks", "--token-aware"], input.as_bytes()).await;
    assert!(batch.status.success(), "{}", text(&batch.stderr));
    assert!(text(&batch.stdout).contains("300 mutations applied"));

    // The whole ring in pieces from replicas, as `--host` scans it in one.
    let scanned = succeeds(host, &["scan", "ks", "--consistency", "ALL"]).await;
    assert_eq!(scanned.lines().count(), 300);
    let pieces = succeeds(host, &["scan", "ks", "--token-aware", "--page-size", "7"]).await;
    assert_eq!(pieces, scanned);
    let range = ["--start-token", "-3000000000000000000", "--end-token", "0"];
    let coordinated = succeeds(host, &[&["scan", "ks"][..], &range].concat()).await;
    let routed = succeeds(
        host,
        &[&["scan", "ks", "--token-aware"][..], &range].concat(),
    )
    .await;
    assert_eq!(routed, coordinated);
    let in_range = coordinated.lines().count();
    assert!(
        0 < in_range && in_range < 300,
        "{in_range} rows in the range"
    );

    let export = succeeds(host, &["export", "ks"]).await;
    assert_eq!(
        succeeds(host, &["export", "ks", "--token-aware"]).await,
        export
    );
    let file = cluster.dir().join("ks.jsonl");
    std::fs::write(&file, &export).unwrap();
    let path = file.to_str().unwrap();
    let import = succeeds(host, &["import", "ks", path, "--token-aware"]).await;
    assert!(import.contains("300 rows imported"), "{import}");
    let again = succeeds(host, &["export", "ks"]).await;
    assert_eq!(again, export, "a re-import changes nothing");
    cluster.shutdown().await;
}
