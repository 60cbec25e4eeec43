//! `ringstore putif`, `deleteif` and `getserial`: lightweight transactions
//! through the client library, as `put`, `delete` and `get` are (`--host`
//! coordinates; with `--token-aware` the key's first live replica, where
//! the library sends every compare-and-set of the key).
//!
//! The answer is Cassandra's `[applied]` row as a line on stdout:
//! `applied`, or `not applied; current value: V` / `not applied; key
//! absent` (exit status 1). A failure says whether the operation certainly
//! did not apply (the node's word, or it never reached one: exit status 2,
//! safe to run again) or its outcome is unknown (exit status 4, with the
//! `getserial` command that tells).

use std::io::Write;

use ringstore_client::{ClientError, expect, pb};

use crate::cli::{DeleteIfArgs, GetSerialArgs, PutIfArgs, SerialLevel, SerialOptions};
use crate::client::Connection;
use crate::commands::data::{cluster, key_bytes, level, literal_bytes, print_value, value_bytes};
use crate::failure::{Failure, Outcome};

/// A serial level's wire form.
pub fn serial(level: SerialLevel) -> i32 {
    match level {
        SerialLevel::Serial => pb::SerialConsistency::Serial as i32,
        SerialLevel::LocalSerial => pb::SerialConsistency::LocalSerial as i32,
    }
}

/// A commit level's wire form; none is `UNSPECIFIED` (the node's `ANY`).
fn commit(options: &SerialOptions) -> i32 {
    options
        .commit
        .map_or(pb::ConsistencyLevel::Unspecified as i32, level)
}

/// The condition of `--if-absent`, `--if-value V` or `--any` (clap makes
/// exactly one be given).
fn condition(
    if_absent: bool,
    if_value: Option<&str>,
    hex: bool,
) -> Result<Option<pb::Expected>, Failure> {
    Ok(match if_value {
        Some(value) => expect::value(literal_bytes(value, hex)?),
        None if if_absent => expect::absent(),
        None => expect::any(),
    })
}

/// `putif`: writes the value if the condition holds.
pub async fn put_if(connection: &Connection, args: &PutIfArgs, out: &mut impl Write) -> Outcome {
    let options = &args.options;
    let key = key_bytes(&args.key, options.hex)?;
    let request = pb::PutIfRequest {
        keyspace: args.keyspace.clone(),
        key,
        expected: condition(args.if_absent, args.if_value.as_deref(), options.hex)?,
        value: value_bytes(&args.value, options.hex)?,
        ttl_seconds: args.ttl,
        serial_consistency: serial(options.serial),
        commit_consistency: commit(options),
    };
    let client = cluster(connection, options.token_aware).await?;
    let answer = client.put_if(request).await;
    report(answer, &args.keyspace, &args.key, options, out)
}

/// `deleteif`: deletes the key if the condition holds.
pub async fn delete_if(
    connection: &Connection,
    args: &DeleteIfArgs,
    out: &mut impl Write,
) -> Outcome {
    let options = &args.options;
    let request = pb::DeleteIfRequest {
        keyspace: args.keyspace.clone(),
        key: key_bytes(&args.key, options.hex)?,
        expected: condition(false, args.if_value.as_deref(), options.hex)?,
        serial_consistency: serial(options.serial),
        commit_consistency: commit(options),
    };
    let client = cluster(connection, options.token_aware).await?;
    let answer = client.delete_if(request).await;
    report(answer, &args.keyspace, &args.key, options, out)
}

/// `getserial`: prints the value and a newline; [`Failure::NotFound`] if
/// none.
pub async fn get_serial(
    connection: &Connection,
    args: &GetSerialArgs,
    out: &mut impl Write,
) -> Outcome {
    let options = &args.options;
    let response = cluster(connection, options.token_aware)
        .await?
        .get_serial(pb::GetSerialRequest {
            keyspace: args.keyspace.clone(),
            key: key_bytes(&args.key, options.hex)?,
            serial_consistency: serial(options.serial),
            commit_consistency: commit(options),
        })
        .await?;
    if !response.found {
        return Err(Failure::NotFound);
    }
    print_value(out, &response.value, options.hex)
}

/// Prints a compare-and-set's answer; a failure keeps whether its outcome
/// is unknown.
fn report(
    answer: Result<pb::CasResponse, ClientError>,
    keyspace: &str,
    key: &str,
    options: &SerialOptions,
    out: &mut impl Write,
) -> Outcome {
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) if error.is_cas_unknown() => {
            return Err(Failure::CasUnknown {
                cause: Box::new(Failure::from(error)),
                read_with: read_command(keyspace, key, options),
            });
        }
        Err(error) => return Err(error.into()),
    };
    let line = answer_line(&answer, options.hex);
    writeln!(out, "{line}").map_err(anyhow::Error::from)?;
    if answer.applied {
        Ok(())
    } else {
        Err(Failure::NotApplied)
    }
}

/// `applied`, `not applied; current value: V` or `not applied; key absent`.
fn answer_line(answer: &pb::CasResponse, hex: bool) -> String {
    match (answer.applied, answer.found) {
        (true, _) => "applied".into(),
        (false, false) => "not applied; key absent".into(),
        (false, true) if hex => {
            format!("not applied; current value: {}", hex::encode(&answer.value))
        }
        (false, true) => format!(
            "not applied; current value: {}",
            String::from_utf8_lossy(&answer.value)
        ),
    }
}

/// The `getserial` command line that reads the key as the failed
/// operation would have (keyspace and key quoted for a shell).
fn read_command(keyspace: &str, key: &str, options: &SerialOptions) -> String {
    let quote = |text: &str| {
        shlex::try_quote(text).map_or_else(|_| format!("{text:?}"), |quoted| quoted.into_owned())
    };
    let mut command = format!("ringstore getserial {} {}", quote(keyspace), quote(key));
    if options.serial == SerialLevel::LocalSerial {
        command += " --serial local-serial";
    }
    if options.hex {
        command += " --hex";
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(serial: SerialLevel, hex: bool) -> SerialOptions {
        SerialOptions {
            serial,
            commit: None,
            hex,
            token_aware: false,
        }
    }

    #[test]
    fn answers_read_as_cassandras_applied_row() {
        let applied = pb::CasResponse {
            applied: true,
            timestamp_micros: 5,
            ..Default::default()
        };
        assert_eq!(answer_line(&applied, false), "applied");
        let held = pb::CasResponse {
            applied: false,
            found: true,
            value: b"bob".to_vec(),
            timestamp_micros: 3,
        };
        assert_eq!(answer_line(&held, false), "not applied; current value: bob");
        assert_eq!(
            answer_line(&held, true),
            "not applied; current value: 626f62"
        );
        let absent = pb::CasResponse::default();
        assert_eq!(answer_line(&absent, false), "not applied; key absent");
    }

    #[test]
    fn an_unknown_outcome_names_the_command_that_reads_it() {
        let plain = read_command("ks", "user 1", &options(SerialLevel::Serial, false));
        assert_eq!(plain, "ringstore getserial ks 'user 1'");
        let local = read_command("ks", "6b", &options(SerialLevel::LocalSerial, true));
        assert_eq!(
            local,
            "ringstore getserial ks 6b --serial local-serial --hex"
        );
        let failure = Failure::CasUnknown {
            cause: Box::new(Failure::Status(tonic::Status::deadline_exceeded("slow"))),
            read_with: plain,
        };
        let message = failure.to_string();
        assert!(
            message.starts_with("DEADLINE_EXCEEDED: slow\n"),
            "{message}"
        );
        assert!(message.contains("the result is unknown"), "{message}");
        assert!(
            message.contains("`ringstore getserial ks 'user 1'`"),
            "{message}"
        );
        assert_eq!(failure.exit_code(), std::process::ExitCode::from(4));
    }

    #[test]
    fn a_condition_is_required_and_only_one() {
        use clap::Parser;
        let parse = |args: &[&str]| crate::cli::Cli::try_parse_from(args);
        assert!(parse(&["ringstore", "putif", "ks", "k", "v", "--if-absent"]).is_ok());
        assert!(parse(&["ringstore", "putif", "ks", "k", "v"]).is_err());
        assert!(parse(&["ringstore", "putif", "ks", "k", "v", "--any", "--if-absent"]).is_err());
        assert!(parse(&["ringstore", "deleteif", "ks", "k", "--if-absent"]).is_err());
        let cli = parse(&[
            "ringstore",
            "deleteif",
            "ks",
            "k",
            "--if-value",
            "old",
            "--serial",
            "local-serial",
            "--commit",
            "local_quorum",
        ])
        .unwrap();
        let crate::cli::Command::Deleteif(args) = cli.command else {
            panic!("a deleteif command")
        };
        assert_eq!(args.if_value.as_deref(), Some("old"));
        assert_eq!(args.options.serial, SerialLevel::LocalSerial);
        assert_eq!(
            args.options.commit,
            Some(ringstore_replication::ConsistencyLevel::LocalQuorum)
        );
    }
}
