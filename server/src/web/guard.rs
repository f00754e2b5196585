//! The guard in front of every route, and signing in and out.
//!
//! The guard resolves the caller (a trusted proxy's user header, else the session cookie),
//! refuses requests for a host name Gantry is not served under and state-changing requests
//! that do not come from Gantry's own pages ([`super::origins`]), and applies [`crate::auth::access_for`]: a page asked for by a browser
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
use super::live::Credential;
use super::{AppState, Routes};
use crate::auth::{access_for, Access, Caller};
use crate::clock::wall_now_ms;
use app::actions::{Me, Role};

/// The address of the connection's other end (the guard puts it in every request).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub Option<std::net::IpAddr>);

/// The session cookie's name.
pub const COOKIE: &str = "gantry_session";

pub(super) fn routes() -> Routes {
    vec![
        ("/auth/login", post(login)),
        ("/auth/logout", post(logout)),
        ("/auth/oidc/login", get(super::oidc::begin)),
        ("/auth/oidc/callback", get(super::oidc::callback)),
        ("/api/whoami", get(whoami)),
    ]
}

/// The session token of a request's cookie, if it has a well-formed one (for whoever
/// rechecks a long request's session: `auth::token_digest` of it is what
/// `Store::sessions_valid` takes).
pub(super) fn cookie_token(headers: &HeaderMap) -> Option<String> {
    cookie(headers, COOKIE).filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The value of the request's cookie `name`, if it sent one.
pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
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

/// The caller, and how they are signed in (for what must end when that ends).
async fn resolve(
    st: &AppState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
) -> Result<(Caller, Credential), ApiError> {
    if let Some(c) = proxy_user(st, headers, peer).await? {
        let cred = c.user.clone().map_or(Credential::None, Credential::Proxy);
        return Ok((c, cred));
    }
    let Some(token) = cookie_token(headers) else {
        return Ok((Caller::default(), Credential::None));
    };
    let caller = crate::auth::session_caller(&st.store, &token, wall_now_ms())
        .await
        .map_err(ApiError::Storage)?;
    let cred = if caller.user.is_some() {
        Credential::Session(crate::auth::token_digest(&token))
    } else {
        Credential::None
    };
    Ok((caller, cred))
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
    // A name Gantry is not served under (DNS rebinding) reaches nothing but what machines
    // call by address: health, metrics, and ingest (a bearer token, no cookie).
    let by_address = matches!(path.as_str(), "/healthz" | "/metrics" | "/metrics/cluster")
        || path.starts_with("/api/ingest/");
    if !by_address && !st.origins.host_allowed(req.headers()) {
        return ApiError::Rejected(
            axum::http::StatusCode::MISDIRECTED_REQUEST,
            "this host name is not one Gantry is served under (public_url)".into(),
        )
        .into_response();
    }
    let access = access_for(&method, &path);
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let (caller, credential) = match resolve(&st, req.headers(), peer).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let mutating = !(method == Method::GET || method == Method::HEAD);
    if mutating && access != Access::Public && !st.origins.same_origin(req.headers()) {
        return ApiError::Forbidden("cross-site request refused").into_response();
    }
    let allowed = match access {
        Access::Public => true,
        Access::Read => caller.role.is_some() || st.auth.anonymous_read,
        Access::Act => caller.role.is_some_and(Role::can_act),
        Access::Report => caller.role.is_some_and(Role::can_report),
        Access::Reliability => caller.role.is_some_and(Role::can_review_reliability),
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
        // A signed-in browser asking for a page its role may not open gets the page's
        // own answer: a page in Gantry's frame saying whom it is for (403). The page's data
        // is refused all the same: its server functions check the role themselves.
        let page = !mutating
            && wants_html(req.headers())
            && !path.starts_with("/api/")
            && !path.starts_with("/pkg/");
        if !page {
            return ApiError::Forbidden("your role does not allow this").into_response();
        }
    }
    // Server functions read `Me` (the app's type); handlers read `Caller`.
    req.extensions_mut().insert(Peer(peer));
    req.extensions_mut().insert(credential);
    req.extensions_mut().insert(caller.me());
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// `s` percent-encoded for a query value or path (`/` kept).
pub(super) use app::nav::query_encode as urlencode;

/// Where to go after signing in: a path of Gantry's own (never another site).
pub(super) fn safe_next(next: Option<&str>) -> String {
    next.and_then(app::nav::safe_next)
        .unwrap_or_else(|| "/".into())
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
}

/// The address a sign-in comes from: the peer, or the client a trusted proxy names in
/// `X-Forwarded-For` (its last entry, the one that proxy added).
pub(super) fn client_addr(
    st: &AppState,
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
) -> std::net::IpAddr {
    let unspecified = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    let Some(peer) = peer else {
        return unspecified;
    };
    if !st.auth.trusted_proxies.contains(&peer) {
        return peer;
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next_back()
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or(peer)
}

/// A sign-in refused for now: 429 with `Retry-After`, or 503 when the checker is busy; a
/// plain page for a browser's form, the error envelope for anything else.
pub(super) fn try_later(headers: &HeaderMap, wait: std::time::Duration, busy: bool) -> Response {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    let message = if busy {
        "Sign-in is busy checking other sign-ins. Try again in a moment.".to_string()
    } else {
        format!("Too many failed sign-ins. Try again in {secs} seconds.")
    };
    let mut resp = if wants_html(headers) {
        let status = if busy {
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        } else {
            axum::http::StatusCode::TOO_MANY_REQUESTS
        };
        let page = super::plain::try_later(message);
        (status, axum::response::Html(page)).into_response()
    } else if busy {
        ApiError::Busy(message).into_response()
    } else {
        ApiError::TooMany(message, secs).into_response()
    };
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    resp
}

/// `POST /auth/login` (form): a session cookie and a redirect, or back to `/login`. Failures
/// are throttled per client address and per name before any hashing (429), and the
/// hashing itself is bounded (503 when its queue is full).
pub async fn login(
    State(st): State<AppState>,
    axum::Extension(Peer(peer)): axum::Extension<Peer>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Result<Response, ApiError> {
    if !st.origins.same_origin(&headers) {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    let addr = client_addr(&st, &headers, peer);
    if let Some(wait) = st.throttle.wait(addr, &f.name, std::time::Instant::now()) {
        st.live
            .metrics
            .sign_ins_throttled_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(try_later(&headers, wait, false));
    }
    let signed = crate::auth::authenticate(
        &st.store,
        &st.hash_pool,
        st.directory.as_deref(),
        &f.name,
        f.password,
    )
    .await;
    let next = safe_next(f.next.as_deref());
    let refused = |st: &AppState, why: &str| {
        st.throttle.failed(addr, &f.name, std::time::Instant::now());
        st.live
            .metrics
            .sign_ins_failed_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The name as typed is not logged: a password typed into the name field would be.
        tracing::info!(client = %addr, why, "sign-in refused");
    };
    let user = match signed {
        Ok(crate::auth::SignIn::User(u)) => u,
        Ok(crate::auth::SignIn::Refused) => {
            refused(&st, "wrong name or password");
            let to = format!("/login?error=1&next={}", urlencode(&next));
            return Ok(Redirect::to(&to).into_response());
        }
        Ok(crate::auth::SignIn::NoRole) => {
            refused(&st, "no group of the user's maps to a role");
            let to = format!("/login?error=norole&next={}", urlencode(&next));
            return Ok(Redirect::to(&to).into_response());
        }
        Err(crate::auth::SignInError::Busy(_)) => {
            st.live
                .metrics
                .sign_ins_throttled_total
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(try_later(&headers, std::time::Duration::from_secs(1), true));
        }
        Err(crate::auth::SignInError::Store(e)) => return Err(ApiError::Storage(e)),
        Err(crate::auth::SignInError::Directory(crate::auth::ldap::LdapError::Busy)) => {
            st.live
                .metrics
                .sign_ins_throttled_total
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(try_later(&headers, std::time::Duration::from_secs(1), true));
        }
        Err(crate::auth::SignInError::Directory(e)) => {
            // Logged once here; the browser learns only that the directory is down.
            tracing::warn!(error = %e, "LDAP sign-in failed");
            let to = format!("/login?error=directory&next={}", urlencode(&next));
            return Ok(Redirect::to(&to).into_response());
        }
    };
    st.throttle.succeeded(addr, &user.name);
    // Signing in over a session (another user in the same browser, or the same again)
    // ends the one the browser held: a cookie replaced is a session nobody can end.
    if let Some(old) = cookie_token(&headers) {
        crate::auth::end_session(&st.store, &old)
            .await
            .map_err(ApiError::Storage)?;
    }
    let cookie = start_session_cookie(&st, &user).await?;
    let mut resp = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(resp)
}

/// Starts a session of `user` (logged as signed in): its `Set-Cookie` value.
pub(super) async fn start_session_cookie(
    st: &AppState,
    user: &crate::store::UserRow,
) -> Result<String, ApiError> {
    let ttl_ms = st.auth.session_hours as i64 * 3_600_000;
    let idle_ms = st.auth.session_idle_minutes as i64 * 60_000;
    let token =
        crate::auth::start_session(&st.store, &user.name, wall_now_ms(), ttl_ms, idle_ms).await?;
    tracing::info!(user = %user.name, role = user.role.as_str(), origin = user.origin.as_str(), "signed in");
    Ok(format!(
        "{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        ttl_ms / 1000,
        secure_attr(st)
    ))
}

/// `; Secure` when cookies must be (HTTPS here or at a proxy in front).
pub(super) fn secure_attr(st: &AppState) -> &'static str {
    if st.auth.secure_cookies || st.tls {
        "; Secure"
    } else {
        ""
    }
}

/// `POST /auth/logout`: ends the session.
pub async fn logout(State(st): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if !st.origins.same_origin(&headers) {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    let mut to = "/login".to_string();
    if let Some(token) = cookie_token(&headers) {
        // A user who came through the OpenID provider is signed out there too.
        if let Some(p) = &st.oidc {
            let caller = crate::auth::session_caller(&st.store, &token, wall_now_ms())
                .await
                .map_err(ApiError::Storage)?;
            if let Some(name) = caller.user {
                let user = st.store.user(&name).await.map_err(ApiError::Storage)?;
                if user.is_some_and(|u| u.origin == crate::store::Origin::Oidc) {
                    if let Some(url) = p.logout_url().await {
                        to = url;
                    }
                }
            }
        }
        crate::auth::end_session(&st.store, &token)
            .await
            .map_err(ApiError::Storage)?;
    }
    let mut resp = Redirect::to(&to).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("gantry_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    );
    Ok(resp)
}

/// `GET /api/whoami`: the caller.
#[utoipa::path(get, path = "/api/whoami", tag = "session",
    responses((status = 200, description = "who is signed in (both null when anonymous)", body = app::actions::Me)))]
pub async fn whoami(c: Caller) -> Json<Me> {
    Json(c.me())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_redirects() {
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

        assert_eq!(safe_next(Some("/nodes/gpu001")), "/nodes/gpu001");
        assert_eq!(safe_next(None), "/");
    }

    /// What a browser makes of a `Location: next` on Gantry's page: parsed by a WHATWG URL
    /// parser relative to the page, as browsers do.
    fn browser_goes_to(next: &str) -> url::Url {
        let base = url::Url::parse("https://gantry.example:8443/login?next=x").expect("base");
        base.join(next)
            .unwrap_or_else(|_| url::Url::parse("about:blank").expect("url"))
    }

    fn same_origin_url(u: &url::Url) -> bool {
        u.origin()
            == url::Url::parse("https://gantry.example:8443/")
                .expect("url")
                .origin()
    }

    /// `next` as the form decoder hands it over: each case is written as a browser would send
    /// it in the form (percent-encoded), then decoded, so `%09` is a real tab.
    fn decoded(form_value: &str) -> String {
        url::form_urlencoded::parse(format!("next={form_value}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    }

    #[test]
    fn next_keeps_only_gantry_paths_as_a_browser_reads_them() {
        // (as sent in the form, where it must lead)
        let table: &[(&str, &str)] = &[
            ("%2Fnodes%2Fgpu001", "/nodes/gpu001"),
            ("/jobs?state=running", "/jobs"),
            // Percent-encoded in the value itself: the parser never decodes a path.
            ("/%252F%252Fevil.example", "/%2F%2Fevil.example"),
            ("/%255Cevil.example", "/%5Cevil.example"),
            // Encoded once, the form decodes them: `///` and `/\`.
            ("/%2F%2Fevil.example", "/"),
            ("/%5Cevil.example", "/"),
            ("/%25%30%39/evil.example", "/%09/evil.example"),
            ("/r%C3%A9seau", "/r%C3%A9seau"),
            ("/%EF%BC%8Fevil.example", "/%EF%BC%8Fevil.example"),
            // Encoded whitespace and control characters, which a browser strips or refuses.
            ("/%09/evil.example", "/"),
            ("/%0A/evil.example", "/"),
            ("/%0D/evil.example", "/"),
            ("%09//evil.example", "/"),
            ("%20//evil.example", "/"),
            ("/%00/evil.example", "/"),
            ("/%0C/evil.example", "/"),
            ("/%1F/evil.example", "/"),
            ("/%7F/evil.example", "/"),
            ("/x%0A", "/"),
            ("/%C2%A0/evil.example", "/"),
            ("/%E2%80%A8/evil.example", "/"),
            // Backslashes, doubled slashes, schemes, userinfo, IDNA.
            ("%5C%5Cevil.example", "/"),
            ("/%5C/evil.example", "/"),
            ("%5C/evil.example", "/"),
            ("//evil.example", "/"),
            ("///evil.example", "/"),
            ("//evil.example/%2E%2E", "/"),
            ("https://evil.example", "/"),
            ("https:evil.example", "/"),
            ("HTTPS://evil.example", "/"),
            ("javascript:alert(1)", "/"),
            ("data:text/html,x", "/"),
            ("//user:pass@evil.example", "/"),
            ("https://gantry.example:8443@evil.example/", "/"),
            ("//%C3%A9vil.example", "/"),
            ("//%EF%BD%85vil.example", "/"),
            ("//xn--vil-epa.example", "/"),
            ("evil.example", "/"),
            ("", "/"),
        ];
        for (sent, want) in table {
            let next = decoded(sent);
            let got = safe_next(Some(&next));
            let went = browser_goes_to(&got);
            assert!(same_origin_url(&went), "{sent:?} -> {got:?} leaves: {went}");
            assert_eq!(went.path(), *want, "{sent:?} -> {got:?}");
            // The login page's own form keeps exactly what the server keeps.
            assert_eq!(
                app::nav::safe_next(&next).unwrap_or_else(|| "/".into()),
                got,
                "{sent:?}"
            );
            // The header the redirect needs can be built from it (ASCII only).
            assert!(HeaderValue::from_str(&got).is_ok(), "{got:?}");
        }
    }

    #[test]
    fn no_character_after_a_slash_leads_off_site() {
        // Every character in the places an attacker would put it, checked by the parser.
        let mut chars: Vec<char> = (0u8..=127).map(char::from).collect();
        chars.extend([
            '\u{a0}', '\u{85}', '\u{2028}', '\u{3000}', '\u{ff0f}', '\u{ff3c}', '\u{feff}',
        ]);
        for c in chars {
            for next in [
                format!("/{c}/evil.example"),
                format!("{c}//evil.example"),
                format!("/{c}{c}evil.example"),
                format!("//{c}evil.example"),
                format!("/{c}\\evil.example"),
            ] {
                let got = safe_next(Some(&next));
                let went = browser_goes_to(&got);
                assert!(same_origin_url(&went), "{next:?} -> {got:?} leaves: {went}");
            }
        }
    }
}
