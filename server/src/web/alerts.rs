//! Alerts as the store keeps them: the list, acknowledgement, silencing.

use app::model::UnixMs;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{JsonBody, Path, Query};
use super::{AppState, Routes};
use crate::auth::Caller;
use crate::clock::wall_now_ms;

pub(super) fn routes() -> Routes {
    vec![
        ("/api/alerts", get(alerts_list)),
        ("/api/incidents", get(incidents_list)),
        ("/api/incidents/{id}", get(incident_get)),
        ("/api/alerts/{id}/ack", post(alert_ack)),
        ("/api/alerts/{id}/silence", post(alert_silence)),
        ("/api/alerts/{id}/unsilence", post(alert_unsilence)),
    ]
}

use crate::alerts::check_note;

/// When a silence of `minutes` from `now_ms` ends: from a minute to a week.
pub(super) fn silence_until(minutes: u32, now_ms: UnixMs) -> Result<UnixMs, &'static str> {
    if !(1..=7 * 24 * 60).contains(&minutes) {
        return Err("minutes: 1 to 10080");
    }
    Ok(now_ms + i64::from(minutes) * 60_000)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct AlertsQuery {
    limit: Option<u32>,
}

/// `GET /api/alerts`: firing alerts first, then recent history.
/// `GET /api/alerts`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct AlertsAnswer {
    /// Alerts firing and not silenced.
    firing: u32,
    alerts: Vec<app::views::AlertItem>,
}

/// Firing alerts first, then recent ones (`limit`, default 200).
#[utoipa::path(get, path = "/api/alerts", tag = "alerts", params(AlertsQuery),
    responses((status = 200, description = "alerts", body = AlertsAnswer)))]
async fn alerts_list(
    State(st): State<AppState>,
    Query(q): Query<AlertsQuery>,
) -> Result<Response, ApiError> {
    let rows = st
        .store
        .alerts(q.limit.unwrap_or(200).clamp(1, 5000))
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(AlertsAnswer {
        firing: st.live.alerts_firing(),
        alerts: rows,
    })
    .into_response())
}

/// The open incidents: each failure once, with the alerts it holds, the nodes, racks and
/// running jobs it hits (their last checkpoint, the work at risk) and what to do; critical
/// first, then newest first, acknowledged ones after the others of their severity.
#[utoipa::path(get, path = "/api/incidents", tag = "alerts",
    responses((status = 200, description = "open incidents", body = app::views::IncidentsView)))]
async fn incidents_list(State(st): State<AppState>) -> Result<Response, ApiError> {
    let incidents = crate::alerts::incidents::open(&st.store, &st.live)
        .await
        .map_err(ApiError::Storage)?;
    Ok(Json(app::views::IncidentsView { incidents }).into_response())
}

/// One incident (by its cause's alert id) and its timeline: firings, acknowledgements,
/// policies' decisions, its resolution, and for operators and admins the audited actions
/// that name it. 404 when there is no such alert.
#[utoipa::path(get, path = "/api/incidents/{id}", tag = "alerts",
    params(("id" = i64, Path, description = "the incident (its cause's alert id)")),
    responses((status = 200, description = "the incident and its timeline", body = app::views::IncidentDetail)))]
async fn incident_get(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let with_audit = c.role.is_some_and(app::actions::Role::can_act);
    let d = crate::alerts::timeline::detail(&st.store, &st.live, id, with_audit)
        .await
        .map_err(ApiError::Storage)?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(d).into_response())
}

/// What an operator does to an alert without touching the cluster: each is audited.
pub(super) enum Mute<'a> {
    Ack { note: &'a str },
    Silence { minutes: u32, note: &'a str },
    Unsilence { note: &'a str },
}

impl Mute<'_> {
    fn action(&self) -> &'static str {
        match self {
            Mute::Ack { .. } => "alert_ack",
            Mute::Silence { .. } => "alert_silence",
            Mute::Unsilence { .. } => "alert_unsilence",
        }
    }
}

/// Acknowledges, silences or unsilences alert `id` as `user` with `role`: the audit row is
/// written first (actor, role, note, duration), then the change, then the row's outcome.
/// `Ok(None)`: no such alert.
pub(super) async fn mute(
    store: &crate::store::Store,
    user: &str,
    role: app::actions::Role,
    id: i64,
    what: Mute<'_>,
) -> Result<Option<app::views::AlertItem>, ApiError> {
    let now = wall_now_ms();
    let (note, until, duration) = match &what {
        Mute::Ack { note } => (*note, None, String::new()),
        Mute::Silence { minutes, note } => {
            let until = silence_until(*minutes, now).map_err(|m| ApiError::BadRequest(m.into()))?;
            (
                *note,
                Some(until),
                format!("{minutes} min, until {}; ", app::units::utc(until)),
            )
        }
        Mute::Unsilence { note } => (*note, None, String::new()),
    };
    check_note(note).map_err(|m| ApiError::BadRequest(m.into()))?;
    let Some(alert) = store.alert(id).await.map_err(ApiError::Storage)? else {
        return Ok(None);
    };
    let target = format!("alert {id}: {} {}", alert.rule, alert.subject);
    let detail = format!("{duration}note: {note}");
    let audit = store
        .audit_begin(now, user, role, what.action(), &target, &detail)
        .await
        .map_err(ApiError::Storage)?;
    let done = match &what {
        Mute::Ack { note } => store.ack_alert(id, user, note, now).await,
        Mute::Silence { note, .. } => store.silence_alert(id, until, user, note, now).await,
        Mute::Unsilence { note } => store.silence_alert(id, None, user, note, now).await,
    };
    let (status, result) = match &done {
        Ok(true) => ("ok", "done".to_string()),
        Ok(false) => ("failed", "no such alert".to_string()),
        Err(_) => ("failed", "storage unavailable".to_string()),
    };
    if let Err(e) = store
        .audit_finish(audit, status, &result, wall_now_ms())
        .await
    {
        tracing::error!(error = %e, audit_id = audit, "audit row could not be completed");
    }
    tracing::info!(user, action = what.action(), target, status, "alert muted");
    if !done.map_err(ApiError::Storage)? {
        return Ok(None);
    }
    store.alert(id).await.map_err(ApiError::Storage)
}

/// A mute by the request's caller, answered with the alert (404 if there is none).
async fn mute_as(st: &AppState, c: &Caller, id: i64, what: Mute<'_>) -> Result<Response, ApiError> {
    let (Some(user), Some(role)) = (&c.user, c.role) else {
        return Err(ApiError::Unauthenticated);
    };
    let row = mute(&st.store, user, role, id, what)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(Json(row).into_response())
}

#[derive(Deserialize, utoipa::ToSchema)]
struct AckBody {
    /// Why (at most 1000 characters, no control characters).
    #[serde(default)]
    note: String,
}

/// `POST /api/alerts/{id}/ack` `{"note": "…"}`: who acknowledged, when, why (audited).
#[utoipa::path(post, path = "/api/alerts/{id}/ack", tag = "alerts", request_body = AckBody,
    params(("id" = i64, Path, description = "the alert")),
    responses((status = 200, description = "the alert", body = app::views::AlertItem)))]
async fn alert_ack(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<AckBody>,
) -> Result<Response, ApiError> {
    mute_as(&st, &c, id, Mute::Ack { note: &b.note }).await
}

#[derive(Deserialize, utoipa::ToSchema)]
struct SilenceBody {
    /// How long: 1 to 10080 minutes (a week).
    #[schema(minimum = 1, maximum = 10080)]
    #[serde(deserialize_with = "app::actions::whole::u32")]
    minutes: u32,
    /// Why (at most 1000 characters, no control characters).
    #[serde(default)]
    note: String,
}

/// `POST /api/alerts/{id}/silence` `{"minutes": 60, "note": "…"}`: no deliveries or badge
/// until then (audited, with who and why).
#[utoipa::path(post, path = "/api/alerts/{id}/silence", tag = "alerts", request_body = SilenceBody,
    params(("id" = i64, Path, description = "the alert")),
    responses((status = 200, description = "the alert", body = app::views::AlertItem)))]
async fn alert_silence(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<SilenceBody>,
) -> Result<Response, ApiError> {
    let what = Mute::Silence {
        minutes: b.minutes,
        note: &b.note,
    };
    mute_as(&st, &c, id, what).await
}

/// `POST /api/alerts/{id}/unsilence` `{"note": "…"}`: ends a silence now (audited).
#[utoipa::path(post, path = "/api/alerts/{id}/unsilence", tag = "alerts", request_body = AckBody,
    params(("id" = i64, Path, description = "the alert")),
    responses((status = 200, description = "the alert", body = app::views::AlertItem)))]
async fn alert_unsilence(
    State(st): State<AppState>,
    c: Caller,
    Path(id): Path<i64>,
    JsonBody(b): JsonBody<AckBody>,
) -> Result<Response, ApiError> {
    mute_as(&st, &c, id, Mute::Unsilence { note: &b.note }).await
}
