//! `ringstore info`, `version`, `flush` and the log levels: the node itself,
//! as nodetool's.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::{InfoArgs, SetLoggingLevelArgs};
use crate::client::Connection;
use crate::display::human_bytes;
use crate::failure::Outcome;

/// The handoff counters on one line.
pub fn hint_summary(c: pb::HintCounters) -> String {
    format!(
        "stored {}, replayed {}, dropped: over cap {}, expired {}, outside window {}, \
         keyspace dropped {}, refused by replica {}, corrupt {}, truncated {}",
        c.stored,
        c.replayed,
        c.dropped_over_cap,
        c.dropped_expired,
        c.dropped_outside_window,
        c.dropped_keyspace,
        c.dropped_refused,
        c.dropped_corrupt,
        c.truncated
    )
}

/// The node's clock against the live members', as `info` prints it.
pub fn clock_lines(c: &pb::ClockStanding) -> Vec<(&'static str, String)> {
    let mut lines = vec![(
        "Clock offset",
        format!(
            "{:+.1} ms from the median of the live members' clocks ({} peers measured; \
             max_clock_offset {} ms)",
            c.offset_micros as f64 / 1000.0,
            c.peers_measured,
            c.max_offset_ms
        ),
    )];
    let status = if c.skewed {
        format!(
            "SKEWED: {} of {} peers beyond the bound; refusing to coordinate writes \
             ({} refused so far)",
            c.peers_beyond, c.peers_measured, c.refused_writes
        )
    } else {
        format!("ok ({} refused writes since start)", c.refused_writes)
    };
    lines.push(("Clock status", status));
    if c.test_offset_ms != 0 {
        lines.push((
            "Clock test offset",
            format!(
                "{:+} ms (test_clock_offset_ms: for tests only)",
                c.test_offset_ms
            ),
        ));
    }
    lines
}

/// Prints the node's software version, as `nodetool version`.
pub async fn version(connection: &Connection, out: &mut impl Write) -> Outcome {
    let info = connection
        .admin()
        .info(pb::InfoRequest {})
        .await?
        .into_inner();
    writeln!(out, "ReleaseVersion: {}", info.software_version).map_err(anyhow::Error::from)?;
    Ok(())
}

/// Asks the node to sync everything it has written, as `nodetool flush`.
pub async fn flush(connection: &Connection) -> Outcome {
    connection.admin().flush(pb::FlushRequest {}).await?;
    Ok(())
}

/// Drains the node, as `nodetool drain`: it refuses writes, syncs its
/// storage and stops gossip; prints what to do next.
pub async fn drain(connection: &Connection, out: &mut impl Write) -> Outcome {
    connection.admin().drain(pb::DrainRequest {}).await?;
    writeln!(
        out,
        "drained: the node refuses writes, its storage is synced and its gossip has stopped; \
         stop it now (a restart serves writes again)"
    )
    .map_err(anyhow::Error::from)?;
    Ok(())
}

/// Re-reads the node's secret file and TLS files.
pub async fn reload_secrets(connection: &Connection, out: &mut impl Write) -> Outcome {
    let reloaded = connection
        .admin()
        .reload_secrets(pb::ReloadSecretsRequest {})
        .await?
        .into_inner();
    let secrets = match (reloaded.secrets_reloaded, reloaded.secrets) {
        (true, n) => format!(
            "{n} cluster secret(s) from the secret file (the first seals gossip, each is accepted)"
        ),
        (false, 0) => "no cluster secret".to_string(),
        (false, _) => {
            "the cluster secret is inline (not in cluster_secret_file): unchanged".to_string()
        }
    };
    let tls = if reloaded.tls_reloaded.is_empty() {
        "no TLS port".to_string()
    } else {
        format!(
            "the TLS files of the {} port",
            reloaded.tls_reloaded.join(" and ")
        )
    };
    writeln!(out, "reloaded: {secrets}; {tls}").map_err(anyhow::Error::from)?;
    Ok(())
}

/// Sets a log level: `TARGET LEVEL`, or `LEVEL` alone for every module.
pub async fn set_logging_level(
    connection: &Connection,
    args: &SetLoggingLevelArgs,
    out: &mut impl Write,
) -> Outcome {
    let (target, level) = match &args.level {
        Some(level) => (args.target.clone(), level.clone()),
        None => (String::new(), args.target.clone()),
    };
    let levels = connection
        .admin()
        .set_logging_level(pb::SetLoggingLevelRequest { target, level })
        .await?
        .into_inner();
    writeln!(out, "{}", levels.filter).map_err(anyhow::Error::from)?;
    Ok(())
}

/// Prints the log filter in force.
pub async fn logging_levels(connection: &Connection, out: &mut impl Write) -> Outcome {
    let levels = connection
        .admin()
        .get_logging_levels(pb::GetLoggingLevelsRequest {})
        .await?
        .into_inner();
    writeln!(out, "{}", levels.filter).map_err(anyhow::Error::from)?;
    Ok(())
}

/// `ok`, or the storage's failure.
fn storage_status(failure: &str) -> String {
    if failure.is_empty() {
        "ok".into()
    } else {
        format!("FAILED: {failure} (see storage.disk_failure_policy; restart once mended)")
    }
}

/// Prints `name : value` lines.
pub async fn run(connection: &Connection, args: &InfoArgs, out: &mut impl Write) -> Outcome {
    let info = connection
        .admin()
        .info(pb::InfoRequest {})
        .await?
        .into_inner();
    let mut lines = vec![
        ("ID", info.host_id.clone()),
        ("Cluster Name", info.cluster_name.clone()),
        ("Gossip active", info.gossip_active.to_string()),
        ("Native Transport active", "true".to_string()),
        ("Load", human_bytes(info.load_bytes)),
        ("Disk", human_bytes(info.disk_bytes)),
        ("Generation No", info.generation.to_string()),
        ("Uptime (seconds)", info.uptime_seconds.to_string()),
        ("Data Center", info.datacenter.clone()),
        ("Rack", info.rack.clone()),
        ("State", info.state.clone()),
        ("Schema Version", info.schema_version.clone()),
        ("Durability", info.durability.clone()),
        ("Storage", storage_status(&info.storage_failure)),
        (
            "Hints pending",
            format!(
                "{} ({})",
                info.pending_hints,
                human_bytes(info.pending_hint_bytes)
            ),
        ),
        (
            "Hints",
            hint_summary(info.hint_counters.unwrap_or_default()),
        ),
        ("Version", info.software_version.clone()),
    ];
    if let Some(clock) = &info.clock {
        lines.extend(clock_lines(clock));
    }
    if args.tokens {
        for token in &info.tokens {
            lines.push(("Token", token.to_string()));
        }
    } else {
        lines.push((
            "Token",
            format!(
                "(invoke with -T/--tokens to see all {} tokens)",
                info.tokens.len()
            ),
        ));
    }
    let text: String = lines
        .iter()
        .map(|(name, value)| format!("{name:<23}: {value}\n"))
        .collect();
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// `ringstore metrics`: prints the node's metrics page.
pub async fn metrics(connection: &Connection, out: &mut impl Write) -> Outcome {
    let page = connection
        .admin()
        .metrics(pb::MetricsRequest {})
        .await?
        .into_inner();
    out.write_all(page.text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}
