//! Who is calling and what they may do.
//!
//! Local users with argon2id password hashes; sessions as random tokens, of which the store
//! keeps only a SHA-256; the caller of a request ([`Caller`]) and the rule of what a route
//! requires, [`access_for`], which is default-deny: a new route that is not a plain read
//! needs an operator unless it is named here. The per-user action rate limit. Knows no HTTP
//! framework: the web layer's guard reads cookies and headers and applies these rules.
//! Changing, disabling and deleting users, revoking sessions and named ingest tokens are
//! `lifecycle`'s (shared by the CLI and the admin API).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use app::actions::{Me, Role};
use app::model::UnixMs;
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use argon2::Argon2;
use http::Method;
use sha2::{Digest, Sha256};

use crate::clock::wall_now_ms;
use crate::store::{DirectoryPut, Origin, Store, StoreError, UserRow};

mod sign_in;
pub use sign_in::{Busy, HashPool, Throttle, ThrottlePolicy};
pub mod ldap;
mod lifecycle;
pub mod oidc;
pub use lifecycle::{
    add_ingest_token, change_password, change_role, delete_user, revoke_ingest_token,
    revoke_session, set_disabled, validate_account, Actor, IngestScope,
};

/// Longest user name and password accepted.
const MAX_NAME: usize = 64;
const MAX_PASSWORD: usize = 1024;
/// Shortest password `gantry user add` accepts.
pub const MIN_PASSWORD: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid user name: 1 to 64 of letters, digits, '.', '_', '-'")]
    BadName,
    #[error("the user name \"gantry\" is Gantry's own (its policies' drains carry it)")]
    ReservedName,
    #[error("password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")]
    BadPassword,
    #[error("password hashing failed: {0}")]
    Hash(String),
    #[error("no secure random numbers: {0}")]
    Random(String),
    #[error("no user {0:?}")]
    UnknownUser(String),
    #[error("no such session")]
    UnknownSession,
    #[error("no ingest token {0:?}")]
    UnknownToken(String),
    #[error("an ingest token {0:?} exists: revoke it first")]
    TokenExists(String),
    #[error("invalid account name: 1 to 64 of letters, digits, '.', '_', '-'")]
    BadAccount,
    #[error("this is the last enabled admin: make another admin first")]
    LastAdmin,
    #[error("the audit log cannot be written, so nothing was done")]
    Audit(#[source] StoreError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// 1 to 64 of letters, digits, `.`, `_`, `-` (user and account names).
pub fn name_shape(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The user Gantry's own actions run as (remediation policies): its drains' reasons start
/// `gantry: `, so no person may take the name.
pub const GANTRY_USER: &str = "gantry";

pub fn validate_user_name(name: &str) -> Result<(), AuthError> {
    if !name_shape(name) {
        return Err(AuthError::BadName);
    }
    // A person's drain reason starts with their name: `gantry:` marks Gantry's own drains.
    if name.eq_ignore_ascii_case(GANTRY_USER) {
        return Err(AuthError::ReservedName);
    }
    Ok(())
}

/// The argon2id cost of new hashes (`auth.argon2_*`); a stored hash is verified with the
/// cost it was made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashCost {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl Default for HashCost {
    /// OWASP's first argon2id choice: 19 MiB, 2 iterations, 1 lane.
    fn default() -> HashCost {
        HashCost {
            memory_kib: 19 * 1024,
            iterations: 2,
            parallelism: 1,
        }
    }
}

static COST: std::sync::OnceLock<HashCost> = std::sync::OnceLock::new();

/// Sets the cost of new hashes, once per process, before the first hash (start-up and the
/// CLI do). Later calls change nothing.
pub fn set_hash_cost(cost: HashCost) {
    let _ = COST.set(cost);
}

fn argon2() -> Result<Argon2<'static>, AuthError> {
    let c = COST.get().copied().unwrap_or_default();
    let params = argon2::Params::new(c.memory_kib, c.iterations, c.parallelism, None)
        .map_err(|e| AuthError::Hash(e.to_string()))?;
    Ok(Argon2::new(
        argon2::Algorithm::Argon2id,
        argon2::Version::V0x13,
        params,
    ))
}

/// An argon2id hash (PHC string) of `password` with a fresh random salt, at the configured
/// cost.
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    if password.chars().count() < MIN_PASSWORD || password.len() > MAX_PASSWORD {
        return Err(AuthError::BadPassword);
    }
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|e| AuthError::Random(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AuthError::Hash(e.to_string()))?;
    argon2()?
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AuthError::Hash(e.to_string()))
}

/// Whether `password` matches `hash`. A malformed hash never matches.
pub fn verify_password(hash: &str, password: &str) -> bool {
    verify_in(hash, password, &mut Vec::new())
}

thread_local! {
    /// The argon2 memory of the thread that verifies: allocated once, at the largest cost
    /// seen, and reused, so that a flood of sign-ins does not allocate (and leave the
    /// allocator holding) a hash's memory per attempt.
    static MEMORY: std::cell::RefCell<Vec<argon2::Block>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`verify_password`] in this thread's reused argon2 memory.
pub fn verify_password_reusing(hash: &str, password: &str) -> bool {
    MEMORY.with(|m| match m.try_borrow_mut() {
        Ok(mut mem) => verify_in(hash, password, &mut mem),
        Err(_) => verify_password(hash, password),
    })
}

/// Verifies as argon2's own `verify_password` does (the hash's algorithm, version, cost,
/// salt and length; a constant-time comparison), in `mem`, grown if the cost needs more.
fn verify_in(hash: &str, password: &str, mem: &mut Vec<argon2::Block>) -> bool {
    if password.len() > MAX_PASSWORD {
        return false;
    }
    let Ok(h) = PasswordHash::new(hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(params)) = (
        argon2::Algorithm::try_from(h.algorithm),
        argon2::Params::try_from(&h),
    ) else {
        return false;
    };
    let version = match h.version.map(argon2::Version::try_from) {
        None => argon2::Version::V0x13,
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let (Some(salt), Some(expected)) = (h.salt, h.hash) else {
        return false;
    };
    let mut salt_buf = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
        return false;
    };
    if mem.len() < params.block_count() {
        mem.resize(params.block_count(), argon2::Block::default());
    }
    let mut out = vec![0u8; expected.len()];
    let a = Argon2::new(algorithm, version, params);
    if a.hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut mem[..])
        .is_err()
    {
        return false;
    }
    argon2::password_hash::Output::new(&out).is_ok_and(|o| o == expected)
}

/// A hash to verify against when the user does not exist, so that a wrong name and a
/// wrong password take the same time.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password, never valid").unwrap_or_default())
}

fn new_token() -> Result<String, AuthError> {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(hex::encode(b))
}

/// The SHA-256 (hex) of a session or ingest token: all the store keeps of it, and what
/// [`Store::sessions_valid`] takes.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A session's opaque id for listings: random, unrelated to its token.
fn new_session_id() -> Result<String, AuthError> {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b).map_err(|e| AuthError::Random(e.to_string()))?;
    Ok(hex::encode(b))
}

/// Creates or updates a user (`gantry user add`): over an existing user it is a new
/// password and role, and ends their sessions.
pub async fn add_user(
    store: &Store,
    name: &str,
    password: &str,
    role: Role,
) -> Result<(), AuthError> {
    validate_user_name(name)?;
    let password = password.to_string();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| AuthError::Hash(e.to_string()))??;
    store.put_user(name, &hash, role, wall_now_ms()).await?;
    Ok(())
}

/// Why a sign-in could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(transparent)]
    Busy(#[from] Busy),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Directory(#[from] ldap::LdapError),
}

/// What a sign-in came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignIn {
    /// Signed in as this user.
    User(UserRow),
    /// A wrong name or password, or a disabled user.
    Refused,
    /// The directory knows the user and their password, but no group of theirs has a role.
    NoRole,
}

impl SignIn {
    /// The user signed in, if any.
    pub fn user(self) -> Option<UserRow> {
        match self {
            SignIn::User(u) => Some(u),
            SignIn::Refused | SignIn::NoRole => None,
        }
    }
}

/// Signs `name` in if `password` is theirs and they are not disabled.
///
/// A local user (`gantry user add`) is checked against their hash only, so local admins
/// sign in whether or not the directory answers. Any other name goes to the directory when
/// one is configured ([`ldap::Directory::verify`]); its role is recorded at each sign-in.
/// Without a directory, an invalid or unknown name is verified against a decoy hash, and a
/// disabled user's password is verified all the same, so that a wrong name, a wrong
/// password and a disabled user take the same time.
pub async fn authenticate(
    store: &Store,
    pool: &HashPool,
    directory: Option<&ldap::Directory>,
    name: &str,
    password: String,
) -> Result<SignIn, SignInError> {
    let user = if validate_user_name(name).is_ok() {
        store.user(name).await?
    } else {
        None
    };
    if let Some(dir) = directory {
        let local = user.as_ref().is_some_and(|u| u.origin == Origin::Local);
        if !local && validate_user_name(name).is_ok() {
            return match dir.verify(name, &password).await? {
                ldap::Verdict::Refused => Ok(SignIn::Refused),
                ldap::Verdict::NoRole => Ok(SignIn::NoRole),
                ldap::Verdict::Member(role) => {
                    match store
                        .put_directory_user(name, Origin::Ldap, role, wall_now_ms())
                        .await?
                    {
                        DirectoryPut::Taken(o) => {
                            tracing::warn!(
                                origin = o.as_str(),
                                "a directory user's name is taken by another origin: not signed in"
                            );
                            Ok(SignIn::Refused)
                        }
                        DirectoryPut::RoleChanged => {
                            let was = user.as_ref().map_or("none", |u| u.role.as_str());
                            tracing::info!(user = %name, was, now = role.as_str(), "role changed by the directory's groups");
                            Ok(signed_in(store.user(name).await?))
                        }
                        DirectoryPut::Added | DirectoryPut::Same => {
                            Ok(signed_in(store.user(name).await?))
                        }
                    }
                }
            };
        }
    }
    let hash = user.as_ref().map(|u| u.password_hash.clone());
    // The decoy is made (once) on the pool too: never on a request's thread.
    let ok = pool
        .run(move || {
            let against: &str = match &hash {
                Some(h) => h,
                None => decoy_hash(),
            };
            verify_password_reusing(against, &password)
        })
        .await?
        .unwrap_or(false);
    Ok(signed_in(user.filter(|_| ok)))
}

fn signed_in(user: Option<UserRow>) -> SignIn {
    match user {
        Some(u) if !u.disabled => SignIn::User(u),
        _ => SignIn::Refused,
    }
}

/// Looks every signed-in directory user up again: a user the directory no longer knows,
/// or no longer gives a role, has their sessions ended; a changed role is recorded. A
/// directory that does not answer ends nothing (the error is returned, to be logged).
/// How many users' sessions ended.
pub async fn check_directory_users(
    store: &Store,
    dir: &ldap::Directory,
) -> Result<u64, SignInError> {
    let mut ended = 0;
    let users = store
        .directory_users_signed_in(Origin::Ldap, wall_now_ms())
        .await?;
    if users.is_empty() {
        // Nobody to look up: the directory is not called.
        return Ok(0);
    }
    let names: Vec<String> = users.iter().map(|(n, _)| n.clone()).collect();
    let now = dir.lookup_all(&names).await?;
    for ((name, role), now) in users.into_iter().zip(now) {
        match now {
            None => {
                let n = store.end_sessions(&name).await?;
                tracing::info!(user = %name, sessions = n, "the directory no longer gives this user a role: sessions ended");
                ended += 1;
            }
            Some(now) if now != role => {
                store
                    .put_directory_user(&name, Origin::Ldap, now, wall_now_ms())
                    .await?;
                tracing::info!(user = %name, was = role.as_str(), now = now.as_str(), "role changed by the directory's groups");
            }
            Some(_) => {}
        }
    }
    Ok(ended)
}

/// A new session of `user` from `now_ms`, ending `ttl_ms` later or when unused for
/// `idle_ms`: its token (the store keeps only its SHA-256).
pub async fn start_session(
    store: &Store,
    user: &str,
    now_ms: UnixMs,
    ttl_ms: i64,
    idle_ms: i64,
) -> Result<String, AuthError> {
    let (token, id) = (new_token()?, new_session_id()?);
    let digest = token_digest(&token);
    store
        .put_session(&digest, &id, user, now_ms, now_ms + ttl_ms, idle_ms)
        .await?;
    Ok(token)
}

/// The caller a session token stands for at `now_ms`: no one when it is unknown, expired,
/// idle too long, or its user is disabled.
pub async fn session_caller(
    store: &Store,
    token: &str,
    now_ms: UnixMs,
) -> Result<Caller, StoreError> {
    let digest = token_digest(token);
    Ok(match store.session_user(&digest, now_ms).await? {
        Some((user, role)) => Caller {
            user: Some(user),
            role: Some(role),
        },
        None => Caller::default(),
    })
}

/// Ends the session of `token`.
pub async fn end_session(store: &Store, token: &str) -> Result<(), StoreError> {
    store.delete_session(&token_digest(token)).await
}

/// The caller a name stands for (a trusted proxy's word): an invalid name, one unknown
/// here, or a disabled user, is signed in with no role, so nothing is allowed.
pub async fn named_caller(store: &Store, name: &str) -> Result<Caller, StoreError> {
    if validate_user_name(name).is_err() {
        return Ok(Caller::default());
    }
    Ok(match store.user(name).await? {
        Some(u) if !u.disabled => Caller {
            user: Some(u.name),
            role: Some(u.role),
        },
        _ => Caller::default(),
    })
}

/// The caller of a request, as the guard resolved it (in the request's extensions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub user: Option<String>,
    pub role: Option<Role>,
}

impl Caller {
    pub fn me(&self) -> Me {
        Me {
            user: self.user.clone(),
            role: self.role,
        }
    }
}

/// What a route requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anyone: sign-in, health, metrics, static files, the simulator's exporters (which
    /// stand in for hosts outside Gantry).
    Public,
    /// A signed-in user of any role, or anyone when anonymous reading is on.
    Read,
    /// An operator or an admin: every action and the audit log.
    Act,
    /// A manager or an admin: reports and costs.
    Report,
    /// An operator, a manager or an admin: reliability (interruptions and their causes).
    Reliability,
    /// An admin only: users and sessions (`/api/admin/`).
    Admin,
}

/// Server functions that only read; every other POST needs [`Access::Act`].
pub const READ_ONLY_POSTS: &[&str] = &[
    "/api/overview",
    "/api/nodes_view",
    "/api/me",
    "/api/node_detail",
    "/api/alerts_view",
    "/api/job_detail",
    "/api/timeline",
    "/api/job_history",
    "/api/alert_count",
    "/api/incidents_view",
    "/api/incident_detail",
    "/api/estimate_accuracy",
];

/// The access rule of `method path`. Default-deny: anything not a GET, HEAD or a listed
/// read needs an operator.
pub fn access_for(method: &Method, path: &str) -> Access {
    let public = matches!(
        path,
        "/healthz"
            | "/metrics"
            // Gantry's derived figures, for the site's Prometheus (which holds no session).
            | "/metrics/cluster"
            | "/login"
            | "/auth/login"
            | "/auth/logout"
            // The colour theme: a cookie on the caller's own browser (the sign-in page has it).
            | "/theme"
            // OpenID Connect: the redirect to the provider, and its return.
            | "/auth/oidc/login"
            | "/auth/oidc/callback"
            // The sign-in page's server function: whether single sign-on is offered.
            | "/api/sign_in_options"
            // The API's description (no data).
            | "/api/openapi.json"
            | "/robots.txt"
            | "/favicon.svg"
    ) || path.starts_with("/pkg/")
        || path.starts_with("/sim/exporter/")
        // Training jobs post here with the ingest token, which the handler checks.
        || path.starts_with("/api/ingest/");
    if public {
        return Access::Public;
    }
    if path.starts_with("/api/admin/")
        || path == "/api/admin"
        || path == "/api/admin_users"
        || path == "/admin"
    {
        return Access::Admin;
    }
    if path == "/reports"
        || path == "/api/reports"
        || path == "/api/report"
        || path.starts_with("/api/reports/")
    {
        return Access::Report;
    }
    if path == "/reliability"
        || path == "/api/reliability"
        || path == "/api/reliability_view"
        // Its charts (ETTR, the ledger) show what the page does.
        || path.starts_with("/api/reliability/")
    {
        return Access::Reliability;
    }
    if path.starts_with("/api/actions/")
        || path.starts_with("/api/alerts/")
        || path == "/api/audit"
        || path == "/audit"
        || path == "/api/remediation"
        || path == "/remediation"
    {
        return Access::Act;
    }
    if method == Method::GET || method == Method::HEAD || READ_ONLY_POSTS.contains(&path) {
        return Access::Read;
    }
    Access::Act
}

/// At most `per_minute` actions per user in any minute.
pub struct RateLimiter {
    per_minute: u32,
    seen: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> RateLimiter {
        RateLimiter {
            per_minute,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one action of `user`; `false` when over the limit (nothing counted).
    pub fn allow(&self, user: &str) -> bool {
        let Ok(mut seen) = self.seen.lock() else {
            return false;
        };
        let now = Instant::now();
        let q = seen.entry(user.to_string()).or_default();
        while q
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            q.pop_front();
        }
        if q.len() >= self.per_minute as usize {
            return false;
        }
        q.push_back(now);
        true
    }
}

/// Unused-token housekeeping: drops expired and idle sessions now and then.
pub async fn prune_sessions_now(store: &Store, now_ms: UnixMs) {
    match store.prune_sessions(now_ms).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(removed = n, "expired sessions removed"),
        Err(e) => tracing::warn!(error = %e, "session pruning failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No person may be `gantry` (any case): its drains carry the prefix policies own. An
    /// account may have the name.
    #[test]
    fn gantry_is_no_person_s_name() {
        for n in ["gantry", "Gantry", "GANTRY"] {
            assert!(
                matches!(validate_user_name(n), Err(AuthError::ReservedName)),
                "{n}"
            );
        }
        assert!(validate_user_name("gantry2").is_ok());
        assert!(lifecycle::validate_account("gantry").is_ok());
    }

    #[test]
    fn passwords_hash_and_verify() {
        let h = hash_password("correct horse battery").expect("hash");
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password(&h, "correct horse battery"));
        assert!(!verify_password(&h, "correct horse battery "));
        assert!(!verify_password("not a hash", "x"));
        assert!(matches!(
            hash_password("short"),
            Err(AuthError::BadPassword)
        ));
        // Two hashes of one password differ (fresh salt).
        assert_ne!(h, hash_password("correct horse battery").expect("hash"));
        // Verifying in reused memory agrees with argon2's own verifier, whatever the cost
        // of the hash (the memory grows for a costlier one) and whatever the password.
        use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
        let costly = argon2::Argon2::new(
            argon2::Algorithm::Argon2id,
            argon2::Version::V0x13,
            argon2::Params::new(32 * 1024, 1, 2, Some(24)).expect("params"),
        )
        .hash_password(
            b"another password",
            &SaltString::encode_b64(b"0123456789abcdef").expect("salt"),
        )
        .expect("hash")
        .to_string();
        let argon2i = argon2::Argon2::new(
            argon2::Algorithm::Argon2i,
            argon2::Version::V0x10,
            argon2::Params::new(8 * 1024, 2, 1, None).expect("params"),
        )
        .hash_password(
            b"old style hash",
            &SaltString::encode_b64(b"fedcba9876543210").expect("salt"),
        )
        .expect("hash")
        .to_string();
        for (hash, pw) in [
            (&h, "correct horse battery"),
            (&h, "correct horse batterz"),
            (&costly, "another password"),
            (&costly, "another passwor"),
            (&argon2i, "old style hash"),
            (&argon2i, "Old style hash"),
        ] {
            let theirs = PasswordHash::new(hash)
                .map(|p| Argon2::default().verify_password(pw.as_bytes(), &p).is_ok())
                .expect("parse");
            assert_eq!(verify_password_reusing(hash, pw), theirs, "{hash} {pw}");
        }
        assert!(verify_password_reusing(&costly, "another password"));
        assert!(!verify_password_reusing(
            "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$",
            "x"
        ));
    }

    #[test]
    fn policy_is_default_deny() {
        assert_eq!(access_for(&Method::GET, "/"), Access::Read);
        assert_eq!(access_for(&Method::GET, "/racks"), Access::Read);
        assert_eq!(access_for(&Method::POST, "/api/overview"), Access::Read);
        assert_eq!(access_for(&Method::POST, "/api/actions/drain"), Access::Act);
        assert_eq!(access_for(&Method::GET, "/api/audit"), Access::Act);
        assert_eq!(access_for(&Method::POST, "/api/anything_new"), Access::Act);
        assert_eq!(access_for(&Method::DELETE, "/"), Access::Act);
        assert_eq!(access_for(&Method::POST, "/auth/login"), Access::Public);
        assert_eq!(access_for(&Method::GET, "/reports"), Access::Report);
        assert_eq!(
            access_for(&Method::GET, "/reliability"),
            Access::Reliability
        );
        assert_eq!(
            access_for(&Method::POST, "/api/reliability_view"),
            Access::Reliability
        );
        assert_eq!(access_for(&Method::POST, "/api/report"), Access::Report);
        assert_eq!(
            access_for(&Method::GET, "/api/reliability/charts/ettr.svg"),
            Access::Reliability
        );
        assert_eq!(
            access_for(&Method::GET, "/api/reports/charts/cost.png"),
            Access::Report
        );
        assert_eq!(access_for(&Method::GET, "/pkg/gantry.js"), Access::Public);
        assert_eq!(access_for(&Method::GET, "/favicon.svg"), Access::Public);
        // Users and sessions: admins only, reading too.
        assert_eq!(access_for(&Method::GET, "/api/admin/users"), Access::Admin);
        assert_eq!(
            access_for(&Method::GET, "/api/admin/sessions"),
            Access::Admin
        );
        assert_eq!(
            access_for(&Method::POST, "/api/admin/users/x/role"),
            Access::Admin
        );
        assert_eq!(access_for(&Method::GET, "/api/adminx"), Access::Read);
        assert_eq!(access_for(&Method::GET, "/admin"), Access::Admin);
        assert_eq!(access_for(&Method::POST, "/api/admin_users"), Access::Admin);
    }

    #[test]
    fn the_rate_limit_counts_per_user() {
        let r = RateLimiter::new(2);
        assert!(r.allow("a"));
        assert!(r.allow("a"));
        assert!(!r.allow("a"));
        assert!(r.allow("b"));
    }
}
