//! `ringstore repair`, `repair status`, `repair --paxos-only` and
//! `garbagecollect`.
//!
//! `repair` asks the node to coordinate a repair and follows its progress
//! (a bar on a terminal), then prints a summary; it fails, naming each range,
//! when any range could not be repaired. If the connection drops, the repair
//! goes on in the node: `repair status` shows it.

use std::io::{IsTerminal, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::anyhow;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ringstore_proto::v1 as pb;

use crate::cli::{CleanupArgs, RepairArgs, RepairCommand};
use crate::client::Connection;
use crate::display::{human_bytes, human_duration};
use crate::failure::{Failure, Outcome};

/// `repair [KEYSPACE] [--start-token T --end-token T] [--dc-local]
/// [--dry-run]`, or `repair status`.
pub async fn run(connection: &Connection, args: &RepairArgs, out: &mut impl Write) -> Outcome {
    if let Some(RepairCommand::Status) = args.command {
        return status(connection, out).await;
    }
    if args.paxos_only {
        return paxos_only(connection, args, out).await;
    }
    let request = pb::RepairRequest {
        keyspace: args.keyspace.clone().unwrap_or_default(),
        start_token: args.start_token,
        end_token: args.end_token,
        dc_local: args.dc_local,
        dry_run: args.dry_run,
    };
    let mut progress = connection.repair().repair(request).await?.into_inner();
    let bar = progress_bar();
    let mut last = None;
    while let Some(message) = progress.message().await? {
        bar.set_length(u64::from(message.ranges_total));
        bar.set_position(u64::from(message.ranges_done + message.ranges_failed));
        bar.set_message(format!(
            "{} keys differ, {} exchanged",
            message.mismatched_keys,
            human_bytes(message.bytes)
        ));
        let finished = message.finished;
        last = Some(message);
        if finished {
            break;
        }
    }
    bar.finish_and_clear();
    let last = last.ok_or_else(|| anyhow!("the node ended the repair without reporting it"))?;
    if !last.finished {
        return Err(Failure::Other(anyhow!(
            "the connection ended before repair {} did; it goes on in the node (see `ringstore repair status`)",
            last.id
        )));
    }
    out.write_all(summary(&last).as_bytes())
        .map_err(anyhow::Error::from)?;
    if last.ranges_failed > 0 {
        return Err(Failure::Other(anyhow!(
            "{} of {} ranges were not repaired:\n{}",
            last.ranges_failed,
            last.ranges_total,
            failed_ranges(&last)
        )));
    }
    Ok(())
}

fn progress_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template("[{elapsed_precise}] {wide_bar} {pos}/{len} ranges  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style)
}

/// The lines printed when a repair ends.
fn summary(progress: &pb::RepairProgress) -> String {
    let mut text = if progress.dry_run {
        let differing = progress
            .ranges
            .iter()
            .filter(|r| r.error.is_empty())
            .count();
        format!(
            "Dry run {}: {differing} of {} ranges differ, {} keys in all; nothing was moved\n",
            progress.id, progress.ranges_total, progress.mismatched_keys
        )
    } else {
        format!(
            "Repair {}: {} of {} ranges repaired, {} keys differed, {} rows sent, {} exchanged\n",
            progress.id,
            progress.ranges_done,
            progress.ranges_total,
            progress.mismatched_keys,
            progress.rows_sent,
            human_bytes(progress.bytes)
        )
    };
    for range in progress.ranges.iter().filter(|r| r.error.is_empty()) {
        text.push_str(&format!(
            "  {} ({}, {}]: {} keys differ\n",
            range.keyspace, range.start_token, range.end_token, range.mismatched_keys
        ));
    }
    text
}

/// The failed ranges, one per line with the reason.
fn failed_ranges(progress: &pb::RepairProgress) -> String {
    progress
        .ranges
        .iter()
        .filter(|r| !r.error.is_empty())
        .map(|r| {
            format!(
                "  {} ({}, {}]: {}",
                r.keyspace, r.start_token, r.end_token, r.error
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `repair status`.
async fn status(connection: &Connection, out: &mut impl Write) -> Outcome {
    let response = connection
        .repair()
        .repair_status(pb::RepairStatusRequest {})
        .await?
        .into_inner();
    out.write_all(render_status(&response, now_micros()).as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The `repair status` text at `now` (µs since the epoch).
fn render_status(response: &pb::RepairStatusResponse, now: i64) -> String {
    let mut text = match &response.current {
        None => "Repair: none since the node started\n".to_string(),
        Some(p) => format!(
            "Repair {}: {}{}{}, {}/{} ranges done, {} failed, {} keys differed, {} rows sent, {} exchanged, ETA {}\n",
            p.id,
            p.state,
            if p.dry_run { " (dry run)" } else { "" },
            if p.resumed_from > 0 {
                format!(" (resumed after a restart at {})", p.resumed_from)
            } else {
                String::new()
            },
            p.ranges_done,
            p.ranges_total,
            p.ranges_failed,
            p.mismatched_keys,
            p.rows_sent,
            human_bytes(p.bytes),
            p.eta_seconds.map_or("-".to_string(), human_duration),
        ),
    };
    text.push_str(&format!(
        "Schedule: {} (each range every {}); tombstone_gc: {}\n",
        response.schedule,
        human_duration(response.schedule_interval_seconds as f64),
        response.tombstone_gc
    ));
    let overdue = response.ranges.iter().filter(|r| r.overdue).count();
    text.push_str(&format!(
        "Primary ranges: {} ({} never repaired, {overdue} unrepaired longer than gc_grace_seconds)\n",
        response.ranges.len(),
        response.ranges.iter().filter(|r| r.last_repaired_micros.is_none()).count(),
    ));
    text.push_str(&format!(
        "{:<16} {:<44} {}\n",
        "Keyspace", "Range", "Last repaired"
    ));
    for range in &response.ranges {
        let when = range
            .last_repaired_micros
            .map_or("never".to_string(), |at| {
                format!("{} ago", human_duration((now - at).max(0) as f64 / 1e6))
            });
        text.push_str(&format!(
            "{:<16} {:<44} {when}{}\n",
            range.keyspace,
            format!("({}, {}]", range.start_token, range.end_token),
            if range.overdue { "  OVERDUE" } else { "" }
        ));
    }
    text
}

/// `repair --paxos-only [KEYSPACE]`: one line per keyspace; fails, naming
/// the first reason, when a key's round failed.
async fn paxos_only(connection: &Connection, args: &RepairArgs, out: &mut impl Write) -> Outcome {
    let response = connection
        .repair()
        .paxos_repair(pb::PaxosRepairRequest {
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    let mut failed = Vec::new();
    for k in &response.keyspaces {
        writeln!(
            out,
            "{}: finished {} unfinished compare-and-sets, {} failed; purged {} Paxos states, kept {}",
            k.keyspace, k.keys_finished, k.keys_failed, k.states_purged, k.states_kept
        )
        .map_err(anyhow::Error::from)?;
        if k.keys_failed > 0 {
            failed.push(format!(
                "{}: {} keys ({})",
                k.keyspace, k.keys_failed, k.first_error
            ));
        }
    }
    if !failed.is_empty() {
        return Err(Failure::Other(anyhow!(
            "the Paxos repair could not finish every key; run it again once the replicas are up: {}",
            failed.join("; ")
        )));
    }
    Ok(())
}

/// `garbagecollect [KEYSPACE]`: one line per keyspace.
pub async fn garbage_collect(
    connection: &Connection,
    args: &CleanupArgs,
    out: &mut impl Write,
) -> Outcome {
    let response = connection
        .repair()
        .garbage_collect(pb::GarbageCollectRequest {
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    for k in &response.keyspaces {
        writeln!(
            out,
            "{}: scanned {} cells, purged {}, kept {} tombstones and expired cells",
            k.keyspace, k.cells_scanned, k.cells_purged, k.deleted_kept
        )
        .map_err(anyhow::Error::from)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(dry_run: bool) -> pb::RepairProgress {
        pb::RepairProgress {
            id: "r1".into(),
            ranges_total: 48,
            ranges_done: 47,
            ranges_failed: 1,
            mismatched_keys: 12,
            rows_sent: 13,
            bytes: 2048,
            dry_run,
            finished: true,
            ranges: vec![
                pb::RepairRangeReport {
                    keyspace: "demo".into(),
                    start_token: -5,
                    end_token: 7,
                    mismatched_keys: 0,
                    error: "replica x is down".into(),
                },
                pb::RepairRangeReport {
                    keyspace: "demo".into(),
                    start_token: 7,
                    end_token: 9,
                    mismatched_keys: 12,
                    error: String::new(),
                },
            ],
            state: "failed".into(),
            eta_seconds: None,
            resumed_from: 0,
        }
    }

    #[test]
    fn summaries_name_the_differing_and_the_failed_ranges() {
        assert_eq!(
            summary(&progress(false)),
            "Repair r1: 47 of 48 ranges repaired, 12 keys differed, 13 rows sent, 2.00 KiB exchanged\n  demo (7, 9]: 12 keys differ\n"
        );
        assert!(summary(&progress(true)).starts_with("Dry run r1: 1 of 48 ranges differ, 12 keys"));
        assert_eq!(
            failed_ranges(&progress(false)),
            "  demo (-5, 7]: replica x is down"
        );
    }

    #[test]
    fn status_shows_each_range_with_its_age() {
        let response = pb::RepairStatusResponse {
            current: Some(progress(false)),
            schedule: "continuous".into(),
            schedule_interval_seconds: 3600,
            tombstone_gc: "repair".into(),
            ranges: vec![
                pb::ScheduledRangeStatus {
                    keyspace: "demo".into(),
                    start_token: 1,
                    end_token: 2,
                    last_repaired_micros: Some(0),
                    overdue: true,
                },
                pb::ScheduledRangeStatus {
                    keyspace: "demo".into(),
                    start_token: 2,
                    end_token: 3,
                    last_repaired_micros: None,
                    overdue: false,
                },
            ],
        };
        let text = render_status(&response, 90_000_000);
        assert!(
            text.contains("Repair r1: failed, 47/48 ranges done, 1 failed"),
            "{text}"
        );
        assert!(
            text.contains("Schedule: continuous (each range every 1h 00m); tombstone_gc: repair")
        );
        assert!(text.contains("(1, 2]"));
        assert!(text.contains("1m 30s ago  OVERDUE"), "{text}");
        assert!(text.contains("never"));
        assert!(text.contains("Primary ranges: 2 (1 never repaired, 1 unrepaired"));
    }
}
