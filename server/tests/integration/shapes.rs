//! What an outside probe found at the HTTP boundary: every refusal in the JSON error
//! envelope with its right status (extractors included), `Retry-After` and
//! `WWW-Authenticate` where they belong, the host and cross-site checks against the names
//! Gantry is served under, and alert mutes in the audit log.

use serde_json::json;

use crate::support::{self, add_users, get_with, login, request, Resp};

fn envelope(r: &Resp, status: u16, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{what}: content type {:?}",
        r.header("content-type")
    );
    let j = r.json();
    assert_eq!(j["error"]["status"], status, "{what}: {j}");
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {j}"
    );
}

async fn start() -> server::serve::Running {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.ingest_token = Some(server::config::Secret::new("shapes-ingest-token".into()));
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    r
}

#[tokio::test]
async fn every_refusal_is_the_json_envelope_with_its_status() {
    let r = start().await;
    let op = login(r.addr, "operator1").await;
    let cookie = [("Cookie", op.as_str())];

    // The audit log reads its numbers; unknown formats are refused.
    let five = get_with(r.addr, "/api/audit?limit=5", &cookie).await;
    assert_eq!(five.status, 200, "{}", five.text());
    assert!(five.json()["entries"]
        .as_array()
        .is_some_and(|e| e.len() <= 5));
    let csv = get_with(r.addr, "/api/audit?limit=5&format=csv", &cookie).await;
    assert_eq!(csv.status, 200);
    assert!(csv
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/csv")));
    for path in [
        "/api/audit?format=xml",
        "/api/audit?limit=many",
        "/api/alerts?limit=-1",
        "/api/history?scope=cluster&metric=power&since_ms=x",
        "/api/charts/job/not-a-job/activity.svg",
    ] {
        let resp = get_with(r.addr, path, &cookie).await;
        envelope(&resp, 400, path);
    }
    let ack = request(
        r.addr,
        "POST",
        "/api/alerts/not-an-id/ack",
        &cookie,
        Some(("application/json", b"{}")),
    )
    .await;
    envelope(&ack, 400, "a path that is not a number");

    // Bodies: over the limit 413, the wrong content type 415, bad JSON 400.
    let big = vec![b' '; 3 << 20];
    let over = request(
        r.addr,
        "POST",
        "/api/actions/preview",
        &cookie,
        Some(("application/json", &big)),
    )
    .await;
    envelope(&over, 413, "a body over the limit");
    let plain = request(
        r.addr,
        "POST",
        "/api/actions/preview",
        &cookie,
        Some(("text/plain", br#"{"action":"drain","nodes":["gpu001"]}"#)),
    )
    .await;
    envelope(&plain, 415, "text/plain to an action");
    let bad = request(
        r.addr,
        "POST",
        "/api/actions/preview",
        &cookie,
        Some(("application/json", b"{")),
    )
    .await;
    envelope(&bad, 400, "JSON cut short");

    // Ingest: a token, JSON only; its 401 says how to authenticate.
    let ck = json!({"job_id": 1, "step": 1, "bytes": 1, "duration_ms": 1, "path": "/x", "status": "complete"})
        .to_string();
    let no_token = request(
        r.addr,
        "POST",
        "/api/ingest/checkpoint",
        &[],
        Some(("application/json", ck.as_bytes())),
    )
    .await;
    envelope(&no_token, 401, "ingest without a token");
    assert_eq!(
        no_token.header("www-authenticate"),
        Some("Bearer realm=\"gantry-ingest\"")
    );
    let wrong = request(
        r.addr,
        "POST",
        "/api/ingest/checkpoint",
        &[("Authorization", "Bearer not-the-token")],
        Some(("application/json", ck.as_bytes())),
    )
    .await;
    envelope(&wrong, 401, "ingest with a wrong token");
    assert!(wrong
        .header("www-authenticate")
        .is_some_and(|v| v.contains("error=\"invalid_token\"")));
    let as_text = request(
        r.addr,
        "POST",
        "/api/ingest/checkpoint",
        &[("Authorization", "Bearer shapes-ingest-token")],
        Some(("text/plain", ck.as_bytes())),
    )
    .await;
    envelope(&as_text, 415, "ingest as text/plain");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn hosts_and_origins_must_be_gantrys_own() {
    let r = start().await;
    let op = login(r.addr, "operator1").await;
    let own = format!("http://{}", r.addr);
    let localhost = format!("http://localhost:{}", r.addr.port());
    let https = format!("https://{}", r.addr);

    // A name Gantry is not served under: 421 for pages and APIs, not for health.
    for path in ["/", "/api/nodes", "/login"] {
        let resp = get_with(r.addr, path, &[("Host", "rebound.evil.example")]).await;
        envelope(&resp, 421, path);
    }
    let two = get_with(
        r.addr,
        "/api/whoami",
        &[("Host", &r.addr.to_string()), ("Host", "evil.example")],
    )
    .await;
    envelope(&two, 421, "two Host headers");
    let health = get_with(r.addr, "/healthz", &[("Host", "10.9.8.7")]).await;
    assert_eq!(health.status, 200);
    let local = get_with(
        r.addr,
        "/api/whoami",
        &[
            ("Host", &format!("localhost:{}", r.addr.port())),
            ("Cookie", &op),
        ],
    )
    .await;
    assert_eq!(
        local.status, 200,
        "localhost names the loopback listener too"
    );

    // State-changing requests: every Origin, else the Referer, must be Gantry's own.
    let body = json!({"action": "drain", "nodes": ["gpu001"], "reason": "x"}).to_string();
    let post = |extra: Vec<(&'static str, String)>| {
        let op = op.clone();
        let body = body.clone();
        async move {
            let mut h: Vec<(&str, &str)> = vec![("Cookie", op.as_str())];
            h.extend(extra.iter().map(|(k, v)| (*k, v.as_str())));
            request(
                r.addr,
                "POST",
                "/api/actions/preview",
                &h,
                Some(("application/json", body.as_bytes())),
            )
            .await
        }
    };
    for ok in [
        vec![],
        vec![("Origin", own.clone())],
        vec![("Origin", localhost.clone())],
        vec![("Referer", format!("{own}/nodes/gpu001"))],
    ] {
        let resp = post(ok.clone()).await;
        assert_eq!(resp.status, 200, "{ok:?}: {}", resp.text());
    }
    for no in [
        vec![("Origin", "http://evil.example".to_string())],
        vec![("Origin", https.clone())],
        vec![("Origin", "null".to_string())],
        vec![
            ("Origin", own.clone()),
            ("Origin", "http://evil.example".into()),
        ],
        vec![("Referer", "http://evil.example/".to_string())],
    ] {
        let resp = post(no.clone()).await;
        envelope(&resp, 403, &format!("{no:?}"));
    }
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn public_url_lists_the_names_gantry_is_served_under() {
    let mut cfg = support::test_config(support::sqlite_url(), 4, 1.0, 200);
    cfg.public_url = vec!["https://gantry.example".into()];
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    assert_eq!(
        get_with(r.addr, "/api/nodes", &[("Host", "gantry.example")])
            .await
            .status,
        200
    );
    let by_address = get_with(r.addr, "/api/nodes", &[]).await;
    envelope(&by_address, 421, "the bare address, once public_url is set");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn acknowledging_and_silencing_are_audited() {
    let r = start().await;
    let op = login(r.addr, "operator1").await;
    let (id, _) = r
        .store
        .fire_alert(
            &server::store::NewAlert {
                rule: "gpu_ecc_dbe",
                subject: "node:gpu003",
                severity: "critical",
                summary: "gpu003: double-bit ECC errors",
                link: "/nodes/gpu003",
            },
            server::clock::wall_now_ms(),
        )
        .await
        .expect("fire");
    let post = |path: String, body: serde_json::Value| {
        let op = op.clone();
        async move { support::post_json(r.addr, &path, Some(&op), &body).await }
    };
    let ack = post(format!("/api/alerts/{id}/ack"), json!({"note": "looking"})).await;
    assert_eq!(ack.status, 200, "{}", ack.text());
    let zero = post(format!("/api/alerts/{id}/silence"), json!({"minutes": 0})).await;
    envelope(&zero, 400, "a silence of 0 minutes");
    let s = post(
        format!("/api/alerts/{id}/silence"),
        json!({"minutes": 90, "note": "RMA ticket 1234"}),
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(s.json()["silenced_by"], "operator1");
    assert_eq!(s.json()["silence_note"], "RMA ticket 1234");
    let u = post(
        format!("/api/alerts/{id}/unsilence"),
        json!({"note": "back"}),
    )
    .await;
    assert_eq!(u.status, 200, "{}", u.text());
    assert!(u.json()["silenced_until_ms"].is_null(), "{}", u.text());
    let missing = post("/api/alerts/999999/ack".into(), json!({})).await;
    envelope(&missing, 404, "no such alert");

    let audit = get_with(r.addr, "/api/audit", &[("Cookie", &op)])
        .await
        .json();
    let rows: Vec<(String, String, String, String, String)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .rev()
        .filter(|e| {
            e["action"]
                .as_str()
                .is_some_and(|a| a.starts_with("alert_"))
        })
        .map(|e| {
            let f = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (f("action"), f("user"), f("role"), f("detail"), f("status"))
        })
        .collect();
    let target = |e: &serde_json::Value| e["target"].as_str().unwrap_or_default().to_string();
    assert!(audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"]
            .as_str()
            .is_some_and(|a| a.starts_with("alert_")))
        .all(|e| target(e) == format!("alert {id}: gpu_ecc_dbe node:gpu003")));
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0].0, "alert_ack");
    assert_eq!(rows[0].3, "note: looking");
    assert_eq!(rows[1].0, "alert_silence");
    assert!(rows[1].3.starts_with("90 min, until "), "{:?}", rows[1]);
    assert!(
        rows[1].3.ends_with("note: RMA ticket 1234"),
        "{:?}",
        rows[1]
    );
    assert_eq!(rows[2].0, "alert_unsilence");
    for row in &rows {
        assert_eq!(
            (row.1.as_str(), row.2.as_str(), row.4.as_str()),
            ("operator1", "operator", "ok")
        );
    }
    let csv = get_with(r.addr, "/api/audit?format=csv", &[("Cookie", &op)]).await;
    assert!(csv.text().contains("alert_silence"), "{}", csv.text());
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn signing_in_over_a_session_ends_it() {
    let r = start().await;
    let first = login(r.addr, "operator1").await;
    let form = format!(
        "name=viewer1&password={}&next=/",
        support::PASSWORD.replace(' ', "+")
    );
    let again = request(
        r.addr,
        "POST",
        "/auth/login",
        &[("Cookie", &first)],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await;
    assert_eq!(again.status, 303, "{}", again.text());
    let second = again
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a new session")
        .to_string();
    assert_eq!(
        get_with(r.addr, "/api/whoami", &[("Cookie", &first)])
            .await
            .status,
        401,
        "the operator's session ended when the viewer signed in over it"
    );
    let me = get_with(r.addr, "/api/whoami", &[("Cookie", &second)])
        .await
        .json();
    assert_eq!(me["user"], "viewer1");
    // A drain reason is bounded on its own, with one message.
    let op = login(r.addr, "operator1").await;
    let long = support::post_json(
        r.addr,
        "/api/actions/drain",
        Some(&op),
        &json!({"nodes": ["gpu001"], "reason": "é".repeat(901)}),
    )
    .await;
    envelope(&long, 400, "a reason of 901 characters");
    assert_eq!(
        long.json()["error"]["message"],
        "reason: at most 900 characters"
    );
    r.stop().await.expect("stop");
}
