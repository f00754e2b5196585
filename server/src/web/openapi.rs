//! `GET /api/openapi.json`: the OpenAPI 3.1 description of Gantry's JSON API, generated
//! from the handlers' own annotations and the types they serialize (utoipa), each
//! operation marked with the roles that may call it (`x-gantry-roles`, from
//! [`crate::auth::access_for`], the rule the guard applies) and the error envelope.
//!
//! Not described: the pages, `/auth/*` (form posts and redirects for browsers), the
//! simulator's routes, and the pages' server functions (`POST /api/{name}`, the app's
//! internal calls, whose arguments follow Leptos's encoding and may change with it).

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::OpenApi;

use super::Routes;
use crate::auth::{access_for, Access};
use app::actions::Role;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Gantry",
        description = "The JSON API of Gantry, the live console of a GPU training cluster. Sign in with the form at /login (the session cookie gantry_session), or through the trusted proxy's header; training jobs post to /api/ingest with an ingest token. Every operation lists the roles that may call it in x-gantry-roles (anonymous: when anonymous reading is on; ingest-token: only a bearer ingest token, never a session). Errors answer with the ErrorBody envelope.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    paths(
        super::health::healthz,
        super::guard::whoami,
        super::live::live_sse,
        super::cluster::targets,
        super::cluster::history,
        super::cluster::history_svg,
        super::cluster::job_activity_svg,
        super::cluster::throttling_svg,
        super::cluster::nodes,
        super::cluster::jobs,
        super::cluster::segments,
        super::cluster::placement,
        super::actions::action_preview,
        super::actions::action_drain,
        super::actions::action_resume,
        super::actions::action_requeue,
        super::actions::action_status,
        super::actions::audit,
        super::alerts::alerts_list,
        super::alerts::alert_ack,
        super::alerts::alert_silence,
        super::alerts::alert_unsilence,
        super::reports::report_get,
        super::reports::report_chart,
        super::reliability::reliability_get,
        super::reliability::reliability_chart,
        super::ingest::ingest_checkpoint,
        super::ingest::ingest_nccl,
        super::admin::users,
        super::admin::role,
        super::admin::disable,
        super::admin::enable,
        super::admin::delete,
        super::admin::sessions,
        super::admin::revoke,
        openapi_json,
    ),
    components(schemas(super::error::ErrorBody))
)]
struct ApiDoc;

pub(super) fn routes() -> Routes {
    vec![("/api/openapi.json", get(openapi_json))]
}

/// The pseudo-role of `x-gantry-roles` for what only an ingest token may call.
pub const INGEST_TOKEN: &str = "ingest-token";

/// The roles that may call `method path`, as the guard decides (`anonymous` too where
/// anyone may, and for reads when anonymous reading is on).
pub fn roles_for(method: &Method, path: &str) -> Vec<&'static str> {
    if path.starts_with("/api/ingest/") {
        // No session role writes here: only an ingest token (bearer), whoever holds it.
        return vec![INGEST_TOKEN];
    }
    let all = [Role::Viewer, Role::Operator, Role::Manager, Role::Admin];
    let access = access_for(method, path);
    let mut out: Vec<&'static str> = all
        .into_iter()
        .filter(|r| match access {
            Access::Public | Access::Read => true,
            Access::Act => r.can_act(),
            Access::Report => r.can_report(),
            Access::Reliability => r.can_review_reliability(),
            Access::Admin => *r == Role::Admin,
        })
        .map(Role::as_str)
        .collect();
    if access == Access::Public {
        out.push("anonymous");
    }
    out
}

/// The description, each operation marked with its roles and the error envelope.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "session",
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(super::guard::COOKIE))),
    );
    components.add_security_scheme(
        "ingest_token",
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
    );
    for (path, item) in doc.paths.paths.iter_mut() {
        // `{id}` in the description stands for any value the guard sees.
        let concrete = path.replace(['{', '}'], "");
        for (method, op) in [
            (Method::GET, item.get.as_mut()),
            (Method::POST, item.post.as_mut()),
        ] {
            if let Some(op) = op {
                mark(op, &method, &concrete);
            }
        }
    }
    doc
}

fn mark(op: &mut Operation, method: &Method, path: &str) {
    let roles = roles_for(method, path);
    let ext = op.extensions.get_or_insert_with(Default::default);
    ext.insert("x-gantry-roles".into(), serde_json::json!(roles));
    let error = utoipa::openapi::ResponseBuilder::new()
        .description(
            "refused or failed: the error envelope (401 sign in, 403 role, 404, 429, 503 ...)",
        )
        .content(
            "application/json",
            utoipa::openapi::ContentBuilder::new()
                .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build();
    op.responses
        .responses
        .insert("default".into(), utoipa::openapi::RefOr::T(error));
    if op.security.is_none() && !roles.contains(&"anonymous") {
        op.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "session",
            Vec::<String>::new(),
        )]);
    }
}

/// This description.
#[utoipa::path(get, path = "/api/openapi.json", tag = "api",
    responses((status = 200, description = "the OpenAPI 3.1 description of this API", body = Object)))]
async fn openapi_json() -> Response {
    Json(document()).into_response()
}
