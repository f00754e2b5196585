//! `/api/openapi.json`: it describes every JSON route the router serves (and no other),
//! marks each operation with the roles the guard lets through (checked by calling each
//! GET route as each role and as nobody), and is valid against the official OpenAPI 3.1
//! schema (npm's @seriousme/openapi-schema-validator, in server/tests/openapi).

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::{self, get_with};

fn validator() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi");
    support::installed(
        &dir.join("node_modules/@seriousme/openapi-schema-validator"),
        "the OpenAPI validator (npm's @seriousme/openapi-schema-validator)",
        "cd server/tests/openapi && npm ci",
    )
    .then_some(dir)
}

/// A router path as the description writes it (`{id}` stays), for the JSON API: under
/// `/api/` or `/healthz`, not a page's server function.
fn api_paths(paths: &[String]) -> BTreeSet<String> {
    let server_fns: BTreeSet<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(p, _)| p.to_string())
        .collect();
    paths
        .iter()
        .filter(|p| p.starts_with("/api/") || *p == "/healthz")
        .filter(|p| !server_fns.contains(*p))
        .cloned()
        .collect()
}

#[tokio::test]
async fn the_api_description_lists_every_route_with_its_roles_and_is_valid_openapi_3_1() {
    let mut cfg = support::test_config(support::sqlite_url(), 4, 1.0, 500);
    cfg.auth.anonymous_read = false;
    cfg.ingest_token = Some(server::config::Secret::new(
        "openapi-test-ingest-token".into(),
    ));
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    support::add_users(&r.store).await;
    let resp = get_with(r.addr, "/api/openapi.json", &[]).await;
    assert_eq!(resp.status, 200, "public: {}", resp.text());
    let doc = resp.json();
    assert!(
        doc["openapi"].as_str().unwrap_or("").starts_with("3.1."),
        "{}",
        doc["openapi"]
    );

    // Every JSON route of the router, and nothing else.
    let routed = api_paths(&r.paths);
    let described: BTreeSet<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    let missing: Vec<_> = routed.difference(&described).collect();
    let extra: Vec<_> = described.difference(&routed).collect();
    assert!(missing.is_empty(), "routes not described: {missing:?}");
    assert!(extra.is_empty(), "described but not routed: {extra:?}");

    // Roles, as the guard applies them: each GET without path parameters called by each
    // role and by nobody; refused exactly where the description says.
    let cookies: Vec<(&str, String)> = {
        let mut v = Vec::new();
        for (name, role) in [
            ("viewer1", "viewer"),
            ("operator1", "operator"),
            ("manager1", "manager"),
            ("admin1", "admin"),
        ] {
            v.push((role, support::login(r.addr, name).await));
        }
        v
    };
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let roles: BTreeSet<&str> = op["x-gantry-roles"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path}: no x-gantry-roles"))
                .iter()
                .filter_map(|v| v.as_str())
                .collect();
            assert!(!roles.is_empty(), "{method} {path}: no role at all");
            assert!(
                op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"]
                    == "#/components/schemas/ErrorBody",
                "{method} {path}: the error envelope"
            );
            if roles.contains("ingest-token") {
                assert_eq!(roles.len(), 1, "{method} {path}: a token, not roles");
                // No session of any role writes here, nor does anybody without a token.
                let mut tried: Vec<Vec<(&str, &str)>> = vec![vec![]];
                tried.extend(cookies.iter().map(|(_, c)| vec![("Cookie", c.as_str())]));
                for h in &tried {
                    let resp = support::request(
                        r.addr,
                        "POST",
                        path,
                        h,
                        Some(("application/json", b"{}")),
                    )
                    .await;
                    assert_eq!(resp.status, 401, "{method} {path} with {h:?}");
                    assert!(
                        resp.header("www-authenticate")
                            .is_some_and(|v| v.starts_with("Bearer")),
                        "{method} {path}: WWW-Authenticate"
                    );
                }
                continue;
            }
            if method != "get" || path.contains('{') || path == "/api/live" {
                continue;
            }
            // Nobody signed in.
            let s = get_with(r.addr, path, &[]).await.status;
            if roles.contains("anonymous") {
                assert!(s != 401 && s != 403, "GET {path} anonymous: {s}");
            } else {
                assert_eq!(s, 401, "GET {path} anonymous");
            }
            for (role, cookie) in &cookies {
                let s = get_with(r.addr, path, &[("Cookie", cookie)]).await.status;
                if roles.contains(role) {
                    assert!(s != 401 && s != 403, "GET {path} as {role}: {s}");
                } else {
                    assert_eq!(
                        s, 403,
                        "GET {path} as {role}: the description says {roles:?}"
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 12, "only {checked} routes called");

    // The official OpenAPI 3.1 schema.
    if let Some(dir) = validator() {
        let file = std::env::temp_dir().join(format!("gantry-openapi-{}.json", std::process::id()));
        std::fs::write(&file, doc.to_string()).expect("write");
        let out = std::process::Command::new("node")
            .current_dir(&dir)
            .arg("validate.mjs")
            .arg(&file)
            .output()
            .expect("node validate.mjs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "not valid OpenAPI: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.starts_with("valid 3.1"), "{said}");
        let _ = std::fs::remove_file(&file);
    }
    r.stop().await.expect("stop");
}
