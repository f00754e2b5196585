//! Who is calling and what they may do.
//!
//! Local users with argon2id password hashes; a random session token in an HttpOnly,
//! SameSite=Strict cookie, of which only a SHA-256 is stored. One guard runs in front of
//! every route and decides by [`access_for`], which is default-deny: a new route that is not
//! a plain read needs an operator unless it is named here. State-changing requests must also
//! come from Gantry's own pages (Origin / Sec-Fetch-Site), so a cross-site form cannot act.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use app::actions::{Me, Role};
use app::model::UnixMs;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::live::wall_now_ms;
use crate::store::Store;
use crate::web::error::ApiError;
use crate::web::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "gantry_session";

/// Longest user name and password accepted.
const MAX_NAME: usize = 64;
const MAX_PASSWORD: usize = 1024;
/// Shortest password `gantry user add` accepts.
pub const MIN_PASSWORD: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid user name: 1 to 64 of letters, digits, '.', '_', '-'")]
    BadName,
    #[error("password must be {MIN_PASSWORD} to {MAX_PASSWORD} characters")]
    BadPassword,
    #[error("password hashing failed: {0}")]
    Hash(String),
    #[error("no secure random numbers: {0}")]
    Random(String),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
}

pub fn validate_user_name(name: &str) -> Result<(), AuthError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(AuthError::BadName)
    }
}

/// An argon2id hash (PHC string) of `password` with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    if password.chars().count() < MIN_PASSWORD || password.len() > MAX_PASSWORD {
        return Err(AuthError::BadPassword);
    }
    let mut salt = [0u8; 16];
    getrandom::getrandom(&mut salt).map_err(|e| AuthError::Random(e.to_string()))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| AuthError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| AuthError::Hash(e.to_string()))
}

/// Whether `password` matches `hash`. A malformed hash never matches.
pub fn verify_password(hash: &str, password: &str) -> bool {
    if password.len() > MAX_PASSWORD {
        return false;
    }
    PasswordHash::new(hash)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
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

fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Creates or updates a user (`gantry user add`).
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
];

/// The access rule of `method path`. Default-deny: anything not a GET, HEAD or a listed
/// read needs an operator.
pub fn access_for(method: &Method, path: &str) -> Access {
    let public = matches!(
        path,
        "/healthz"
            | "/metrics"
            | "/login"
            | "/auth/login"
            | "/auth/logout"
            | "/robots.txt"
            | "/favicon.svg"
    ) || path.starts_with("/pkg/")
        || path.starts_with("/sim/exporter/")
        // Training jobs post here with the ingest token, which the handler checks.
        || path.starts_with("/api/ingest/");
    if public {
        return Access::Public;
    }
    if path == "/reports"
        || path == "/api/reports"
        || path == "/api/report"
        || path.starts_with("/api/reports/")
    {
        return Access::Report;
    }
    if path.starts_with("/api/actions/")
        || path.starts_with("/api/alerts/")
        || path == "/api/audit"
        || path == "/audit"
    {
        return Access::Act;
    }
    if method == Method::GET || method == Method::HEAD || READ_ONLY_POSTS.contains(&path) {
        return Access::Read;
    }
    Access::Act
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether a state-changing request comes from Gantry's own pages: a browser sends
/// `Sec-Fetch-Site` and `Origin` on cross-site posts, and both must then say same-origin.
/// Tools that send neither (curl, tests) pass; they hold the cookie themselves.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(origin) => {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let origin_host = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .unwrap_or("");
            !host.is_empty() && origin_host == host
        }
    }
}

/// The user a trusted reverse proxy names, if one is configured and this peer is it.
async fn proxy_user(
    st: &AppState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
) -> Result<Option<Caller>, ApiError> {
    let Some(h) = st.auth.proxy_header.as_deref() else {
        return Ok(None);
    };
    let Some(name) = headers.get(h).and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    if !peer.is_some_and(|p| st.auth.trusted_proxies.contains(&p)) {
        tracing::debug!(peer = ?peer, "proxy user header from an untrusted peer ignored");
        return Ok(None);
    }
    if validate_user_name(name).is_err() {
        return Ok(Some(Caller::default()));
    }
    let user = st.store.user(name).await.map_err(ApiError::Storage)?;
    Ok(Some(match user {
        Some(u) => Caller {
            user: Some(u.name),
            role: Some(u.role),
        },
        // Signed in at the proxy, unknown here: no role, so nothing is allowed.
        None => Caller::default(),
    }))
}

async fn resolve(
    st: &AppState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
) -> Result<Caller, ApiError> {
    if let Some(c) = proxy_user(st, headers, peer).await? {
        return Ok(c);
    }
    let Some(token) = cookie_token(headers) else {
        return Ok(Caller::default());
    };
    let found = st
        .store
        .session_user(&digest(&token), wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    Ok(match found {
        Some((user, role)) => Caller {
            user: Some(user),
            role: Some(role),
        },
        None => Caller::default(),
    })
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// The guard in front of every route.
pub async fn guard(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let access = access_for(&method, &path);
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let caller = match resolve(&st, req.headers(), peer).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let mutating = !(method == Method::GET || method == Method::HEAD);
    if mutating && access != Access::Public && !same_origin(req.headers()) {
        return ApiError::Forbidden("cross-site request refused").into_response();
    }
    let allowed = match access {
        Access::Public => true,
        Access::Read => caller.role.is_some() || st.auth.anonymous_read,
        Access::Act => caller.role.is_some_and(Role::can_act),
        Access::Report => caller.role.is_some_and(Role::can_report),
    };
    if !allowed {
        if caller.role.is_none() {
            if !mutating && wants_html(req.headers()) {
                let next = urlencode(&path);
                return Redirect::to(&format!("/login?next={next}")).into_response();
            }
            return ApiError::Unauthenticated.into_response();
        }
        return ApiError::Forbidden("your role does not allow this").into_response();
    }
    // Server functions read `Me` (the app's type); handlers read `Caller`.
    req.extensions_mut().insert(caller.me());
    req.extensions_mut().insert(caller);
    next.run(req).await
}

fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where to go after signing in: a local path only (never another site).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.into(),
        _ => "/".into(),
    }
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
}

/// `POST /auth/login` (form): a session cookie and a redirect, or back to `/login`.
pub async fn login(
    State(st): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Result<Response, ApiError> {
    if !same_origin(&headers) {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    let user = if validate_user_name(&f.name).is_ok() {
        st.store.user(&f.name).await.map_err(ApiError::Storage)?
    } else {
        None
    };
    let hash = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| decoy_hash().to_string());
    let password = f.password;
    let ok = tokio::task::spawn_blocking(move || verify_password(&hash, &password))
        .await
        .unwrap_or(false);
    let next = safe_next(f.next.as_deref());
    let Some(user) = user.filter(|_| ok) else {
        tracing::info!(user = %f.name.chars().take(64).collect::<String>(), "sign-in refused");
        let to = format!("/login?error=1&next={}", urlencode(&next));
        return Ok(Redirect::to(&to).into_response());
    };
    let token = new_token().map_err(|e| ApiError::Internal(e.to_string()))?;
    let now = wall_now_ms();
    let ttl_ms = st.auth.session_hours as i64 * 3_600_000;
    st.store
        .put_session(&digest(&token), &user.name, now, now + ttl_ms)
        .await
        .map_err(ApiError::Storage)?;
    tracing::info!(user = %user.name, role = user.role.as_str(), "signed in");
    let cookie = format!(
        "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        ttl_ms / 1000,
        if st.auth.secure_cookies {
            "; Secure"
        } else {
            ""
        }
    );
    let mut resp = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(resp)
}

/// `POST /auth/logout`: ends the session.
pub async fn logout(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if !same_origin(&headers) {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    if let Some(token) = cookie_token(&headers) {
        st.store
            .delete_session(&digest(&token))
            .await
            .map_err(ApiError::Storage)?;
    }
    let mut resp = Redirect::to("/login").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("gantry_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    Ok(resp)
}

/// `GET /api/whoami`: the caller.
pub async fn whoami(axum::Extension(c): axum::Extension<Caller>) -> Json<Me> {
    Json(c.me())
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

/// Unused-token housekeeping: drops expired sessions now and then.
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
        assert_eq!(access_for(&Method::POST, "/api/report"), Access::Report);
        assert_eq!(
            access_for(&Method::GET, "/api/reports/charts/cost.png"),
            Access::Report
        );
        assert_eq!(access_for(&Method::GET, "/pkg/gantry.js"), Access::Public);
        assert_eq!(access_for(&Method::GET, "/favicon.svg"), Access::Public);
    }

    #[test]
    fn cookies_origins_and_redirects() {
        let mut h = HeaderMap::new();
        let t = "ab".repeat(32);
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("x=1; {COOKIE}={t}")).expect("header"),
        );
        assert_eq!(cookie_token(&h), Some(t));
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("gantry_session=../../etc"),
        );
        assert_eq!(cookie_token(&h), None);

        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("gantry:3000"));
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://gantry:3000"),
        );
        assert!(same_origin(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&h));
        let mut h = HeaderMap::new();
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&h));

        assert_eq!(safe_next(Some("/nodes/gpu001")), "/nodes/gpu001");
        assert_eq!(safe_next(Some("//evil.example")), "/");
        assert_eq!(safe_next(Some("https://evil.example")), "/");
        assert_eq!(safe_next(None), "/");
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
