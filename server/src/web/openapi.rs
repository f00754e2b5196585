//! `GET /api/openapi.json`: the OpenAPI 3.1 description of Gantry's JSON API, generated
//! from the handlers' own annotations and the types they serialize (utoipa), each
//! operation marked with the roles that may call it (`x-gantry-roles`, from
//! [`crate::auth::access_for`], the rule the guard applies) and the error envelope.
//!
//! Not described: the pages, `/auth/*` (form posts and redirects for browsers), the
//! simulator's routes, and the pages' server functions (`POST /api/{name}`, the app's
//! internal calls, whose arguments follow Leptos's encoding and may change with it).

use axum::extract::State;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde_json::Value;
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
        super::cluster::scheduler,
        super::cluster::estimates,
        super::cluster::placement,
        super::actions::action_preview,
        super::actions::action_drain,
        super::actions::action_resume,
        super::actions::action_requeue,
        super::actions::action_status,
        super::actions::audit,
        super::alerts::alerts_list,
        super::alerts::incidents_list,
        super::alerts::incident_get,
        super::alerts::alert_ack,
        super::alerts::alert_silence,
        super::alerts::alert_unsilence,
        super::remediation::remediation_get,
        super::remediation::kill_switch,
        super::remediation::reset_breaker,
        super::remediation::set_mode,
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
    components(schemas(super::error::ErrorBody, app::live::OverviewDelta))
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
async fn openapi_json(State(st): State<super::AppState>) -> Response {
    let mut doc = serde_json::to_value(document()).unwrap_or_default();
    refine(
        &mut doc,
        crate::clock::wall_now_ms(),
        st.auth.anonymous_read,
    );
    Json(doc).into_response()
}

/// What the handlers' annotations cannot say, said in the served document so that it
/// describes exactly what the server takes (checked by schemathesis in `cargo xtask test`):
/// the real ranges of unsigned integers, the shapes of scopes and names, the enums of
/// formats and tables, one request body per action, the live stream's events, and the
/// bounds ingest applies (times relative to `now_ms`).
pub fn refine(d: &mut Value, now_ms: i64, anonymous_read: bool) {
    use serde_json::json;
    const NOCTRL: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
    let max_stored = crate::store::MAX_STORED;
    unsigned(d);
    let Some(paths) = d.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let mut param = |path: &str, name: &str, patch: Value| {
        let Some(ps) = paths
            .get_mut(path)
            .and_then(|p| p.get_mut("get"))
            .and_then(|g| g.get_mut("parameters"))
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        for p in ps {
            if p["name"] == name {
                merge(&mut p["schema"], &patch);
            }
        }
    };
    let scope = "^(cluster|domain:.+|(rack|node):[^:]+|gpu:[^:]+:[0-9]{1,9})$";
    let metrics = crate::live::window::Metric::NAMES;
    for path in ["/api/history", "/api/charts/history.svg"] {
        param(path, "scope", json!({"pattern": scope}));
        param(path, "metric", json!({"enum": metrics}));
    }
    param(
        "/api/charts/throttling.svg",
        "scope",
        json!({"pattern": "^(cluster|rack:.+)$", "maxLength": 80}),
    );
    param("/api/audit", "format", json!({"enum": ["json", "csv"]}));
    for path in [
        "/api/reports",
        "/api/reliability",
        "/api/reports/charts/{file}",
        "/api/reliability/charts/{file}",
    ] {
        param(
            path,
            "period",
            json!({"enum": ["", "day", "week", "month", "custom"]}),
        );
        param(
            path,
            "group",
            json!({"enum": ["", "account", "partition", "user", "rack", "domain"]}),
        );
        for k in ["at", "from", "to"] {
            // Empty (absent), or a real date (2026-02-30 is refused).
            param(
                path,
                k,
                json!({"anyOf": [{"type": "string", "maxLength": 0},
                    {"type": "string", "format": "date"}]}),
            );
        }
        param(path, "format", json!({"enum": ["json", "csv"]}));
    }
    param(
        "/api/reliability",
        "table",
        json!({"enum": super::reliability::TABLES}),
    );
    let files = |charts: &[&str]| -> Vec<String> {
        charts
            .iter()
            .flat_map(|c| ["svg", "png"].map(|e| format!("{c}.{e}")))
            .collect()
    };
    param(
        "/api/reports/charts/{file}",
        "file",
        json!({"enum": files(&["utilization", "goodput", "cost"])}),
    );
    param(
        "/api/reliability/charts/{file}",
        "file",
        json!({"enum": files(&["ettr", "ledger"])}),
    );
    for path in [
        "/api/reports/charts/{file}",
        "/api/reliability/charts/{file}",
    ] {
        if let Some(png) = paths
            .get_mut(path)
            .and_then(|p| p.pointer_mut("/get/responses/200/content/image~1png"))
        {
            png["schema"] = json!({"type": "string", "contentMediaType": "image/png"});
        }
    }
    let name = json!({"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"});
    for (path, item) in paths.iter_mut() {
        if !path.starts_with("/api/admin/users/{name}/") {
            continue;
        }
        if let Some(ps) = item
            .pointer_mut("/post/parameters")
            .and_then(Value::as_array_mut)
        {
            for p in ps.iter_mut().filter(|p| p["name"] == "name") {
                p["schema"] = name.clone();
            }
        }
    }
    // One body per action: what each requires.
    let node = json!({"type": "string", "pattern": "^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$"});
    let nodes = json!({"type": "array", "items": node, "minItems": 1, "maxItems": 512});
    let jobs = json!({"type": "array", "items": {"type": "integer", "minimum": 0,
        "maximum": max_stored}, "minItems": 1, "maxItems": 512});
    let node_targets = json!({"type": "object",
        "anyOf": [{"required": ["nodes"]}, {"required": ["rack"]}, {"required": ["domain"]}],
        "properties": {"nodes": nodes, "rack": {"type": "string", "minLength": 1},
            "domain": {"type": "string", "minLength": 1}}});
    let reason = json!({"type": "string",
        "maxLength": crate::actions::MAX_TYPED_REASON_CHARS,
        "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"});
    for (ep, body) in [
        (
            "drain",
            json!({"allOf": [node_targets, {"type": "object", "required": ["reason"],
                "properties": {"reason": reason}}]}),
        ),
        ("resume", node_targets.clone()),
        (
            "requeue",
            json!({"type": "object", "required": ["jobs", "reason"],
                "properties": {"jobs": jobs, "hold": {"type": "boolean"}, "reason": reason,
                    "exclude": {"type": "array", "items": node, "maxItems": 64}}}),
        ),
        (
            "preview",
            json!({"oneOf": [
                {"allOf": [node_targets, {"type": "object", "required": ["action", "reason"],
                    "properties": {"action": {"const": "drain"}, "reason": reason}}]},
                {"allOf": [node_targets, {"type": "object", "required": ["action"],
                    "properties": {"action": {"const": "resume"}}}]},
                {"type": "object", "required": ["action", "jobs"], "properties": {
                    "action": {"enum": ["requeue", "requeue_hold"]}, "jobs": jobs}}]}),
        ),
    ] {
        if let Some(s) = paths
            .get_mut(&format!("/api/actions/{ep}"))
            .and_then(|p| p.pointer_mut("/post/requestBody/content/application~1json/schema"))
        {
            *s = body;
        }
    }
    // The live stream: each event, its data the JSON of a snapshot or a delta.
    let event = |name: &str, schema: &str| {
        json!({"type": "object", "required": ["event", "id", "data"], "properties": {
            "event": {"const": name}, "id": {"type": "string", "pattern": "^[0-9]+-[0-9]+$"},
            "data": {"type": "string", "contentMediaType": "application/json",
                "contentSchema": {"$ref": format!("#/components/schemas/{schema}")}}}})
    };
    if let Some(s) = paths
        .get_mut("/api/live")
        .and_then(|p| p.pointer_mut("/get/responses/200/content/text~1event-stream/schema"))
    {
        *s = json!({"oneOf": [event("snapshot", "LiveSnapshot"), event("delta", "OverviewDelta")]});
    }
    if anonymous_read {
        for item in paths.values_mut() {
            let Some(op) = item.get_mut("get") else {
                continue;
            };
            let roles = op["x-gantry-roles"].as_array().cloned().unwrap_or_default();
            let read =
                roles.iter().any(|r| r == "viewer") && !roles.iter().any(|r| r == "anonymous");
            if read && roles.len() == 4 {
                if let Some(r) = op["x-gantry-roles"].as_array_mut() {
                    r.push(json!("anonymous"));
                }
                op["security"] = json!([{"session": []}, {}]);
            }
        }
    }
    // Ingest: the bounds the handlers apply.
    let recent = json!({"minimum": now_ms - super::ingest::MAX_PAST_MS + 3_600_000,
        "maximum": now_ms + super::ingest::MAX_AHEAD_MS - 3_600_000});
    let Some(schemas) = d
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let mut prop = |schema: &str, field: &str, patch: Value| {
        if let Some(p) = schemas
            .get_mut(schema)
            .and_then(|s| s.pointer_mut(&format!("/properties/{field}")))
        {
            merge(p, &patch);
        }
    };
    prop(
        "CheckpointEvent",
        "status",
        json!({"enum": ["complete", "failed"]}),
    );
    prop(
        "CheckpointEvent",
        "path",
        json!({"minLength": 1, "maxLength": super::ingest::MAX_PATH_CHARS}),
    );
    prop(
        "CheckpointEvent",
        "duration_ms",
        json!({"minimum": 0, "maximum": super::ingest::MAX_SAVE_MS}),
    );
    prop("CheckpointEvent", "started_ms", recent.clone());
    prop("NcclEvent", "at_ms", recent);
    prop(
        "NcclEvent",
        "latency_us",
        // Inclusive: a JSON reader may round 999999999.99999999 to 1e9.
        json!({"minimum": 0, "maximum": 1e9}),
    );
    for (schema, field) in [
        ("CheckpointEvent", "job_id"),
        ("CheckpointEvent", "step"),
        ("CheckpointEvent", "bytes"),
        ("NcclEvent", "job_id"),
        ("NcclEvent", "step"),
        ("NcclEvent", "message_bytes"),
    ] {
        prop(schema, field, json!({"maximum": max_stored}));
    }
    for body in [
        "AckBody",
        "SilenceBody",
        "KillSwitchBody",
        "BreakerBody",
        "ModeBody",
    ] {
        prop(body, "note", json!({"maxLength": 1000, "pattern": NOCTRL}));
    }
    prop(
        "RoleBody",
        "role",
        json!({"enum": ["viewer", "operator", "manager", "admin"]}),
    );
}

/// Sets `patch`'s keys in `target` (an object).
fn merge(target: &mut Value, patch: &Value) {
    if let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) {
        for (k, v) in p {
            t.insert(k.clone(), v.clone());
        }
    }
}

/// utoipa writes `u32` and `usize` as integers with `minimum: 0` and no upper bound (or
/// `int32`, whose range is half of it): the range they have.
fn unsigned(x: &mut Value) {
    match x {
        Value::Object(o) => {
            let integer = matches!(o.get("type"), Some(t) if t == "integer" || t == &serde_json::json!(["integer", "null"]));
            if integer && o.get("minimum") == Some(&Value::from(0)) {
                let format = o.get("format").and_then(Value::as_str).map(str::to_string);
                match format.as_deref() {
                    None | Some("int32") | Some("uint32") => {
                        o.insert("format".into(), "uint32".into());
                        o.entry("maximum").or_insert(Value::from(u32::MAX));
                    }
                    Some("int64") | Some("uint64") => {
                        o.entry("maximum")
                            .or_insert(Value::from(crate::store::MAX_STORED));
                    }
                    _ => {}
                }
            }
            for v in o.values_mut() {
                unsigned(v);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(unsigned),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    /// The document allows every whole number up to 2^53 - 1, written `n` or `n.0`: each
    /// is read exactly (serde_json's default float reading is not correctly rounded: it
    /// read 2251799813685247.0 as 2251799813685247.25, and refused a job id the document
    /// allows; schemathesis found it).
    #[test]
    fn whole_numbers_the_document_allows_are_read_exactly() {
        let max = crate::store::MAX_STORED as u64;
        for n in [
            0,
            807,
            2_251_799_813_685_247,
            4_503_599_627_370_495,
            max - 1,
            max,
        ] {
            for text in [format!("{n}"), format!("{n}.0")] {
                let body = format!(r#"{{"jobs": [{text}]}}"#);
                let t: app::actions::ActionTargets = serde_json::from_str(&body)
                    .unwrap_or_else(|e| panic!("{body} was refused: {e}"));
                assert_eq!(t.jobs, vec![n], "{body}");
            }
        }
    }
}
