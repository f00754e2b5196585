//! `POST /theme`: keeps the user's colour theme (dark or light, [`app::theme`]) in a cookie
//! and sends the browser back to the page it came from. Open to anyone who may see a page
//! (the sign-in page has the button too); a form from another site is refused.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::Form;
use serde::Deserialize;

use super::error::ApiError;
use super::{AppState, Routes};
use app::theme::{Theme, COOKIE};

pub(super) fn routes() -> Routes {
    vec![("/theme", post(set_theme))]
}

#[derive(Deserialize)]
pub struct ThemeForm {
    theme: String,
    /// The page to go back to: a path on this site ([`app::nav::safe_next`]), else `/`.
    #[serde(default)]
    back: String,
}

/// A year: the choice outlives sessions.
const KEEP_S: u32 = 365 * 86_400;

async fn set_theme(
    State(st): State<AppState>,
    headers: HeaderMap,
    Form(f): Form<ThemeForm>,
) -> Result<Response, ApiError> {
    if !st.origins.same_origin(&headers) {
        return Err(ApiError::Forbidden("cross-site request refused"));
    }
    let theme = Theme::parse(&f.theme)
        .ok_or_else(|| ApiError::BadRequest("theme must be dark or light".into()))?;
    let back = app::nav::safe_next(&f.back).unwrap_or_else(|| "/".into());
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={KEEP_S}{}",
        theme.as_str(),
        super::guard::secure_attr(&st)
    );
    let mut resp = Redirect::to(&back).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&cookie).map_err(|e| ApiError::Internal(e.to_string()))?,
    );
    Ok(resp)
}

/// The theme a request's cookie chose (for what the server draws: charts served as images).
pub(super) fn of_request(headers: &HeaderMap) -> Theme {
    Theme::of_cookies(
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()),
    )
}
