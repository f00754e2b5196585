//! The guard in front of every route, and signing in and out.
//!
//! The guard resolves the caller (a trusted proxy's user header, else the session cookie),
//! refuses state-changing requests that do not come from Gantry's own pages (Origin /
//! Sec-Fetch-Site), and applies [`crate::auth::access_for`]: a page asked for by a browser
//! that is not signed in is redirected to `/login`, anything else refused in the error
//! envelope. Users, sessions and the rule itself are `crate::auth`'s.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Json};
use serde::Deserialize;

use super::error::ApiError;
use super::{AppState, Routes};
use crate::auth::{access_for, Access, Caller};
use crate::live::wall_now_ms;
use app::actions::{Me, Role};

/// The session cookie's name.
pub const COOKIE: &str = "gantry_session";

pub(super) fn routes() -> Routes {
    vec![
        ("/auth/login", post(login)),
        ("/auth/logout", post(logout)),
        ("/api/whoami", get(whoami)),
    ]
}

/// The session token of a request's cookie, if it has a well-formed one (for whoever
/// rechecks a long request's session: `auth::token_digest` of it is what
/// `Store::sessions_valid` takes).
pub(super) fn cookie_token(headers: &HeaderMap) -> Option<String> {
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
    let caller = crate::auth::named_caller(&st.store, name)
        .await
        .map_err(ApiError::Storage)?;
    Ok(Some(caller))
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
    crate::auth::session_caller(&st.store, &token, wall_now_ms())
        .await
        .map_err(ApiError::Storage)
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
        Access::Admin => caller.role == Some(Role::Admin),
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
    let user = crate::auth::authenticate(&st.store, &f.name, f.password)
        .await
        .map_err(ApiError::Storage)?;
    let next = safe_next(f.next.as_deref());
    let Some(user) = user else {
        tracing::info!(user = %f.name.chars().take(64).collect::<String>(), "sign-in refused");
        let to = format!("/login?error=1&next={}", urlencode(&next));
        return Ok(Redirect::to(&to).into_response());
    };
    let ttl_ms = st.auth.session_hours as i64 * 3_600_000;
    let idle_ms = st.auth.session_idle_minutes as i64 * 60_000;
    let token =
        crate::auth::start_session(&st.store, &user.name, wall_now_ms(), ttl_ms, idle_ms).await?;
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
        crate::auth::end_session(&st.store, &token)
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
pub async fn whoami(c: Caller) -> Json<Me> {
    Json(c.me())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
