//! `GET /auth/oidc/login` and `GET /auth/oidc/callback`: the browser's side of OpenID
//! Connect sign-in ([`crate::auth::oidc`] does the protocol).
//!
//! The callback is throttled per client address like the password form, checks the
//! sign-in's cookie before any request to the provider, and answers a success with a page
//! that moves on by itself: the session cookie is `SameSite=Strict`, which a browser does
//! not send on a redirect chain that began at the provider's site.

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::ApiError;
use super::guard::{
    client_addr, safe_next, secure_attr, start_session_cookie, try_later, urlencode, Peer,
};
use super::AppState;
use crate::auth::oidc::{Identity, OidcError, Pending, COOKIE, PENDING_SECONDS};
use crate::clock::wall_now_ms;
use crate::store::{DirectoryPut, Origin};

/// The throttle's name for failed single sign-ons (a client address's own count).
const THROTTLE_NAME: &str = "(single sign-on)";

#[derive(Deserialize)]
pub struct BeginQuery {
    next: Option<String>,
}

/// `GET /auth/oidc/login?next=/path`: to the provider, with this sign-in in a cookie.
pub async fn begin(
    State(st): State<AppState>,
    Query(q): Query<BeginQuery>,
) -> Result<Response, ApiError> {
    let Some(p) = &st.oidc else {
        return Err(ApiError::NotFound);
    };
    let next = safe_next(q.next.as_deref());
    match p.begin(&next).await {
        Ok((url, pending)) => {
            let mut resp = Redirect::to(&url).into_response();
            // Lax: the provider's redirect back is a top-level GET from its site.
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Lax; Path=/auth/oidc; Max-Age={PENDING_SECONDS}{}",
                pending.to_cookie(),
                secure_attr(&st)
            );
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            Ok(resp)
        }
        Err(e) => {
            tracing::warn!(error = %e, "single sign-on could not start");
            Ok(to_login(&st, "sso", &next))
        }
    }
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
}

/// Back to `/login` with `error` (the page's words for it), the sign-in's cookie cleared.
fn to_login(st: &AppState, error: &str, next: &str) -> Response {
    let mut resp =
        Redirect::to(&format!("/login?error={error}&next={}", urlencode(next))).into_response();
    clear_pending(st, &mut resp);
    resp
}

fn clear_pending(st: &AppState, resp: &mut Response) {
    let clear = format!(
        "{COOKIE}=; HttpOnly; SameSite=Lax; Path=/auth/oidc; Max-Age=0{}",
        secure_attr(st)
    );
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn pending_of(headers: &HeaderMap) -> Option<Pending> {
    Pending::from_cookie(&super::guard::cookie(headers, COOKIE)?)
}

/// `GET /auth/oidc/callback?code=…&state=…`: the provider's answer.
pub async fn callback(
    State(st): State<AppState>,
    axum::Extension(Peer(peer)): axum::Extension<Peer>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    let Some(p) = st.oidc.clone() else {
        return Err(ApiError::NotFound);
    };
    let addr = client_addr(&st, &headers, peer);
    let now = std::time::Instant::now();
    if let Some(wait) = st.throttle.wait(addr, THROTTLE_NAME, now) {
        st.live
            .metrics
            .sign_ins_throttled_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(try_later(&headers, wait, false));
    }
    let pending = pending_of(&headers);
    let next = pending
        .as_ref()
        .map_or("/", |p| p.next.as_str())
        .to_string();
    let failed = |why: &str| {
        st.throttle
            .failed(addr, THROTTLE_NAME, std::time::Instant::now());
        st.live
            .metrics
            .sign_ins_failed_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(client = %addr, why, "single sign-on refused");
    };
    if let Some(err) = &q.error {
        // RFC 6749 4.1.2.1: an error code of the provider's (logged bounded, as data).
        let code: String = err
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(64)
            .collect();
        failed(&format!("the provider answered {code}"));
        return Ok(to_login(
            &st,
            if code == "access_denied" {
                "denied"
            } else {
                "sso"
            },
            &next,
        ));
    }
    let (Some(pending), Some(code), Some(state)) = (pending, q.code.as_deref(), q.state.as_deref())
    else {
        failed("no sign-in under way in this browser, or no code");
        return Ok(to_login(&st, "sso", &next));
    };
    let identity = match p
        .finish(&pending, state, q.iss.as_deref(), code, wall_now_ms())
        .await
    {
        Ok(i) => i,
        Err(e) => {
            // Logged once, here; the browser is told only that single sign-on failed.
            tracing::warn!(error = %e, "single sign-on failed");
            if matches!(e, OidcError::Token(_) | OidcError::BadAnswer { .. }) {
                p.forget().await;
            }
            failed("the provider's answer did not verify");
            return Ok(to_login(&st, "sso", &next));
        }
    };
    let Identity { name, role } = identity;
    let Some(role) = role else {
        failed("no role for the user's claim");
        return Ok(to_login(&st, "norole", &next));
    };
    if crate::auth::validate_user_name(&name).is_err() {
        tracing::warn!(
            "the provider's user name claim is not a valid Gantry user name: not signed in"
        );
        failed("the user name claim cannot be a Gantry user");
        return Ok(to_login(&st, "sso", &next));
    }
    match st
        .store
        .put_directory_user(&name, Origin::Oidc, role, wall_now_ms())
        .await
        .map_err(ApiError::Storage)?
    {
        DirectoryPut::Taken(o) => {
            tracing::warn!(
                origin = o.as_str(),
                "a single sign-on user's name is taken by another origin: not signed in"
            );
            failed("the name is another origin's user");
            return Ok(to_login(&st, "sso", &next));
        }
        DirectoryPut::RoleChanged => {
            tracing::info!(user = %name, now = role.as_str(), "role changed by the provider's claim");
        }
        DirectoryPut::Added | DirectoryPut::Same => {}
    }
    let Some(user) = st
        .store
        .user(&name)
        .await
        .map_err(ApiError::Storage)?
        .filter(|u| !u.disabled)
    else {
        failed("the user is disabled here");
        return Ok(to_login(&st, "1", &next));
    };
    st.throttle.succeeded(addr, THROTTLE_NAME);
    let cookie = start_session_cookie(&st, &user).await?;
    let target = safe_next(Some(&next));
    let page = super::plain::signed_in(&user.name, &target);
    let mut resp = (StatusCode::OK, axum::response::Html(page)).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    clear_pending(&st, &mut resp);
    Ok(resp)
}
