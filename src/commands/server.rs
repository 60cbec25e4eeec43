//! `ringstore server`: runs a node until SIGTERM or ctrl-c.

use anyhow::Context;
use ringstore_node::{NodeConfig, NodeError};

use crate::cli::ServerArgs;
use crate::failure::{Failure, Outcome};

/// The flags that were given, as `setting → TOML value` (the highest-precedence source).
fn flag_settings(args: &ServerArgs) -> Vec<(String, toml::Value)> {
    let mut settings = Vec::new();
    let mut text = |key: &str, value: Option<String>| {
        if let Some(value) = value {
            settings.push((key.to_string(), toml::Value::String(value)));
        }
    };
    text("cluster_name", args.cluster_name.clone());
    text(
        "data_dir",
        args.data_dir.as_ref().map(|p| p.display().to_string()),
    );
    text("listen_address", args.listen_address.map(|a| a.to_string()));
    text(
        "internode_address",
        args.internode_address.map(|a| a.to_string()),
    );
    text("gossip_address", args.gossip_address.map(|a| a.to_string()));
    text(
        "metrics_address",
        args.metrics_address.map(|a| a.to_string()),
    );
    text(
        "broadcast_client_address",
        args.broadcast_client_address.map(|a| a.to_string()),
    );
    text(
        "broadcast_internode_address",
        args.broadcast_internode_address.map(|a| a.to_string()),
    );
    text(
        "broadcast_gossip_address",
        args.broadcast_gossip_address.map(|a| a.to_string()),
    );
    text("dc", args.dc.clone());
    text("rack", args.rack.clone());
    text("cluster_secret", args.cluster_secret.clone());
    text(
        "cluster_secret_file",
        args.cluster_secret_file
            .as_ref()
            .map(|p| p.display().to_string()),
    );
    if args.insecure {
        settings.push(("insecure".into(), toml::Value::Boolean(true)));
    }
    if let Some(seeds) = &args.seeds {
        let seeds = seeds
            .iter()
            .map(|s| toml::Value::String(s.to_string()))
            .collect();
        settings.push(("seeds".into(), toml::Value::Array(seeds)));
    }
    if let Some(n) = args.num_tokens {
        settings.push(("num_tokens".into(), toml::Value::Integer(n.into())));
    }
    if let Some(tokens) = &args.initial_token {
        let tokens = tokens.iter().map(|&t| toml::Value::Integer(t)).collect();
        settings.push(("initial_token".into(), toml::Value::Array(tokens)));
    }
    settings
}

/// The open-files limit below which the node warns: each client and
/// internode connection, each sled file and each streamed run not yet
/// folded holds one (Cassandra's packages set 100,000).
const FEW_OPEN_FILES: u64 = 10_000;

/// Raises this process's soft limit on open files to its hard limit, as
/// Go's runtime and many servers do, so a big join's runs or a burst of
/// connections do not fail with "too many open files" at the default
/// soft limit of 1,024; warns when even the hard limit is low.
fn raise_open_files_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let now = match setrlimit(Resource::Nofile, raised) {
        Ok(()) => raised.current,
        Err(error) => {
            tracing::warn!(%error, "could not raise the open-files limit");
            limit.current
        }
    };
    match now {
        Some(n) if n < FEW_OPEN_FILES => tracing::warn!(
            limit = n,
            "the open-files limit is low: raise it (ulimit -n, LimitNOFILE) to {FEW_OPEN_FILES} or more"
        ),
        _ => tracing::debug!(limit = ?now, "open-files limit"),
    }
}

/// Runs the node in the foreground.
pub async fn run(args: &ServerArgs) -> Outcome {
    raise_open_files_limit();
    if args.cluster_secret.is_some() {
        tracing::warn!(
            "--cluster-secret shows the secret to every user of this machine (ps, \
             /proc/PID/cmdline): use --cluster-secret-file or RINGSTORE_CLUSTER_SECRET"
        );
    }
    if let Some(path) = &args.config {
        // It may hold cluster_secret: only the node's user should read it.
        ringstore_node::file_modes::warn_if_readable_by_others(path, "config file");
    }
    let config = NodeConfig::load(
        args.config.as_deref(),
        std::env::vars(),
        flag_settings(args),
    )
    .map_err(anyhow::Error::from)?;
    if let Some(path) = &config.cluster_secret_file {
        ringstore_node::file_modes::warn_if_readable_by_others(path, "cluster_secret_file");
    }
    let node = match ringstore_node::start(config).await {
        Ok(node) => node,
        Err(error @ NodeError::Decommissioned { .. }) => {
            return Err(Failure::Retired(anyhow::Error::from(error)));
        }
        Err(error) => {
            return Err(anyhow::Error::from(error)
                .context("the node could not start")
                .into());
        }
    };
    let asked = tokio::select! {
        () = shutdown_signal() => false,
        () = node.stop_requested() => true,
    };
    // The node asks to stop once it has left the ring (decommission), when
    // it could not take its place in it (a failed join or replacement), or
    // when another node removed or replaced it.
    let view = node.context.view();
    let left = view.member(node.context.host_id).map(|m| m.metadata.state)
        == Some(ringstore_node::membership::NodeState::Left);
    // Asked to stop while members claim to have removed it: the others
    // agreed (see `ringstore_node::removal`).
    let removed = asked && !left && !view.removal_claims.is_empty();
    let storage_failed = node.context.store.failure().borrow().clone();
    tracing::info!("shutting down");
    let shutdown = node.shutdown().await;
    if let Some(failure) = storage_failed {
        // Exit with an error (disk_failure_policy = die, or a stop after the
        // failure): a supervisor restarts the node, and its storage could not
        // be flushed anyway.
        return Err(anyhow::anyhow!(
            "the node's storage failed ({failure}); restart it once the disk is mended"
        )
        .into());
    }
    shutdown.context("shutting down")?;
    if removed {
        return Err(Failure::Retired(anyhow::anyhow!(
            "this node was removed from the cluster by another node"
        )));
    }
    if asked && !left {
        return Err(anyhow::anyhow!("the node could not join the ring (see the log above)").into());
    }
    Ok(())
}

/// Resolves on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
