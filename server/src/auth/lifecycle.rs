//! Changing, disabling and deleting users, revoking sessions, and named ingest tokens: the
//! same steps whoever asks (`gantry user ...`, `gantry token ...`, the admin API).
//!
//! Each change: the name checked and the user looked up (an unknown one is an error, not
//! an audit row); the last enabled admin kept; an audit row written *before* anything
//! changes (if it cannot be, nothing changes); the change, which ends the user's sessions
//! and bumps the revocation epoch in one transaction; the audit row completed.

use app::actions::Role;

use super::{hash_password, new_token, token_digest, validate_user_name, AuthError};
use crate::clock::wall_now_ms;
use crate::store::{IngestTokenInfo, Store, UserChange};

/// Who makes a change, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub user: String,
    pub role: Role,
}

impl Actor {
    /// The `gantry` command on the server's host: whoever can run it can read the database.
    pub fn cli() -> Actor {
        Actor {
            user: "gantry-cli".into(),
            role: Role::Admin,
        }
    }
}

/// Which jobs an ingest token may write for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IngestScope {
    /// The `ingest_token` setting, or a named token without an account.
    AnyAccount,
    /// A named token scoped to this Slurm account.
    Account(String),
}

impl IngestScope {
    pub fn of(t: &IngestTokenInfo) -> IngestScope {
        match &t.account {
            Some(a) => IngestScope::Account(a.clone()),
            None => IngestScope::AnyAccount,
        }
    }

    /// Whether a job of `account` may be written for.
    pub fn allows(&self, account: &str) -> bool {
        match self {
            IngestScope::AnyAccount => true,
            IngestScope::Account(a) => a == account,
        }
    }
}

/// A Slurm account name, as a token's scope.
pub fn validate_account(account: &str) -> Result<(), AuthError> {
    if super::name_shape(account) {
        Ok(())
    } else {
        Err(AuthError::BadAccount)
    }
}

/// Writes the audit row, runs `change`, completes the row with its outcome.
async fn audited<T>(
    store: &Store,
    actor: &Actor,
    action: &str,
    target: &str,
    detail: &str,
    change: impl std::future::Future<Output = Result<(T, String), AuthError>>,
) -> Result<T, AuthError> {
    let id = store
        .audit_begin(
            wall_now_ms(),
            &actor.user,
            actor.role,
            action,
            target,
            detail,
        )
        .await
        .map_err(AuthError::Audit)?;
    let done = change.await;
    let (status, result) = match &done {
        Ok((_, said)) => ("ok", said.clone()),
        Err(e) => ("failed", e.to_string()),
    };
    if let Err(e) = store.audit_finish(id, status, &result, wall_now_ms()).await {
        // The change happened (or failed); its row stays 'started', which the audit page shows.
        tracing::error!(error = %e, audit_id = id, "audit row could not be completed");
    }
    tracing::info!(user = %actor.user, action, target, status, "user lifecycle");
    done.map(|(v, _)| v)
}

fn ended(n: u64) -> String {
    match n {
        1 => "1 session ended".into(),
        n => format!("{n} sessions ended"),
    }
}

/// The user `name`, checked and looked up, with whether they are its last enabled admin.
async fn existing(store: &Store, name: &str) -> Result<(Role, bool), AuthError> {
    validate_user_name(name)?;
    let u = store
        .user(name)
        .await?
        .ok_or_else(|| AuthError::UnknownUser(name.into()))?;
    let last_admin = u.role == Role::Admin && !u.disabled && store.enabled_admins().await? <= 1;
    Ok((u.role, last_admin))
}

/// What a change found of the user when it ran: sessions ended, or gone meanwhile.
fn found(name: &str, change: UserChange) -> Result<(u64, String), AuthError> {
    match change {
        UserChange::NoSuchUser => Err(AuthError::UnknownUser(name.into())),
        UserChange::Unchanged => Ok((0, "unchanged: no session ended".into())),
        UserChange::Changed { sessions_ended } => Ok((sessions_ended, ended(sessions_ended))),
    }
}

/// A new password for `name` (`gantry user passwd`); ends their sessions. How many ended.
pub async fn change_password(
    store: &Store,
    actor: &Actor,
    name: &str,
    password: &str,
) -> Result<u64, AuthError> {
    existing(store, name).await?;
    let password = password.to_string();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| AuthError::Hash(e.to_string()))??;
    audited(store, actor, "user_password", name, "", async {
        found(name, store.set_password_hash(name, &hash).await?)
    })
    .await
}

/// A new role for `name`; ends their sessions. The last enabled admin keeps theirs.
pub async fn change_role(
    store: &Store,
    actor: &Actor,
    name: &str,
    role: Role,
) -> Result<u64, AuthError> {
    let (was, last_admin) = existing(store, name).await?;
    if last_admin && role != Role::Admin {
        return Err(AuthError::LastAdmin);
    }
    let detail = format!("{} -> {}", was.as_str(), role.as_str());
    audited(store, actor, "user_role", name, &detail, async {
        found(name, store.set_role(name, role).await?)
    })
    .await
}

/// Disables `name` (ending their sessions) or enables them. The last enabled admin cannot
/// be disabled.
pub async fn set_disabled(
    store: &Store,
    actor: &Actor,
    name: &str,
    disabled: bool,
) -> Result<u64, AuthError> {
    let (_, last_admin) = existing(store, name).await?;
    if last_admin && disabled {
        return Err(AuthError::LastAdmin);
    }
    let action = if disabled {
        "user_disable"
    } else {
        "user_enable"
    };
    audited(store, actor, action, name, "", async {
        found(
            name,
            store.set_disabled(name, disabled, wall_now_ms()).await?,
        )
    })
    .await
}

/// Deletes `name` and their sessions. The last enabled admin cannot be deleted.
pub async fn delete_user(store: &Store, actor: &Actor, name: &str) -> Result<u64, AuthError> {
    let (_, last_admin) = existing(store, name).await?;
    if last_admin {
        return Err(AuthError::LastAdmin);
    }
    audited(store, actor, "user_delete", name, "", async {
        found(name, store.delete_user(name).await?)
    })
    .await
}

/// Revokes the session with opaque id `id`: its user.
pub async fn revoke_session(store: &Store, actor: &Actor, id: &str) -> Result<String, AuthError> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AuthError::UnknownSession);
    }
    let user = store
        .sessions(wall_now_ms())
        .await?
        .into_iter()
        .find(|s| s.id == id)
        .map(|s| s.user)
        .ok_or(AuthError::UnknownSession)?;
    let detail = format!("session {id}");
    audited(store, actor, "session_revoke", &user, &detail, async {
        let user = store
            .revoke_session(id)
            .await?
            .ok_or(AuthError::UnknownSession)?;
        Ok((user, "session ended".to_string()))
    })
    .await
}

/// Adds the ingest token `name`, for jobs of `account` only if given: the token, shown
/// this once (the store keeps only its SHA-256).
pub async fn add_ingest_token(
    store: &Store,
    actor: &Actor,
    name: &str,
    account: Option<&str>,
) -> Result<String, AuthError> {
    validate_user_name(name)?;
    if let Some(a) = account {
        validate_account(a)?;
    }
    let token = new_token()?;
    let detail = account.map(|a| format!("account {a}")).unwrap_or_default();
    audited(store, actor, "token_add", name, &detail, async {
        if store
            .put_ingest_token(name, &token_digest(&token), account, wall_now_ms())
            .await?
        {
            Ok(((), "added".to_string()))
        } else {
            Err(AuthError::TokenExists(name.into()))
        }
    })
    .await?;
    Ok(token)
}

/// Revokes the ingest token `name`: refused from then on.
pub async fn revoke_ingest_token(
    store: &Store,
    actor: &Actor,
    name: &str,
) -> Result<(), AuthError> {
    validate_user_name(name)?;
    if !store.ingest_tokens().await?.iter().any(|t| t.name == name) {
        return Err(AuthError::UnknownToken(name.into()));
    }
    audited(store, actor, "token_revoke", name, "", async {
        if store.revoke_ingest_token(name).await? {
            Ok(((), "revoked".to_string()))
        } else {
            Err(AuthError::UnknownToken(name.into()))
        }
    })
    .await
}
