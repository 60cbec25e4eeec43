//! Client authentication and permissions (issue 14) on real processes: the
//! default superuser of a fresh cluster, wrong passwords refused, a user
//! with `read` on one keyspace that cannot write it, read another or
//! decommission, grants and revokes taking effect within the cache
//! validity, and no password in any log line or CLI output; and a node
//! with `allow_all` working as before, with users prepared under it that
//! log in once the node is restarted with the password authenticator; and
//! a pipeline stream, whose every request is checked on its own and which
//! follows grants, revokes and a dropped user while it stays open.
//!
//! Also: the metrics port of a secured node over TLS, for holders of its
//! bearer token only; and the warning about a config file others can read.
//!
//! Address blocks 150 to 153.

mod common;

use std::process::Output;
use std::time::Duration;

use common::processes::{Processes, eventually, http_get, sample, text};
use common::tls::{create_certs, https_get, plaintext_exchange, tls_env};

const ROOT_PASSWORD: &str = "root-pw-never-logged-150";
const READER_PASSWORD: &str = "reader-pw-never-logged-150";
const WRONG_PASSWORD: &str = "wrong-pw-never-logged-150";

/// The cache validity the nodes run with (ms): grants take effect within it.
const VALIDITY_MS: &str = "500";

fn password_auth(rf: &str) -> Vec<(&'static str, String)> {
    vec![
        ("RINGSTORE_AUTH__AUTHENTICATOR", "password".to_string()),
        ("RINGSTORE_AUTH__REPLICATION_FACTOR", rf.to_string()),
        ("RINGSTORE_AUTH__VALIDITY_MS", VALIDITY_MS.to_string()),
    ]
}

fn as_user<'a>(user: &'a str, password: &'a str) -> [(&'a str, &'a str); 2] {
    [("RINGSTORE_USER", user), ("RINGSTORE_PASSWORD", password)]
}

fn failed_with(output: &Output, code: &str, words: &str) -> bool {
    let stderr = text(&output.stderr);
    output.status.code() == Some(2) && stderr.starts_with(code) && stderr.contains(words)
}

#[test]
fn passwords_and_permissions_guard_every_client_request() {
    let mut servers = Processes::new(150);
    let settings = password_auth("3");
    for i in 0..3 {
        let mut env: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.push(("RUST_LOG", if i == 0 { "debug" } else { "info" }));
        // All three start at once: each writes the same default superuser.
        servers.start(i, &env);
    }
    let mut outputs: Vec<Output> = Vec::new();
    let default = as_user("cassandra", "cassandra");
    servers.set_cli_env(&default);
    // Until system_auth has its default superuser (a quorum of its three
    // replicas, so all three nodes, must be up), logins are UNAVAILABLE or
    // refused; then the default superuser logs in.
    eventually(
        Duration::from_secs(30),
        "the default superuser logs in",
        || {
            let output = servers.cli(1, &["user", "list"]);
            output.status.success() || failed_with(&output, "PERMISSION_DENIED", "")
        },
    );

    // The default password may change that password and nothing else: not
    // create a superuser, not see the cluster, not touch data.
    let evil = servers.cli_env(
        0,
        &[("RINGSTORE_NEW_PASSWORD", "evil-pw-150")],
        &["user", "create", "evil", "--superuser"],
    );
    assert!(
        failed_with(
            &evil,
            "PERMISSION_DENIED",
            "default superuser's password must be changed"
        ),
        "the default superuser created a superuser: {}{}",
        text(&evil.stdout),
        text(&evil.stderr)
    );
    for args in [
        &["user", "list"][..],
        &["status"],
        &[
            "keyspace",
            "create",
            "a",
            "--replication",
            "SimpleStrategy:3",
        ],
    ] {
        let refused = servers.cli(0, args);
        assert!(
            failed_with(
                &refused,
                "PERMISSION_DENIED",
                "default superuser's password must be changed"
            ),
            "{args:?}: {}{}",
            text(&refused.stdout),
            text(&refused.stderr)
        );
        outputs.push(refused);
    }
    outputs.push(evil);

    // Missing, wrong and unknown credentials are UNAUTHENTICATED, alike.
    let none = servers.cli_env(
        0,
        &[("RINGSTORE_USER", ""), ("RINGSTORE_PASSWORD", "")],
        &["status"],
    );
    outputs.push(none);
    let anonymous = std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
        .args(["--host", &servers.address(0, 7100), "status"])
        .env_remove("RINGSTORE_USER")
        .env_remove("RINGSTORE_PASSWORD")
        .output()
        .unwrap();
    assert!(
        failed_with(
            &anonymous,
            "UNAUTHENTICATED",
            "requires a user name and password"
        ),
        "{}",
        text(&anonymous.stderr)
    );
    let wrong = servers.cli_env(0, &as_user("cassandra", WRONG_PASSWORD), &["status"]);
    let unknown = servers.cli_env(0, &as_user("nobody", WRONG_PASSWORD), &["status"]);
    for output in [&wrong, &unknown] {
        assert!(
            failed_with(output, "UNAUTHENTICATED", "unknown user or wrong password"),
            "{}",
            text(&output.stderr)
        );
    }
    assert_eq!(
        text(&wrong.stderr),
        text(&unknown.stderr),
        "one message for both"
    );
    outputs.extend([anonymous, wrong, unknown]);

    // The operator changes the default password; the old one stops working.
    let changed = servers.cli_stdin(
        0,
        &format!("{ROOT_PASSWORD}\n"),
        &["user", "password", "cassandra"],
    );
    assert!(changed.status.success(), "{}", text(&changed.stderr));
    outputs.push(changed);
    let root = as_user("cassandra", ROOT_PASSWORD);
    servers.set_cli_env(&root);
    servers.wait_until_all_un(0, 3);
    let listed = servers.cli(2, &["user", "list"]);
    assert_eq!(
        text(&listed.stdout)
            .lines()
            .filter(|l| l.starts_with("cassandra "))
            .count(),
        1,
        "one default superuser and no other user: {}",
        text(&listed.stdout)
    );
    assert_eq!(
        text(&listed.stdout).lines().count(),
        2,
        "{}",
        text(&listed.stdout)
    );
    let old = servers.cli_env(0, &default, &["status"]);
    assert!(
        failed_with(&old, "UNAUTHENTICATED", "wrong password"),
        "{}",
        text(&old.stderr)
    );
    // Other nodes take the new password within the cache validity.
    eventually(
        Duration::from_secs(10),
        "node 1 takes the new password",
        || servers.cli(1, &["status"]).status.success(),
    );
    for args in [
        &[
            "keyspace",
            "create",
            "a",
            "--replication",
            "SimpleStrategy:3",
        ][..],
        &[
            "keyspace",
            "create",
            "b",
            "--replication",
            "SimpleStrategy:3",
        ],
        &["put", "a", "k", "in-a", "--consistency", "QUORUM"],
        &["put", "b", "k", "in-b", "--consistency", "QUORUM"],
    ] {
        let output = servers.cli(1, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        outputs.push(output);
    }
    let created = servers.cli_env(
        0,
        &[("RINGSTORE_NEW_PASSWORD", READER_PASSWORD)],
        &["user", "create", "reader"],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    let granted = servers.cli(0, &["grant", "read", "on", "a", "to", "reader"]);
    assert_eq!(
        text(&granted.stdout),
        "granted read on keyspace a to reader\n",
        "{}\n{}",
        text(&granted.stderr),
        servers
            .log(0)
            .lines()
            .filter(|l| l.contains("login") || l.contains("user"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    outputs.extend([created, granted]);

    // The reader reads `a` through every node, and nothing else.
    let reader = as_user("reader", READER_PASSWORD);
    for node in 0..3 {
        eventually(
            Duration::from_secs(10),
            "the reader logs in everywhere",
            || {
                let get =
                    servers.cli_env(node, &reader, &["get", "a", "k", "--consistency", "QUORUM"]);
                text(&get.stdout) == "in-a\n"
            },
        );
    }
    let cases: [(&[&str], &str); 4] = [
        (
            &["put", "a", "k", "x"],
            "user reader has no write permission on keyspace a",
        ),
        (
            &["get", "b", "k"],
            "user reader has no read permission on keyspace b",
        ),
        (
            &["decommission"],
            "user reader has no admin permission on all keyspaces",
        ),
        (
            &["user", "create", "other", "--new-password", "p"],
            "no admin permission on all keyspaces",
        ),
    ];
    for (args, message) in cases {
        let output = servers.cli_env(2, &reader, args);
        assert!(
            failed_with(&output, "PERMISSION_DENIED", message),
            "{args:?}: {}",
            text(&output.stderr)
        );
        outputs.push(output);
    }
    assert!(
        servers.cli_env(2, &reader, &["status"]).status.success(),
        "views need a login only"
    );
    assert_eq!(
        servers.status_rows(2).len(),
        3,
        "the decommission was refused"
    );

    // A grant, then a revoke, take effect on another node within the validity.
    let granted = servers.cli(0, &["grant", "write", "on", "a", "to", "reader"]);
    assert!(granted.status.success(), "{}", text(&granted.stderr));
    eventually(Duration::from_secs(10), "the grant takes effect", || {
        servers
            .cli_env(1, &reader, &["put", "a", "k", "by-reader"])
            .status
            .success()
    });
    let revoked = servers.cli(0, &["revoke", "write", "on", "a", "from", "reader"]);
    assert_eq!(
        text(&revoked.stdout),
        "revoked write on keyspace a from reader\n",
        "{}",
        text(&revoked.stderr)
    );
    eventually(Duration::from_secs(10), "the revoke takes effect", || {
        let put = servers.cli_env(1, &reader, &["put", "a", "k", "again"]);
        failed_with(
            &put,
            "PERMISSION_DENIED",
            "no write permission on keyspace a",
        )
    });
    let listed = servers.cli(2, &["user", "list"]);
    assert!(
        text(&listed.stdout).contains("reader                   no         read on a\n"),
        "{}",
        text(&listed.stdout)
    );
    outputs.extend([granted, revoked, listed]);

    // Failed logins are counted and logged, naming the user only.
    let page = http_get(&servers.address(0, 7200), "/metrics").1;
    let failed = sample(
        &page,
        "ringstore_client_auth_refusals_total{reason=\"bad_credentials\"}",
    );
    assert!(failed.is_some_and(|n| n >= 2.0), "{failed:?}");
    let denied = sample(
        &page,
        "ringstore_client_auth_refusals_total{reason=\"permission_denied\"}",
    );
    assert!(denied.is_some_and(|n| n >= 1.0), "{denied:?}");
    eventually(Duration::from_secs(5), "the failed login is logged", || {
        servers.log(0).contains("client login failed")
    });

    // No password in any node's log (node 0 at debug) or CLI output.
    let mut texts: Vec<(String, String)> = (0..3)
        .map(|i| (format!("node {i}'s log"), servers.log(i)))
        .collect();
    assert!(texts[0].1.contains("DEBUG"), "node 0 logs at debug");
    for (n, output) in outputs.iter().enumerate() {
        texts.push((
            format!("CLI run {n}"),
            text(&output.stdout) + &text(&output.stderr),
        ));
    }
    for (what, text) in &texts {
        for password in [ROOT_PASSWORD, READER_PASSWORD, WRONG_PASSWORD] {
            assert!(!text.contains(password), "{what} contains a password");
        }
    }
}

#[test]
fn allow_all_serves_everyone_and_users_made_under_it_log_in_after_the_switch() {
    let mut servers = Processes::new(151);
    servers.start(0, &[("RINGSTORE_AUTH__REPLICATION_FACTOR", "1")]);
    servers.wait_until_all_un(0, 1);
    // allow_all: no credentials needed, and credentials sent are ignored.
    servers.create_keyspace("ks", "SimpleStrategy:1");
    assert!(servers.cli(0, &["put", "ks", "k", "v"]).status.success());
    let get = servers.cli_env(0, &as_user("anyone", "anything"), &["get", "ks", "k"]);
    assert_eq!(text(&get.stdout), "v\n", "{}", text(&get.stderr));
    assert!(
        !servers.log(0).contains("created the default superuser"),
        "allow_all makes no users"
    );
    // Prepare an operator before switching the authenticator on.
    let created = servers.cli_env(
        0,
        &[("RINGSTORE_NEW_PASSWORD", ROOT_PASSWORD)],
        &["user", "create", "ops", "--superuser"],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));

    servers.signal(0, "TERM");
    let exit = servers.take(0).wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    let settings = password_auth("1");
    let env: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    servers.start(0, &env);
    let ops = as_user("ops", ROOT_PASSWORD);
    eventually(Duration::from_secs(30), "the prepared user logs in", || {
        text(&servers.cli_env(0, &ops, &["get", "ks", "k"]).stdout) == "v\n"
    });
    let anonymous = servers.cli(0, &["get", "ks", "k"]);
    assert!(
        failed_with(&anonymous, "UNAUTHENTICATED", "requires a user name"),
        "{}",
        text(&anonymous.stderr)
    );
    // Users existed: no default superuser was made.
    let default = servers.cli_env(0, &as_user("cassandra", "cassandra"), &["status"]);
    assert!(
        failed_with(&default, "UNAUTHENTICATED", "unknown user"),
        "{}",
        text(&default.stderr)
    );
    assert!(!servers.log(0).contains(ROOT_PASSWORD));
}

/// A pipeline opened by `user` to node 0 of `servers`.
fn pipeline_as(
    runtime: &tokio::runtime::Runtime,
    servers: &Processes,
    user: &str,
    password: &str,
) -> Result<ringstore_client::Pipeline, ringstore_client::ClientError> {
    use ringstore_client::{Client, ClientConfig, Credentials, Routing};
    let mut config = ClientConfig::new([servers.address(0, 7100)]);
    config.routing = Routing::SeedsOnly;
    config.credentials = Credentials::new(Some(user), Some(password))?;
    runtime.block_on(async { Client::connect(config).await?.pipeline().await })
}

/// A pipelined get or put of `key` in keyspace `keyspace`, as its code.
fn pipelined(
    runtime: &tokio::runtime::Runtime,
    pipeline: &ringstore_client::Pipeline,
    write: bool,
    keyspace: &str,
) -> tonic::Code {
    use ringstore_client::pb;
    let key = b"k".to_vec();
    runtime.block_on(async {
        let result = if write {
            let put = pb::PutRequest {
                keyspace: keyspace.into(),
                key,
                value: b"piped".to_vec(),
                ..Default::default()
            };
            pipeline.put(put).await.map(drop)
        } else {
            let get = pb::GetRequest {
                keyspace: keyspace.into(),
                key,
                consistency: 0,
            };
            pipeline.get(get).await.map(drop)
        };
        result.map_or_else(|error| error.code(), |()| tonic::Code::Ok)
    })
}

#[test]
fn a_pipeline_checks_each_request_and_follows_grants_while_it_is_open() {
    let mut servers = Processes::new(152);
    servers.start(0, &[("RINGSTORE_AUTH__REPLICATION_FACTOR", "1")]);
    servers.wait_until_all_un(0, 1);
    // Users and data prepared under allow_all, then the node restarted with
    // the password authenticator.
    servers.create_keyspace("a", "SimpleStrategy:1");
    servers.create_keyspace("b", "SimpleStrategy:1");
    for keyspace in ["a", "b"] {
        assert!(
            servers
                .cli(0, &["put", keyspace, "k", "v"])
                .status
                .success()
        );
    }
    for (user, extra) in [("ops", &["--superuser"][..]), ("reader", &[])] {
        let mut args = vec!["user", "create", user];
        args.extend_from_slice(extra);
        let password = if user == "ops" {
            ROOT_PASSWORD
        } else {
            READER_PASSWORD
        };
        let created = servers.cli_env(0, &[("RINGSTORE_NEW_PASSWORD", password)], &args);
        assert!(created.status.success(), "{}", text(&created.stderr));
    }
    let granted = servers.cli(0, &["grant", "read", "on", "a", "to", "reader"]);
    assert!(granted.status.success(), "{}", text(&granted.stderr));
    servers.signal(0, "TERM");
    assert!(servers.take(0).wait().unwrap().success());
    let settings = password_auth("1");
    let env: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    servers.start(0, &env);
    servers.set_cli_env(&as_user("ops", ROOT_PASSWORD));
    eventually(Duration::from_secs(30), "ops logs in", || {
        text(&servers.cli(0, &["get", "a", "k"]).stdout) == "v\n"
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // No stream without a login.
    let refused = pipeline_as(&runtime, &servers, "reader", WRONG_PASSWORD).unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused}");

    // Each request needs what its unary RPC needs, on its own keyspace.
    let reader = pipeline_as(&runtime, &servers, "reader", READER_PASSWORD).unwrap();
    assert_eq!(pipelined(&runtime, &reader, false, "a"), tonic::Code::Ok);
    assert_eq!(
        pipelined(&runtime, &reader, true, "a"),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        pipelined(&runtime, &reader, false, "b"),
        tonic::Code::PermissionDenied
    );
    assert_eq!(
        pipelined(&runtime, &reader, false, "a"),
        tonic::Code::Ok,
        "a refusal does not end the stream"
    );

    // A grant and a revoke reach the open stream within the validity.
    let granted = servers.cli(0, &["grant", "write", "on", "a", "to", "reader"]);
    assert!(granted.status.success(), "{}", text(&granted.stderr));
    eventually(Duration::from_secs(10), "the stream may write", || {
        pipelined(&runtime, &reader, true, "a") == tonic::Code::Ok
    });
    let revoked = servers.cli(0, &["revoke", "read", "on", "a", "from", "reader"]);
    assert!(revoked.status.success(), "{}", text(&revoked.stderr));
    eventually(
        Duration::from_secs(10),
        "the stream may no longer read",
        || pipelined(&runtime, &reader, false, "a") == tonic::Code::PermissionDenied,
    );
    let dropped = servers.cli(0, &["user", "drop", "reader"]);
    assert!(dropped.status.success(), "{}", text(&dropped.stderr));
    eventually(
        Duration::from_secs(10),
        "the dropped user's stream is refused",
        || pipelined(&runtime, &reader, true, "a") == tonic::Code::Unauthenticated,
    );
    assert_eq!(text(&servers.cli(0, &["get", "a", "k"]).stdout), "piped\n");
}

#[test]
fn a_secured_nodes_metrics_are_served_over_tls_to_holders_of_the_bearer_token() {
    let mut servers = Processes::new(153);
    let ip = servers.address(0, 0).trim_end_matches(":0").to_string();
    let certs = servers.dir().join("certs");
    create_certs(&certs, std::slice::from_ref(&ip));
    let token_file = servers.dir().join("metrics-token");
    write_private(&token_file, &format!("{METRICS_TOKEN}\n"));
    let mut env = tls_env(&certs, &ip, "secret-never-logged-153-0123456789abcdef");
    env.extend(
        password_auth("1")
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    );
    env.push(("RINGSTORE_METRICS_SECURITY__TLS".into(), "true".into()));
    env.push((
        "RINGSTORE_METRICS_SECURITY__BEARER_TOKEN_FILE".into(),
        token_file.to_str().unwrap().into(),
    ));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    servers.start(0, &env);
    let metrics = servers.address(0, 7200);
    let ca = certs.join("ca.crt");
    eventually(Duration::from_secs(30), "/metrics answers over TLS", || {
        https_get(&metrics, "/metrics", &ca, Some(METRICS_TOKEN))
            .is_ok_and(|(status, page)| status == 200 && page.contains("ringstore_"))
    });
    for token in [None, Some("wrong-token")] {
        let (status, page) = https_get(&metrics, "/metrics", &ca, token).unwrap();
        assert_eq!(status, 401, "{token:?}: {page}");
        assert!(!page.contains("ringstore_"), "{page}");
    }
    // Plaintext HTTP gets no page from the TLS port.
    let plain = plaintext_exchange(&metrics);
    assert!(!plain.contains("ringstore_"), "{plain}");
    assert!(
        !servers.log(0).contains(METRICS_TOKEN),
        "the token is logged"
    );
}

#[test]
fn a_server_warns_when_its_config_file_is_readable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ringstore.toml");
    // An empty cluster name: the server stops right after reading its settings.
    std::fs::write(&file, "cluster_name = \"\"\n").unwrap();
    let server = |mode: u32| {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .args(["server", "--config", file.to_str().unwrap()])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(!output.status.success());
        text(&output.stderr)
    };
    let open = server(0o644);
    assert!(
        open.contains("is readable by group or others (mode 644)") && open.contains("chmod 600"),
        "{open}"
    );
    let private = server(0o600);
    assert!(!private.contains("readable by"), "{private}");
    assert!(
        private.contains("cluster_name must not be empty"),
        "{private}"
    );
}

const METRICS_TOKEN: &str = "metrics-token-never-logged-153";

fn write_private(path: &std::path::Path, contents: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(contents.as_bytes()).unwrap();
}
