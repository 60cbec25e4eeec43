//! `ringstore user create|drop|list|password`, `grant` and `revoke`.

use std::io::{BufRead, Write};

use anyhow::Context;
use ringstore_client_auth::Permission;
use ringstore_proto::v1 as pb;

use crate::cli::{GrantArgs, NewPassword, UserCommand};
use crate::client::Connection;
use crate::failure::Outcome;

/// Runs a `user` subcommand.
pub async fn run(connection: &Connection, command: &UserCommand, out: &mut impl Write) -> Outcome {
    let mut users = connection.users();
    match command {
        UserCommand::Create {
            name,
            superuser,
            new_password: password,
        } => {
            users
                .create_user(pb::CreateUserRequest {
                    name: name.clone(),
                    password: new_password(password)?,
                    superuser: *superuser,
                })
                .await?;
            writeln!(out, "created user {name}").context("writing the output")?;
        }
        UserCommand::Drop { name } => {
            users
                .drop_user(pb::DropUserRequest { name: name.clone() })
                .await?;
            writeln!(out, "dropped user {name}").context("writing the output")?;
        }
        UserCommand::List => {
            let listed = users
                .list_users(pb::ListUsersRequest {})
                .await?
                .into_inner();
            writeln!(out, "{:<24} {:<10} grants", "user", "superuser")
                .context("writing the output")?;
            for user in listed.users {
                let grants: Vec<String> = user
                    .grants
                    .iter()
                    .map(|g| {
                        let keyspace = if g.keyspace.is_empty() {
                            "ALL"
                        } else {
                            g.keyspace.as_str()
                        };
                        format!("{} on {keyspace}", permission_name(g.permission))
                    })
                    .collect();
                writeln!(
                    out,
                    "{:<24} {:<10} {}",
                    user.name,
                    if user.superuser { "yes" } else { "no" },
                    if grants.is_empty() {
                        "-".to_string()
                    } else {
                        grants.join(", ")
                    }
                )
                .context("writing the output")?;
            }
        }
        UserCommand::Password {
            name,
            new_password: password,
        } => {
            users
                .change_password(pb::ChangePasswordRequest {
                    name: name.clone(),
                    new_password: new_password(password)?,
                })
                .await?;
            writeln!(out, "changed the password of {name}").context("writing the output")?;
        }
    }
    Ok(())
}

/// Runs `grant` (`add`) or `revoke`.
pub async fn grant(
    connection: &Connection,
    args: &GrantArgs,
    add: bool,
    out: &mut impl Write,
) -> Outcome {
    let all = args.keyspace.eq_ignore_ascii_case("all");
    let request = pb::GrantRequest {
        user: args.grantee.clone(),
        permission: permission_to_pb(args.permission) as i32,
        keyspace: if all {
            String::new()
        } else {
            args.keyspace.clone()
        },
    };
    let mut users = connection.users();
    let target = if all {
        "all keyspaces".to_string()
    } else {
        format!("keyspace {}", args.keyspace)
    };
    if add {
        users.grant(request).await?;
        writeln!(
            out,
            "granted {} on {target} to {}",
            args.permission, args.grantee
        )
    } else {
        users.revoke(request).await?;
        writeln!(
            out,
            "revoked {} on {target} from {}",
            args.permission, args.grantee
        )
    }
    .context("writing the output")?;
    Ok(())
}

/// The new password: the flag or RINGSTORE_NEW_PASSWORD, else the first
/// line of standard input (without its line ending).
fn new_password(password: &NewPassword) -> anyhow::Result<String> {
    if let Some(value) = &password.value {
        return Ok(value.clone());
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the new password from standard input")?;
    let trimmed = line.trim_end_matches(['\n', '\r']).to_string();
    if trimmed.is_empty() {
        anyhow::bail!(
            "no new password: pass --new-password, set RINGSTORE_NEW_PASSWORD, or write it on standard input"
        );
    }
    Ok(trimmed)
}

fn permission_to_pb(permission: Permission) -> pb::Permission {
    match permission {
        Permission::Read => pb::Permission::Read,
        Permission::Write => pb::Permission::Write,
        Permission::Schema => pb::Permission::Schema,
        Permission::Admin => pb::Permission::Admin,
    }
}

fn permission_name(permission: i32) -> &'static str {
    match pb::Permission::try_from(permission) {
        Ok(pb::Permission::Read) => "read",
        Ok(pb::Permission::Write) => "write",
        Ok(pb::Permission::Schema) => "schema",
        Ok(pb::Permission::Admin) => "admin",
        _ => "unknown",
    }
}
