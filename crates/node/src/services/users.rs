//! The `Users` service: client users and their grants in `system_auth`.
//!
//! The client-auth layer has already required `admin` on all keyspaces
//! (or, for `ChangePassword`, a login); here are the finer rules: only a
//! superuser creates, drops or changes a superuser, a user changes its own
//! password or, with `admin` on all, anyone's (the default superuser with
//! its default password: only its own, and not to the default again), and
//! no one drops the user it is logged in as. With `authenticator = "allow_all"` no principal is
//! attached and every call is allowed (users can be prepared before the
//! authenticator is switched on).
//!
//! It takes the node as client authentication's host ([`AuthHost`]): the
//! users are read and written through the users store (`client_auth::store`).

use std::collections::BTreeSet;
use std::sync::Arc;

use ringstore_client_auth::{
    AUTH_KEYSPACE, DEFAULT_PASSWORD, DEFAULT_SUPERUSER, Denied, Grant, Permission, Principal,
    Scope, StoredHash, UserName, check_password,
};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::users_server::Users;
use tonic::{Request, Response, Status};

use crate::client_auth::{AuthHost, Gate, store};
use crate::error::{NodeError, Result, UserError};
use crate::schema::sync::keyspace as schema_keyspace;

/// Serves `Users` from a node, its host (see the module docs).
pub struct UsersService<H> {
    /// The node (its context in its `Arc`: the coordinator's reads and
    /// writes, which the store makes, spawn tasks).
    host: H,
    /// The client-auth gate whose cache a change invalidates (none with
    /// `allow_all`).
    gate: Option<Arc<Gate>>,
    /// Held across a user's read-modify-write (and so across awaits), so
    /// two changes through this node never lose one another.
    changes: tokio::sync::Mutex<()>,
}

impl<H: AuthHost + 'static> UsersService<H> {
    /// The service of `host`'s node.
    pub fn new(host: H, gate: Option<Arc<Gate>>) -> UsersService<H> {
        UsersService {
            host,
            gate,
            changes: tokio::sync::Mutex::new(()),
        }
    }

    fn invalidate(&self, name: &UserName) {
        if let Some(gate) = &self.gate {
            gate.invalidate(name);
        }
    }

    async fn update_index(&self, change: impl FnOnce(&mut BTreeSet<UserName>)) -> Result<()> {
        let mut users = store::read_index(&self.host).await?.unwrap_or_default();
        change(&mut users);
        store::write_index(&self.host, &users, None).await
    }

    async fn existing(&self, name: &UserName) -> Result<ringstore_client_auth::UserRecord> {
        store::read_user(&self.host, name)
            .await?
            .ok_or_else(|| NodeError::UserNotFound(name.to_string()))
    }

    async fn change_grant(&self, request: pb::GrantRequest, add: bool) -> Result<()> {
        let name = UserName::new(&request.user)?;
        let grant = Grant {
            permission: permission_from_pb(request.permission)?,
            scope: scope_of(&request.keyspace)?,
        };
        if add && let Scope::Keyspace(keyspace) = &grant.scope {
            schema_keyspace(self.host.schema_host(), keyspace)?;
        }
        let _change = self.changes.lock().await;
        let mut record = self.existing(&name).await?;
        let changed = if add {
            record.grants.insert(grant.clone())
        } else {
            record.grants.remove(&grant)
        };
        if changed {
            store::write_user(&self.host, &record, None).await?;
            self.invalidate(&name);
        }
        tracing::info!(user = %name, %grant, granted = add, "permission changed");
        Ok(())
    }
}

/// The principal the layer attached (none: `allow_all`).
fn caller<T>(request: &Request<T>) -> Option<Principal> {
    request.extensions().get::<Principal>().cloned()
}

fn require_superuser(caller: &Option<Principal>, needed_for: &'static str) -> Result<()> {
    match caller {
        Some(principal) if !principal.user.superuser => Err(UserError::NotSuperuser {
            user: principal.user.name.clone(),
            needed_for,
        }
        .into()),
        _ => Ok(()),
    }
}

fn denied(denied: Denied) -> NodeError {
    UserError::Denied(denied).into()
}

fn scope_of(keyspace: &str) -> Result<Scope> {
    if keyspace == AUTH_KEYSPACE {
        return Err(UserError::GrantOnAuthKeyspace.into());
    }
    Ok(Scope::parse(if keyspace.is_empty() {
        "all"
    } else {
        keyspace
    }))
}

fn permission_from_pb(permission: i32) -> Result<Permission> {
    use pb::Permission as P;
    match P::try_from(permission) {
        Ok(P::Read) => Ok(Permission::Read),
        Ok(P::Write) => Ok(Permission::Write),
        Ok(P::Schema) => Ok(Permission::Schema),
        Ok(P::Admin) => Ok(Permission::Admin),
        Ok(P::Unspecified) | Err(_) => Err(UserError::UnknownPermission(permission).into()),
    }
}

fn permission_to_pb(permission: Permission) -> pb::Permission {
    match permission {
        Permission::Read => pb::Permission::Read,
        Permission::Write => pb::Permission::Write,
        Permission::Schema => pb::Permission::Schema,
        Permission::Admin => pb::Permission::Admin,
    }
}

/// Hashes off the async threads (Argon2 takes tens of milliseconds).
async fn hash(password: String) -> Result<StoredHash> {
    check_password(&password)?;
    ringstore_storage::offload::spawn_blocking(move || StoredHash::new(&password))
        .await
        .map_err(NodeError::task("password hashing"))?
        .map_err(NodeError::from)
}

#[tonic::async_trait]
impl<H: AuthHost + 'static> Users for UsersService<H> {
    async fn create_user(
        &self,
        request: Request<pb::CreateUserRequest>,
    ) -> Result<Response<pb::CreateUserResponse>, Status> {
        let caller = caller(&request);
        let r = request.into_inner();
        let name = UserName::new(&r.name).map_err(NodeError::from)?;
        if r.superuser {
            require_superuser(&caller, "creating a superuser")?;
        }
        let hash = hash(r.password).await?;
        let _change = self.changes.lock().await;
        store::ensure_keyspace(&self.host).await?;
        if store::read_user(&self.host, &name).await?.is_some() {
            return Err(UserError::AlreadyExists(name).into());
        }
        let record = ringstore_client_auth::UserRecord {
            name: name.clone(),
            hash,
            superuser: r.superuser,
            grants: BTreeSet::new(),
        };
        store::write_user(&self.host, &record, None).await?;
        self.update_index(|users| {
            users.insert(name.clone());
        })
        .await?;
        self.invalidate(&name);
        tracing::info!(user = %name, superuser = r.superuser, "user created");
        Ok(Response::new(pb::CreateUserResponse {}))
    }

    async fn drop_user(
        &self,
        request: Request<pb::DropUserRequest>,
    ) -> Result<Response<pb::DropUserResponse>, Status> {
        let caller = caller(&request);
        let name = UserName::new(&request.into_inner().name).map_err(NodeError::from)?;
        if caller.as_ref().is_some_and(|p| p.user.name == name) {
            return Err(UserError::DropsItself(name).into());
        }
        let _change = self.changes.lock().await;
        let record = self.existing(&name).await?;
        if record.superuser {
            require_superuser(&caller, "dropping a superuser")?;
        }
        store::delete_user(&self.host, &name).await?;
        self.update_index(|users| {
            users.remove(&name);
        })
        .await?;
        self.invalidate(&name);
        tracing::info!(user = %name, "user dropped");
        Ok(Response::new(pb::DropUserResponse {}))
    }

    async fn list_users(
        &self,
        _: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        let names = store::read_index(&self.host).await?.unwrap_or_default();
        let mut users = Vec::new();
        for name in names {
            // A name whose record is gone (dropped through another node at once) is skipped.
            if let Some(record) = store::read_user(&self.host, &name).await? {
                users.push(pb::User {
                    name: record.name.to_string(),
                    superuser: record.superuser,
                    grants: record
                        .grants
                        .iter()
                        .map(|g| pb::UserGrant {
                            permission: permission_to_pb(g.permission) as i32,
                            keyspace: match &g.scope {
                                Scope::All => String::new(),
                                Scope::Keyspace(name) => name.clone(),
                            },
                        })
                        .collect(),
                });
            }
        }
        Ok(Response::new(pb::ListUsersResponse { users }))
    }

    async fn change_password(
        &self,
        request: Request<pb::ChangePasswordRequest>,
    ) -> Result<Response<pb::ChangePasswordResponse>, Status> {
        let caller = caller(&request);
        let r = request.into_inner();
        let name = UserName::new(&r.name).map_err(NodeError::from)?;
        let may_set = |target_superuser| match &caller {
            Some(principal) => principal
                .may_set_password_of(&name, target_superuser)
                .map_err(denied),
            None => Ok(()),
        };
        may_set(None)?;
        if name.as_str() == DEFAULT_SUPERUSER && r.new_password == DEFAULT_PASSWORD {
            return Err(UserError::DefaultPasswordAgain.into());
        }
        let hash = hash(r.new_password).await?;
        let _change = self.changes.lock().await;
        let mut record = self.existing(&name).await?;
        may_set(Some(record.superuser))?;
        record.hash = hash;
        store::write_user(&self.host, &record, None).await?;
        self.invalidate(&name);
        tracing::info!(user = %name, "password changed");
        Ok(Response::new(pb::ChangePasswordResponse {}))
    }

    async fn grant(
        &self,
        request: Request<pb::GrantRequest>,
    ) -> Result<Response<pb::GrantResponse>, Status> {
        self.change_grant(request.into_inner(), true).await?;
        Ok(Response::new(pb::GrantResponse {}))
    }

    async fn revoke(
        &self,
        request: Request<pb::GrantRequest>,
    ) -> Result<Response<pb::GrantResponse>, Status> {
        self.change_grant(request.into_inner(), false).await?;
        Ok(Response::new(pb::GrantResponse {}))
    }
}
