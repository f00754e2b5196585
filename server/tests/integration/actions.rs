//! Sign-in, roles, the route guard, and actions with their audit trail, over real HTTP,
//! against the simulator as scheduler, on SQLite and on PostgreSQL.

use serde_json::json;

use crate::support::{self, add_users, login, post_json, request};

async fn start(db: String, anonymous_read: bool) -> server::serve::Running {
    let mut cfg = support::test_config(db, 16, 1.0, 200);
    cfg.auth.anonymous_read = anonymous_read;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    r
}

/// A path with its parameters filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            if seg.starts_with('{') || seg.starts_with(':') || seg.starts_with('*') {
                "gpu001"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_route_is_guarded() {
    use server::auth::{access_for, Access, READ_ONLY_POSTS};
    let r = start(support::sqlite_url(), false).await;
    let viewer = login(r.addr, "viewer1").await;
    let manager = login(r.addr, "manager1").await;
    let operator = login(r.addr, "operator1").await;
    let admin = login(r.addr, "admin1").await;
    assert!(
        r.paths.len() >= 20,
        "the router lists its paths: {:?}",
        r.paths
    );
    for must in [
        "/api/actions/drain",
        "/api/actions/{id}",
        "/api/audit",
        "/",
        "/api/overview",
        "/api/admin/users",
        "/api/admin/users/{name}/role",
        "/api/admin/sessions",
        "/api/admin/sessions/{id}/revoke",
    ] {
        assert!(r.paths.iter().any(|p| p == must), "{must} in {:?}", r.paths);
    }
    let mut checked = 0;
    let mut reports = 0;
    let mut reliability = 0;
    let mut admins = 0;
    for p in &r.paths {
        let path = concrete(p);
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            let m: axum::http::Method = method.parse().expect("method");
            let access = access_for(&m, &path);
            if access == Access::Public {
                // Ingest takes a token, not a session: without one it is refused.
                if path.starts_with("/api/ingest/") && method == "POST" {
                    let resp = request(r.addr, method, &path, &[], None).await;
                    assert!(
                        resp.status == 401 || resp.status == 403,
                        "{method} {path}: {}",
                        resp.status
                    );
                    continue;
                }
                // Public routes only read, sign in and out, or keep the caller's own colour
                // theme in a cookie (`/theme`, tested in security.rs; its other methods 405).
                if path == "/theme" && method == "POST" {
                    let resp = request(r.addr, method, &path, &[], None).await;
                    assert!(resp.header("set-cookie").is_none(), "no form, no cookie");
                    continue;
                }
                if method != "GET" && !path.starts_with("/auth/") {
                    let resp = request(r.addr, method, &path, &[], None).await;
                    assert_eq!(resp.status, 405, "{method} {path} is public and not a read");
                }
                continue;
            }
            // The live stream never ends; its guard is checked anonymously only.
            let endless = method == "GET" && path == "/api/live";
            let anon = request(r.addr, method, &path, &[], None).await;
            assert!(
                anon.status == 401 || (anon.status == 303 && method == "GET"),
                "anonymous {method} {path}: {} {}",
                anon.status,
                anon.text()
            );
            if endless {
                continue;
            }
            // Reports: managers (and admins) only, whatever the method; a viewer never.
            if access == Access::Report {
                let v = request(r.addr, method, &path, &[("Cookie", viewer.as_str())], None).await;
                assert_eq!(v.status, 403, "viewer {method} {path}: {}", v.text());
                let m = request(r.addr, method, &path, &[("Cookie", manager.as_str())], None).await;
                assert!(
                    m.status != 401 && m.status != 403,
                    "manager {method} {path}: {} {}",
                    m.status,
                    m.text()
                );
                reports += 1;
                checked += 1;
                continue;
            }
            // Reliability: operators, managers and admins, whatever the method; a viewer never.
            if access == Access::Reliability {
                let v = request(r.addr, method, &path, &[("Cookie", viewer.as_str())], None).await;
                assert_eq!(v.status, 403, "viewer {method} {path}: {}", v.text());
                for (who, cookie) in [("manager", &manager), ("operator", &operator)] {
                    let resp =
                        request(r.addr, method, &path, &[("Cookie", cookie.as_str())], None).await;
                    assert!(
                        resp.status != 401 && resp.status != 403,
                        "{who} {method} {path}: {} {}",
                        resp.status,
                        resp.text()
                    );
                }
                reliability += 1;
                checked += 1;
                continue;
            }
            // Users and sessions: admins only, reading too; an operator never.
            if access == Access::Admin {
                for (who, cookie) in [
                    ("viewer", &viewer),
                    ("manager", &manager),
                    ("operator", &operator),
                ] {
                    let resp =
                        request(r.addr, method, &path, &[("Cookie", cookie.as_str())], None).await;
                    assert_eq!(resp.status, 403, "{who} {method} {path}: {}", resp.text());
                }
                let a = request(r.addr, method, &path, &[("Cookie", admin.as_str())], None).await;
                assert!(
                    a.status != 401 && a.status != 403,
                    "admin {method} {path}: {} {}",
                    a.status,
                    a.text()
                );
                admins += 1;
                checked += 1;
                continue;
            }
            let mutating = method != "GET";
            if mutating && !READ_ONLY_POSTS.contains(&path.as_str()) {
                for (who, cookie) in [("viewer", &viewer), ("manager", &manager)] {
                    let resp =
                        request(r.addr, method, &path, &[("Cookie", cookie.as_str())], None).await;
                    assert_eq!(
                        resp.status,
                        403,
                        "{who} {method} {path} must be refused: {}",
                        resp.text()
                    );
                }
                assert_eq!(access, Access::Act);
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "checked {checked} route x method pairs");
    // `/reports`, `/api/reports`, its charts and the `report` server function.
    assert!(
        reports >= 4 * 5,
        "checked {reports} report route x method pairs"
    );
    // `/reliability`, `/api/reliability` and the `reliability_view` server function.
    assert!(
        reliability >= 3 * 5,
        "checked {reliability} reliability route x method pairs"
    );
    assert!(
        admins >= 7 * 5,
        "checked {admins} admin route x method pairs"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn sign_in_sessions_and_cross_site_requests() {
    let r = start(support::sqlite_url(), false).await;
    // A page without a session sends the browser to sign in; an API call gets 401.
    let page = support::get_with(r.addr, "/", &[("Accept", "text/html")]).await;
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/login?next=/"));
    assert_eq!(support::get(r.addr, "/api/whoami").await.status, 401);
    let login_page = support::get_with(r.addr, "/login", &[("Accept", "text/html")]).await;
    assert_eq!(login_page.status, 200);
    assert!(login_page.text().contains("name=\"password\""));

    // A wrong password: back to the form, no cookie.
    let bad = request(
        r.addr,
        "POST",
        "/auth/login",
        &[],
        Some((
            "application/x-www-form-urlencoded",
            b"name=operator1&password=wrong+password+here",
        )),
    )
    .await;
    assert_eq!(bad.status, 303);
    assert!(bad
        .header("location")
        .unwrap_or("")
        .starts_with("/login?error=1"));
    assert!(bad.header("set-cookie").is_none());

    // The right one: an HttpOnly, SameSite=Strict session cookie.
    let form = format!(
        "name=operator1&password={}&next=/nodes",
        support::PASSWORD.replace(' ', "+")
    );
    let ok = request(
        r.addr,
        "POST",
        "/auth/login",
        &[],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await;
    assert_eq!(ok.status, 303);
    assert_eq!(ok.header("location"), Some("/nodes"));
    let set = ok.header("set-cookie").expect("cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().expect("cookie").to_string();
    let me = support::get_with(r.addr, "/api/whoami", &[("Cookie", &cookie)]).await;
    assert_eq!(me.json()["role"], "operator");

    // A cross-site post with a valid cookie is refused, and nothing happens.
    let before = support::get_with(r.addr, "/api/nodes", &[("Cookie", &cookie)])
        .await
        .json();
    let b = json!({"nodes": ["gpu001"], "reason": "csrf"}).to_string();
    let cross = request(
        r.addr,
        "POST",
        "/api/actions/drain?wait=20",
        &[
            ("Cookie", &cookie),
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        Some(("application/json", b.as_bytes())),
    )
    .await;
    assert_eq!(cross.status, 403);
    let after = support::get_with(r.addr, "/api/nodes", &[("Cookie", &cookie)])
        .await
        .json();
    assert_eq!(before["nodes"][0]["state"], after["nodes"][0]["state"]);

    // Signing out ends the session on the server, not just in the browser.
    let out = request(r.addr, "POST", "/auth/logout", &[("Cookie", &cookie)], None).await;
    assert_eq!(out.status, 303);
    let me = support::get_with(r.addr, "/api/whoami", &[("Cookie", &cookie)]).await;
    assert_eq!(me.status, 401);
    r.stop().await.expect("stop");
}

/// The node of a running job, and the job.
async fn busy_node(addr: std::net::SocketAddr, cookie: &str) -> (String, u64, u64) {
    let jobs = support::get_with(addr, "/api/jobs", &[("Cookie", cookie)])
        .await
        .json();
    let j = jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| {
            j["job"]["state"] == "running"
                && j["job"]["nodes"].as_array().is_some_and(|n| n.len() == 1)
        })
        .expect("a running one-node job")
        .clone();
    (
        j["job"]["nodes"][0].as_str().expect("node").to_string(),
        j["job"]["id"].as_u64().expect("id"),
        j["job"]["gpus"].as_u64().expect("gpus"),
    )
}

async fn node_json(addr: std::net::SocketAddr, cookie: &str, name: &str) -> serde_json::Value {
    let nodes = support::get_with(addr, "/api/nodes", &[("Cookie", cookie)])
        .await
        .json();
    nodes["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == name)
        .expect("node listed")
        .clone()
}

async fn action_story(db: String) {
    let r = start(db, false).await;
    let op = login(r.addr, "operator1").await;
    let op2 = login(r.addr, "operator2").await;
    let viewer = login(r.addr, "viewer1").await;
    let (node, job, gpus) = busy_node(r.addr, &op).await;

    // Preview: the running job and its GPUs, before anything is done.
    let p = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "nodes": [node]}),
    )
    .await;
    assert_eq!(p.status, 200, "{}", p.text());
    let p = p.json();
    assert_eq!(p["targets"], json!([node]));
    assert_eq!(p["gpus_affected"].as_u64(), Some(gpus));
    assert!(p["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .any(|j| j["id"] == job));
    assert!(p["work_at_risk_gpu_hours"]
        .as_f64()
        .is_some_and(|h| h >= 0.0));

    // A switch domain expands to its nodes (a spine to those of its leaves); unknown ones
    // are refused.
    let leaf = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "domain": "leaf01"}),
    )
    .await;
    assert_eq!(
        leaf.json()["targets"].as_array().map(Vec::len),
        Some(8),
        "{}",
        leaf.text()
    );
    let spine = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "domain": "spine01"}),
    )
    .await;
    assert_eq!(
        spine.json()["targets"].as_array().map(Vec::len),
        Some(16),
        "{}",
        spine.text()
    );
    let none = post_json(
        r.addr,
        "/api/actions/preview",
        Some(&op),
        &json!({"action": "drain", "domain": "leaf99"}),
    )
    .await;
    assert_eq!(none.status, 404, "a domain the cluster does not have");

    // A viewer's drain is refused and changes nothing.
    let v = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&viewer),
        &json!({"nodes": [node], "reason": "x"}),
    )
    .await;
    assert_eq!(v.status, 403);
    assert_eq!(node_json(r.addr, &op, &node).await["state"], "allocated");

    // Bad input: a reason is required; hostile names are refused before anything runs.
    let e = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": [node]}),
    )
    .await;
    assert_eq!(e.status, 400);
    assert!(e.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("reason"));
    let e = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu001; reboot"], "reason": "x"}),
    )
    .await;
    assert_eq!(e.status, 400);
    let e = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu999"], "reason": "x"}),
    )
    .await;
    assert_eq!(e.status, 404, "a node the scheduler does not have");
    let e = request(
        r.addr,
        "POST",
        "/api/actions/drain?wait=20",
        &[("Cookie", &op)],
        Some(("application/json", b"{not json")),
    )
    .await;
    assert_eq!(e.status, 400);

    // Two operators drain the same node at once: they serialize; one drains, the other
    // finds it drained; both get the outcome.
    let reason = "XID 48 $(reboot) `id` \"dbe\" 'x' ; | =cmd";
    let body = json!({"nodes": [node], "reason": reason});
    let (a, b) = tokio::join!(
        post_json(r.addr, "/api/actions/drain?wait=20", Some(&op), &body),
        post_json(r.addr, "/api/actions/drain?wait=20", Some(&op2), &body)
    );
    assert_eq!(
        (a.status, b.status),
        (200, 200),
        "{} / {}",
        a.text(),
        b.text()
    );
    let mut statuses = [
        a.json()["outcomes"][0]["status"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        b.json()["outcomes"][0]["status"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    ];
    statuses.sort();
    assert_eq!(statuses, ["already", "ok"]);
    let n = node_json(r.addr, &op, &node).await;
    assert_eq!(n["state"], "draining", "{n}");
    let stored = n["reason"].as_str().expect("reason");
    assert!(
        stored.ends_with(&format!(": {reason}")),
        "stored verbatim, prefixed with the user: {stored}"
    );

    // Resume, then requeue the job: each verified by reading the scheduler back.
    let res = post_json(
        r.addr,
        "/api/actions/resume?wait=20",
        Some(&op),
        &json!({"nodes": [node]}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["outcomes"][0]["status"], "ok");
    // A requeue says why, as a drain does (#44): without a reason it is refused, and
    // nothing is recorded.
    let bare = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [job]}),
    )
    .await;
    assert_eq!(bare.status, 400, "{}", bare.text());
    assert!(bare.text().contains("reason"), "{}", bare.text());
    let rq = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [job], "reason": "loss spike after a bad node"}),
    )
    .await;
    assert_eq!(rq.status, 200, "{}", rq.text());
    assert_eq!(rq.json()["outcomes"][0]["status"], "ok", "{}", rq.text());
    let jobs = support::get_with(r.addr, "/api/jobs", &[("Cookie", &op)])
        .await
        .json();
    let j = jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["job"]["id"] == job)
        .expect("job")
        .clone();
    assert_eq!(j["restart_count"], 1);
    assert_eq!(j["job"]["state"], "pending");
    // A retry of the requeue does nothing and says so.
    let again = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [job], "reason": "loss spike after a bad node"}),
    )
    .await;
    assert_eq!(again.json()["outcomes"][0]["status"], "already");

    // The audit log: every attempt, who, what, and the verified result.
    let audit = support::get_with(r.addr, "/api/audit", &[("Cookie", &op)]).await;
    assert_eq!(audit.status, 200);
    let entries = audit.json()["entries"].as_array().expect("entries").clone();
    let mine: Vec<_> = entries
        .iter()
        .filter(|e| {
            e["target"] == node.as_str() || e["target"].as_str() == Some(job.to_string().as_str())
        })
        .collect();
    assert_eq!(mine.len(), 5, "{mine:?}");
    // The requeue's reason is in the audit log, after who acted.
    assert!(
        mine.iter()
            .any(|e| e["action"] == "requeue"
                && e["detail"] == "operator1: loss spike after a bad node"),
        "{mine:?}"
    );
    assert!(mine
        .iter()
        .all(|e| e["finished_ms"].is_i64() && e["status"] != "started"));
    for who in ["operator1", "operator2"] {
        assert!(
            mine.iter()
                .any(|e| e["action"] == "drain" && e["user"] == who),
            "{who}"
        );
    }
    let csv = support::get_with(
        r.addr,
        "/api/audit?format=csv&action=drain",
        &[("Cookie", &op)],
    )
    .await;
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    let text = csv.text();
    assert!(
        text.starts_with("id,at_utc,user,role,action,target,detail,status,result,finished_utc\n")
    );
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("resume"));
    // A viewer may not read the audit log.
    assert_eq!(
        support::get_with(r.addr, "/api/audit", &[("Cookie", &viewer)])
            .await
            .status,
        403
    );

    // The job's history shows the requeue.
    let mut events = Vec::new();
    for _ in 0..50 {
        events = r.store.job_events(job).await.expect("events");
        if events
            .iter()
            .any(|e| e.state == app::model::JobState::Requeued)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        events
            .iter()
            .any(|e| e.state == app::model::JobState::Requeued),
        "{events:?}"
    );
    assert_eq!(r.store.requeue_count(job).await.expect("count"), Some(1));
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn actions_are_previewed_audited_and_verified_on_sqlite() {
    action_story(support::sqlite_url()).await;
}

#[tokio::test]
async fn actions_are_previewed_audited_and_verified_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    action_story(url).await;
}

#[tokio::test]
async fn actions_are_rate_limited_per_user() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.auth.actions_per_minute = 2;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    let admin = login(r.addr, "admin1").await;
    let body = json!({"nodes": ["gpu001"], "reason": "rate"});
    for _ in 0..2 {
        assert_eq!(
            post_json(r.addr, "/api/actions/drain?wait=20", Some(&op), &body)
                .await
                .status,
            200
        );
    }
    let third = post_json(r.addr, "/api/actions/drain?wait=20", Some(&op), &body).await;
    assert_eq!(third.status, 429, "{}", third.text());
    assert_eq!(
        third.header("retry-after"),
        Some("60"),
        "429 says when to try again"
    );
    // Another user is not limited by the first.
    assert_eq!(
        post_json(
            r.addr,
            "/api/actions/resume?wait=20",
            Some(&admin),
            &json!({"nodes": ["gpu001"]})
        )
        .await
        .status,
        200
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_scheduler_that_does_not_answer_leaves_nothing_half_done() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.source = server::config::SourceKind::Slurm;
    cfg.slurm.bin_dir = Some("/nonexistent/slurm/bin".into());
    cfg.slurm.poll_interval_ms = 500;
    let r = server::serve::start(cfg).await.expect("start");
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    // No poll succeeded: not ready, and no data shown as current.
    assert_eq!(support::get(r.addr, "/healthz").await.status, 503);
    assert_eq!(
        support::get_with(r.addr, "/api/nodes", &[("Cookie", &op)])
            .await
            .status,
        503
    );
    // An action fails with a clear message, before anything is written or called.
    let e = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu001"], "reason": "x"}),
    )
    .await;
    assert_eq!(e.status, 502, "{}", e.text());
    let msg = e.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(msg.contains("cannot run"), "{msg}");
    assert!(r
        .store
        .audit(&Default::default())
        .await
        .expect("audit")
        .is_empty());
    // Failing polls are counted, for alerting on Gantry itself.
    let errors = support::metric(r.addr, "gantry_slurm_poll_errors_total").await;
    assert!(errors >= 2, "{errors} failed polls counted");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn a_trusted_proxy_names_the_user_and_nobody_else_can() {
    let start_with = |trusted: &str| {
        let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
        cfg.auth.anonymous_read = false;
        cfg.auth.proxy_header = Some("X-Remote-User".into());
        cfg.auth.trusted_proxies = vec![trusted.parse().expect("ip")];
        cfg
    };
    // The test connects from 127.0.0.1: trusted.
    let r = server::serve::start(start_with("127.0.0.1"))
        .await
        .expect("start");
    add_users(&r.store).await;
    let me = support::get_with(r.addr, "/api/whoami", &[("X-Remote-User", "operator1")]).await;
    assert_eq!(me.json()["role"], "operator");
    // Known at the proxy, unknown here: nothing allowed.
    let stranger = support::get_with(r.addr, "/api/whoami", &[("X-Remote-User", "mallory")]).await;
    assert_eq!(stranger.status, 401);
    // Known here but disabled: nothing allowed either.
    server::auth::set_disabled(&r.store, &server::auth::Actor::cli(), "operator1", true)
        .await
        .expect("disable");
    let disabled =
        support::get_with(r.addr, "/api/whoami", &[("X-Remote-User", "operator1")]).await;
    assert_eq!(disabled.status, 401);
    r.stop().await.expect("stop");
    // From a peer that is not the proxy, the header is ignored.
    let r = server::serve::start(start_with("10.9.8.7"))
        .await
        .expect("start");
    add_users(&r.store).await;
    let me = support::get_with(r.addr, "/api/whoami", &[("X-Remote-User", "operator1")]).await;
    assert_eq!(me.status, 401);
    r.stop().await.expect("stop");
    // A proxy header without trusted proxies is refused at start.
    let env = vec![(
        "GANTRY_PROXY_HEADER".to_string(),
        "X-Remote-User".to_string(),
    )];
    let e = server::config::Config::load(None, env).expect_err("no trusted proxies");
    assert!(e.to_string().contains("auth.trusted_proxies"), "{e}");
}

/// `/api/admin/`: an admin lists users and sessions, revokes one session, changes a role,
/// disables, enables and deletes; each change ends the user's sessions at once, is audited
/// first, and no answer carries a session token or its digest.
async fn admin_story(db: String) {
    let r = start(db, false).await;
    let admin = login(r.addr, "admin1").await;
    let op_a = login(r.addr, "operator1").await;
    let op_b = login(r.addr, "operator1").await;
    let op2 = login(r.addr, "operator2").await;
    let whoami = |cookie: String| async move {
        support::get_with(r.addr, "/api/whoami", &[("Cookie", cookie.as_str())])
            .await
            .status
    };
    let get = |path: &'static str| {
        let admin = admin.clone();
        async move { support::get_with(r.addr, path, &[("Cookie", admin.as_str())]).await }
    };
    let post = |path: String, body: serde_json::Value| {
        let admin = admin.clone();
        async move { post_json(r.addr, &path, Some(&admin), &body).await }
    };
    // An operator may not even read them.
    let no = support::get_with(r.addr, "/api/admin/users", &[("Cookie", op_a.as_str())]).await;
    assert_eq!(no.status, 403);

    let users = get("/api/admin/users").await;
    assert_eq!(users.status, 200, "{}", users.text());
    let users = users.json();
    let op1 = users["users"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["name"] == "operator1")
        .expect("operator1")
        .clone();
    assert_eq!(
        (&op1["role"], &op1["disabled"], &op1["sessions"]),
        (&json!("operator"), &json!(false), &json!(2)),
        "{op1}"
    );
    assert!(op1["created_ms"].is_i64() && op1.get("password_hash").is_none());

    // Sessions: opaque ids; neither a token nor its digest, nor a part of one, anywhere.
    let listed = get("/api/admin/sessions").await;
    assert_eq!(listed.status, 200);
    let text = listed.text();
    let sessions = listed.json()["sessions"]
        .as_array()
        .expect("sessions")
        .clone();
    assert_eq!(sessions.len(), 4, "{text}");
    for cookie in [&admin, &op_a, &op_b, &op2] {
        let token = cookie.split_once('=').expect("cookie").1;
        let digest = server::auth::token_digest(token);
        assert!(!text.contains(token) && !text.contains(&digest), "{text}");
        for s in &sessions {
            let id = s["id"].as_str().expect("id");
            assert!(!digest.contains(id) && !token.contains(id), "{id}");
        }
    }
    let s = &sessions[0];
    for key in [
        "user",
        "created_ms",
        "last_seen_ms",
        "expires_ms",
        "idle_expires_ms",
    ] {
        assert!(!s[key].is_null(), "{key} in {s}");
    }

    // Revoke one of operator1's two sessions: that one ends now, the other goes on.
    let before = r.store.auth_epoch().await.expect("epoch");
    let op_ids: Vec<String> = sessions
        .iter()
        .filter(|s| s["user"] == "operator1")
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(op_ids.len(), 2);
    let rv = post(
        format!("/api/admin/sessions/{}/revoke", op_ids[0]),
        json!({}),
    )
    .await;
    assert_eq!(rv.status, 200, "{}", rv.text());
    assert_eq!(rv.json()["user"], "operator1");
    assert!(r.store.auth_epoch().await.expect("epoch") > before);
    let mut left = [whoami(op_a.clone()).await, whoami(op_b.clone()).await];
    left.sort();
    assert_eq!(left, [200, 401], "exactly one of the two ended");
    let again = post(
        format!("/api/admin/sessions/{}/revoke", op_ids[0]),
        json!({}),
    )
    .await;
    assert_eq!(again.status, 404);

    // A role change ends the other one; signing in again gives the new role.
    let rc = post(
        "/api/admin/users/operator1/role".into(),
        json!({"role": "viewer"}),
    )
    .await;
    assert_eq!(rc.status, 200, "{}", rc.text());
    assert_eq!(rc.json()["sessions_ended"], 1);
    assert_eq!(whoami(op_a.clone()).await, 401);
    assert_eq!(whoami(op_b.clone()).await, 401);
    let again = login(r.addr, "operator1").await;
    let me = support::get_with(r.addr, "/api/whoami", &[("Cookie", again.as_str())]).await;
    assert_eq!(me.json()["role"], "viewer");
    let bad = post(
        "/api/admin/users/operator1/role".into(),
        json!({"role": "root"}),
    )
    .await;
    assert_eq!(bad.status, 400);

    // Disable: signed out at once, and the right password no longer signs in.
    let d = post("/api/admin/users/operator2/disable".into(), json!({})).await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(whoami(op2.clone()).await, 401);
    let form = format!(
        "name=operator2&password={}&next=/",
        support::PASSWORD.replace(' ', "+")
    );
    let refused = request(
        r.addr,
        "POST",
        "/auth/login",
        &[],
        Some(("application/x-www-form-urlencoded", form.as_bytes())),
    )
    .await;
    assert_eq!(refused.status, 303);
    assert!(refused.header("set-cookie").is_none());
    assert!(refused
        .header("location")
        .unwrap_or("")
        .starts_with("/login?error=1"));
    let e = post("/api/admin/users/operator2/enable".into(), json!({})).await;
    assert_eq!(e.status, 200, "{}", e.text());
    let back = login(r.addr, "operator2").await;
    assert_eq!(whoami(back.clone()).await, 200);

    // Delete: gone, its sessions too; unknown names are 404; the last admin stays one.
    let del = post("/api/admin/users/operator2/delete".into(), json!({})).await;
    assert_eq!(del.status, 200, "{}", del.text());
    assert_eq!(whoami(back).await, 401);
    let gone = post("/api/admin/users/operator2/delete".into(), json!({})).await;
    assert_eq!(gone.status, 404);
    assert!(gone.text().contains("no user"), "{}", gone.text());
    let last = post(
        "/api/admin/users/admin1/role".into(),
        json!({"role": "operator"}),
    )
    .await;
    assert_eq!(last.status, 400);
    assert!(
        last.text().contains("last enabled admin"),
        "{}",
        last.text()
    );
    assert_eq!(
        whoami(admin.clone()).await,
        200,
        "the admin is still signed in"
    );

    // The audit log: each change, by admin1, completed.
    let audit = support::get_with(
        r.addr,
        "/api/audit?user=admin1",
        &[("Cookie", admin.as_str())],
    )
    .await
    .json();
    let rows: Vec<(String, String, String)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .rev()
        .map(|e| {
            (
                e["action"].as_str().unwrap_or("").to_string(),
                e["target"].as_str().unwrap_or("").to_string(),
                e["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = [
        ("session_revoke", "operator1"),
        ("user_role", "operator1"),
        ("user_disable", "operator2"),
        ("user_enable", "operator2"),
        ("user_delete", "operator2"),
    ]
    .iter()
    .map(|(a, t)| (a.to_string(), t.to_string(), "ok".to_string()))
    .collect();
    assert_eq!(rows, want);
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn admins_manage_users_and_sessions_on_sqlite() {
    admin_story(support::sqlite_url()).await;
}

#[tokio::test]
async fn admins_manage_users_and_sessions_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    admin_story(url).await;
}

/// `/admin` and its forms: an admin sees every user and session and changes them by plain
/// form posts (answered with a redirect back saying what was done); no one else sees it.
#[tokio::test]
async fn the_admin_page_manages_users_with_plain_forms() {
    let r = start(support::sqlite_url(), false).await;
    let admin = login(r.addr, "admin1").await;
    let viewer = login(r.addr, "viewer1").await;
    let html = [("Accept", "text/html")];
    // Only admins get the page and its data.
    for (who, cookie) in [
        ("viewer", &viewer),
        ("operator", &login(r.addr, "operator1").await),
    ] {
        let page = support::get_with(
            r.addr,
            "/admin",
            &[("Accept", "text/html"), ("Cookie", cookie)],
        )
        .await;
        assert_eq!(page.status, 403, "{who}");
        let data = request(
            r.addr,
            "POST",
            "/api/admin_users",
            &[("Cookie", cookie)],
            Some(("application/json", b"{}")),
        )
        .await;
        assert_eq!(data.status, 403, "{who}");
    }
    let page = support::get_with(r.addr, "/admin", &[html[0], ("Cookie", &admin)]).await;
    assert_eq!(page.status, 200);
    let text = page.text();
    for name in ["viewer1", "operator1", "manager1", "admin1"] {
        assert!(
            text.contains(&format!("data-user=\"{name}\"")),
            "{name} listed"
        );
    }
    assert!(
        text.contains("Revoke viewer1&#x27;s session") || text.contains("Revoke viewer1's session"),
        "{text}"
    );
    // A form changes a role and comes back saying so; the viewer's session is over.
    let form = |body: &'static str| Some(("application/x-www-form-urlencoded", body.as_bytes()));
    let set = request(
        r.addr,
        "POST",
        "/api/admin/users/viewer1/role",
        &[("Cookie", &admin)],
        form("role=operator"),
    )
    .await;
    assert_eq!(set.status, 303, "{}", set.text());
    let to = set.header("location").unwrap_or("").to_string();
    assert!(
        to.starts_with("/admin?done=viewer1%20is%20now%20operator"),
        "{to}"
    );
    assert_eq!(
        support::get_with(r.addr, "/api/whoami", &[("Cookie", &viewer)])
            .await
            .json()["user"],
        serde_json::Value::Null
    );
    // Deleting asks for the box to be ticked; a refusal comes back as an error.
    let del = request(
        r.addr,
        "POST",
        "/api/admin/users/viewer1/delete",
        &[("Cookie", &admin)],
        form(""),
    )
    .await;
    assert_eq!(del.status, 303);
    assert!(
        del.header("location")
            .unwrap_or("")
            .starts_with("/admin?error="),
        "{:?}",
        del.header("location")
    );
    assert!(
        r.store.user("viewer1").await.expect("user").is_some(),
        "not deleted unconfirmed"
    );
    let del = request(
        r.addr,
        "POST",
        "/api/admin/users/viewer1/delete",
        &[("Cookie", &admin)],
        form("confirm=yes"),
    )
    .await;
    assert_eq!(del.status, 303);
    assert!(r.store.user("viewer1").await.expect("user").is_none());
    // The last admin cannot be disabled, even by a form: the page says why.
    let last = request(
        r.addr,
        "POST",
        "/api/admin/users/admin1/disable",
        &[("Cookie", &admin)],
        form(""),
    )
    .await;
    let loc = last.header("location").unwrap_or("");
    assert!(loc.starts_with("/admin?error="), "{loc}");
    // JSON callers still get JSON.
    let j = request(
        r.addr,
        "POST",
        "/api/admin/users/operator1/disable",
        &[("Cookie", &admin)],
        None,
    )
    .await;
    assert_eq!(j.status, 200, "{}", j.text());
    assert_eq!(j.json()["disabled"], true);
    r.stop().await.expect("stop");
}

/// A browser refused a page for its role gets a page in Gantry's frame saying whom the
/// page is for (403), without the page's data; a JSON client keeps the error envelope; a
/// missing page is a page too (404). The top bar offers only what the role may open.
#[tokio::test]
async fn pages_refused_for_a_role_say_so_in_html() {
    let r = start(support::sqlite_url(), false).await;
    let viewer = login(r.addr, "viewer1").await;
    let manager = login(r.addr, "manager1").await;
    let operator = login(r.addr, "operator1").await;
    // Something in the audit log, which must not reach those refused.
    let b = json!({"nodes": ["gpu003"], "reason": "secret maintenance note"});
    let done = post_json(r.addr, "/api/actions/drain?wait=20", Some(&operator), &b).await;
    assert_eq!(done.status, 200, "{}", done.text());
    for (who, cookie, path, words) in [
        (
            "viewer",
            &viewer,
            "/audit",
            "This page is for operators and admins",
        ),
        (
            "manager",
            &manager,
            "/audit",
            "This page is for operators and admins",
        ),
        (
            "viewer",
            &viewer,
            "/reports",
            "This page is for managers and admins",
        ),
        ("operator", &operator, "/admin", "This page is for admins"),
        (
            "viewer",
            &viewer,
            "/reliability",
            "This page is for operators, managers and admins",
        ),
    ] {
        let page =
            support::get_with(r.addr, path, &[("Accept", "text/html"), ("Cookie", cookie)]).await;
        assert_eq!(page.status, 403, "{who} {path}");
        let html = page.text();
        assert!(html.contains(words), "{who} {path}: {html}");
        assert!(
            html.contains("class=\"topbar\""),
            "in Gantry's frame: {who} {path}"
        );
        assert!(
            !html.contains("secret maintenance note"),
            "{who} {path} got the data"
        );
        assert!(!html.contains("data-test=\"audit-table\""), "{who} {path}");
        // Without asking for HTML: the JSON envelope, as before.
        let api = support::get_with(r.addr, path, &[("Cookie", cookie)]).await;
        assert_eq!(api.status, 403, "{who} {path}");
        assert_eq!(api.json()["error"]["status"], 403);
    }
    // The top bar: Audit for operators only (of these), Reports for managers.
    let top = |html: &str, link: &str| html.contains(&format!("href=\"{link}\""));
    let v = support::get_with(r.addr, "/", &[("Accept", "text/html"), ("Cookie", &viewer)])
        .await
        .text();
    let m = support::get_with(
        r.addr,
        "/",
        &[("Accept", "text/html"), ("Cookie", &manager)],
    )
    .await
    .text();
    let o = support::get_with(
        r.addr,
        "/audit",
        &[("Accept", "text/html"), ("Cookie", &operator)],
    )
    .await;
    assert!(
        !top(&v, "/audit") && !top(&v, "/reports") && !top(&v, "/admin"),
        "viewer's bar"
    );
    assert!(!top(&m, "/audit") && top(&m, "/reports"), "manager's bar");
    assert_eq!(o.status, 200);
    let o = o.text();
    assert!(top(&o, "/audit") && !top(&o, "/reports"), "operator's bar");
    assert!(
        o.contains("secret maintenance note"),
        "the operator sees the log"
    );
    // A missing page is a page in the frame, 404.
    let missing = support::get_with(
        r.addr,
        "/no/such/page",
        &[("Accept", "text/html"), ("Cookie", &viewer)],
    )
    .await;
    assert_eq!(missing.status, 404);
    assert!(missing.text().contains("class=\"topbar\""));
    r.stop().await.expect("stop");
}

/// Follows an action to its end through `GET /api/actions/{id}`.
async fn follow(addr: std::net::SocketAddr, cookie: &str, id: i64) -> serde_json::Value {
    let mut seen = 0;
    for _ in 0..40 {
        let r = support::get_with(
            addr,
            &format!("/api/actions/{id}?wait=5&seen={seen}"),
            &[("Cookie", cookie)],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let s = r.json();
        if s["state"] == "done" || s["state"] == "stopped" {
            return s;
        }
        seen = s["outcomes"].as_array().map_or(0, |o| {
            o.iter()
                .filter(|t| t["status"] != "pending" && t["status"] != "calling")
                .count()
        });
    }
    panic!("action {id} did not end");
}

/// An action is answered at once (202, a URL to follow, every target pending) and runs on
/// its own: a request that gives up waiting changes nothing, and its end is verified.
async fn detached_story(db: String) {
    let r = start(db, false).await;
    let op = login(r.addr, "operator1").await;
    let viewer = login(r.addr, "viewer1").await;
    let nodes = ["gpu001", "gpu002", "gpu003", "gpu004"];
    let a = post_json(
        r.addr,
        "/api/actions/drain",
        Some(&op),
        &json!({"nodes": nodes, "reason": "detached"}),
    )
    .await;
    assert_eq!(a.status, 202, "{}", a.text());
    let s = a.json();
    let id = s["id"].as_i64().expect("id");
    assert_eq!(
        a.header("location"),
        Some(format!("/api/actions/{id}").as_str())
    );
    assert_eq!(s["url"], format!("/api/actions/{id}"));
    assert_eq!(s["user"], "operator1");
    let outcomes = s["outcomes"].as_array().expect("outcomes");
    assert_eq!(outcomes.len(), 4);
    assert!(outcomes.iter().all(|o| o["status"] == "pending"), "{s}");
    // The record of intent is in the audit log before anything is called.
    let audit = r.store.audit(&Default::default()).await.expect("audit");
    assert_eq!(
        audit
            .iter()
            .filter(|e| e.detail == "operator1: detached")
            .count(),
        4
    );
    let end = follow(r.addr, &op, id).await;
    assert_eq!(end["state"], "done", "{end}");
    for o in end["outcomes"].as_array().expect("outcomes") {
        assert_eq!(o["status"], "ok", "{end}");
        assert!(
            o["message"].as_str().unwrap_or("").starts_with("verified"),
            "{o}"
        );
    }
    for n in nodes {
        assert!(
            matches!(
                node_json(r.addr, &op, n).await["state"].as_str(),
                Some("draining" | "drained")
            ),
            "{n}"
        );
    }
    // Only those who may act follow actions; an unknown one is 404.
    let v = support::get_with(
        r.addr,
        &format!("/api/actions/{id}"),
        &[("Cookie", &viewer)],
    )
    .await;
    assert_eq!(v.status, 403);
    let none = support::get_with(r.addr, "/api/actions/99999999", &[("Cookie", &op)]).await;
    assert_eq!(none.status, 404);

    // A request that waits for the end but whose client goes away at once: the resume
    // still runs to its verified end.
    let body = json!({"nodes": nodes}).to_string();
    let req = format!(
        "POST /api/actions/resume?wait=20 HTTP/1.1\r\nHost: {}\r\nCookie: {op}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        r.addr,
        body.len()
    );
    {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(r.addr)
            .await
            .expect("connect");
        s.write_all(req.as_bytes()).await.expect("write");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut resumed = false;
    for _ in 0..100 {
        let rows = r.store.audit(&Default::default()).await.expect("audit");
        let mine: Vec<_> = rows.iter().filter(|e| e.action == "resume").collect();
        if mine.len() == 4 && mine.iter().all(|e| e.status == "ok") {
            resumed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(resumed, "{:?}", r.store.audit(&Default::default()).await);
    for n in nodes {
        assert_ne!(node_json(r.addr, &op, n).await["state"], "draining", "{n}");
    }
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn actions_run_detached_from_their_request_on_sqlite() {
    detached_story(support::sqlite_url()).await;
}

#[tokio::test]
async fn actions_run_detached_from_their_request_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    detached_story(url).await;
}

/// What a server killed mid-action leaves behind, settled by the next one: a call that
/// may have been sent is judged by reading the scheduler back and never made again; a
/// target not yet reached runs if the action is recent, else is marked interrupted; rows
/// of a server from before durable actions are closed with what the scheduler shows.
async fn recovery_story(db: String) {
    use app::actions::{ActionKind, Role};
    let store = server::store::Store::connect(&db).await.expect("store");
    let now = server::clock::wall_now_ms();
    let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // A drain cut off mid-rack: gpu001 done, gpu002 in its call (which never reached the
    // scheduler), gpu003 not reached.
    let (recent, ids) = store
        .action_record(
            now - 30_000,
            "operator1",
            Role::Operator,
            ActionKind::Drain,
            "operator1: cut",
            &list(&["gpu001", "gpu002", "gpu003"]),
        )
        .await
        .expect("record");
    store
        .action_set_state(recent, "running", "", None)
        .await
        .expect("state");
    store
        .audit_calling(ids[0], now - 29_000, "0")
        .await
        .expect("calling");
    store
        .audit_finish(ids[0], "ok", "verified: DRAIN", now - 28_000)
        .await
        .expect("finish");
    assert!(store
        .audit_calling(ids[1], now - 27_000, "0")
        .await
        .expect("calling"));
    // A resume whose call landed (the simulator's nodes are not drained): verified by
    // reading back.
    let (landed, lids) = store
        .action_record(
            now - 20_000,
            "operator1",
            Role::Operator,
            ActionKind::Resume,
            "",
            &list(&["gpu005"]),
        )
        .await
        .expect("record");
    store
        .audit_calling(lids[0], now - 19_000, "0")
        .await
        .expect("calling");
    // A drain recorded 20 minutes ago and never started: not run now.
    let (old, _) = store
        .action_record(
            now - 20 * 60_000,
            "operator1",
            Role::Operator,
            ActionKind::Drain,
            "operator1: old",
            &list(&["gpu004"]),
        )
        .await
        .expect("record");
    // A row of a server from before durable actions.
    let legacy = store
        .audit_begin(
            now - 60_000,
            "operator1",
            Role::Operator,
            "drain",
            "gpu006",
            "operator1: legacy",
        )
        .await
        .expect("legacy");
    drop(store);

    let r = start(db, false).await;
    let op = login(r.addr, "operator1").await;
    let cut = follow(r.addr, &op, recent).await;
    assert_eq!(cut["state"], "done", "{cut}");
    let st = |s: &serde_json::Value, i: usize| {
        s["outcomes"][i]["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(st(&cut, 0), "ok");
    assert_eq!(st(&cut, 1), "interrupted", "{cut}");
    assert!(
        cut["outcomes"][1]["message"]
            .as_str()
            .unwrap_or("")
            .contains("did not take effect; not called again"),
        "{cut}"
    );
    assert_eq!(st(&cut, 2), "ok", "{cut}");
    // Never called again: gpu002 is as the simulator had it; gpu003 was drained now.
    assert!(!matches!(
        node_json(r.addr, &op, "gpu002").await["state"].as_str(),
        Some("draining" | "drained")
    ));
    assert!(matches!(
        node_json(r.addr, &op, "gpu003").await["state"].as_str(),
        Some("draining" | "drained")
    ));
    let l = follow(r.addr, &op, landed).await;
    assert_eq!(st(&l, 0), "ok", "{l}");
    assert!(
        l["outcomes"][0]["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("verified after a restart"),
        "{l}"
    );
    let o = follow(r.addr, &op, old).await;
    assert_eq!(st(&o, 0), "interrupted", "{o}");
    assert!(
        o["outcomes"][0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("over 10 minutes old"),
        "{o}"
    );
    assert!(!matches!(
        node_json(r.addr, &op, "gpu004").await["state"].as_str(),
        Some("draining" | "drained")
    ));
    let rows = r.store.audit(&Default::default()).await.expect("audit");
    let leg = rows.iter().find(|e| e.id == legacy).expect("legacy row");
    assert_eq!(leg.status, "interrupted", "{leg:?}");
    assert!(leg.result.contains("the scheduler shows"), "{leg:?}");
    assert!(
        rows.iter()
            .all(|e| !matches!(e.status.as_str(), "pending" | "calling" | "started")),
        "{rows:?}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn unfinished_actions_are_reconciled_at_start_on_sqlite() {
    recovery_story(support::sqlite_url()).await;
}

#[tokio::test]
async fn unfinished_actions_are_reconciled_at_start_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    recovery_story(url).await;
}

/// An audit log that fails mid-action stops it there and says exactly what was done
/// (SQLite, with a trigger that refuses the third target's row as a full disk would).
#[tokio::test]
async fn an_audit_log_that_fails_mid_action_stops_it_and_says_what_was_done() {
    let db = support::sqlite_url();
    let r = start(db.clone(), false).await;
    let op = login(r.addr, "operator1").await;
    {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&db).await.expect("connect");
        sqlx::query(
            "CREATE TRIGGER fail_gpu003 BEFORE UPDATE OF status ON audit \
             WHEN NEW.target = 'gpu003' AND NEW.status = 'calling' \
             BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
        )
        .execute(&mut c)
        .await
        .expect("trigger");
    }
    let a = post_json(
        r.addr,
        "/api/actions/drain?wait=20",
        Some(&op),
        &json!({"nodes": ["gpu001", "gpu002", "gpu003", "gpu004"], "reason": "disk"}),
    )
    .await;
    assert_eq!(a.status, 207, "{}", a.text());
    let s = a.json();
    assert_eq!(s["state"], "stopped", "{s}");
    let note = s["note"].as_str().unwrap_or("");
    assert!(
        note.contains("at gpu003 (not called)")
            && note.contains("done before it: gpu001 (ok), gpu002 (ok)")
            && note.contains("not done: gpu004"),
        "{note}"
    );
    for (n, drained) in [
        ("gpu001", true),
        ("gpu002", true),
        ("gpu003", false),
        ("gpu004", false),
    ] {
        let st = node_json(r.addr, &op, n).await;
        assert_eq!(
            matches!(st["state"].as_str(), Some("draining" | "drained")),
            drained,
            "{n}: {st}"
        );
    }
    // The store has it too (its own row could still be written).
    let stored = r
        .store
        .action(s["id"].as_i64().expect("id"))
        .await
        .expect("read")
        .expect("action");
    assert_eq!(stored.state, "stopped");
    r.stop().await.expect("stop");
}

/// A drain's preview says what it does to free segments: the idle node's block goes from
/// its idle count (as the scheduler shows it, read around the preview) to one fewer.
#[tokio::test]
async fn a_drain_preview_says_what_it_costs_in_segments() {
    let r = start(support::sqlite_url(), false).await;
    let op = login(r.addr, "operator1").await;
    for _ in 0..20 {
        let idle_of = |nodes: &serde_json::Value| -> Vec<(String, usize)> {
            nodes["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .filter(|n| n["state"] == "idle")
                .map(|n| {
                    let name = n["name"].as_str().expect("name").to_string();
                    let block = (name[3..].parse::<usize>().expect("gpuNNN") - 1) / 16;
                    (name, block)
                })
                .collect()
        };
        let before = idle_of(
            &support::get_with(r.addr, "/api/nodes", &[("Cookie", &op)])
                .await
                .json(),
        );
        let Some((node, block)) = before.first().cloned() else {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            continue;
        };
        let p = post_json(
            r.addr,
            "/api/actions/preview",
            Some(&op),
            &json!({"action": "drain", "nodes": [node]}),
        )
        .await
        .json();
        let after = idle_of(
            &support::get_with(r.addr, "/api/nodes", &[("Cookie", &op)])
                .await
                .json(),
        );
        if before != after {
            continue; // the cluster moved during the preview
        }
        let idle = before.iter().filter(|(_, b)| *b == block).count();
        let want = format!(
            "Segments: block block{:02} goes from {idle} to {} free nodes",
            block + 1,
            idle - 1
        );
        let summary = p["summary"].as_str().expect("summary");
        assert!(summary.contains(&want), "{summary}\nwanted: {want}");
        r.stop().await.expect("stops");
        return;
    }
    panic!("the cluster never held still for a preview");
}

/// A requeue that keeps its job off the node blamed for its failure (Slurm's
/// `ExcNodeList`): verified in what the simulated scheduler shows, and the job, once it
/// runs again, runs elsewhere. Only a requeue takes `exclude`, and only nodes that exist.
#[tokio::test]
async fn a_requeue_keeps_its_job_off_the_excluded_node() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 2000.0, 200);
    cfg.auth.anonymous_read = false;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    let running = || {
        r.live.sched().and_then(|s| {
            s.jobs
                .iter()
                .find(|j| j.job.state == app::model::JobState::Running && !j.job.nodes.is_empty())
                .cloned()
        })
    };
    let mut job = None;
    for _ in 0..300 {
        job = running();
        if job.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let job = job.expect("a running job");
    let (id, blamed) = (job.job.id, job.job.nodes[0].clone());
    for (path, body, status) in [
        (
            "/api/actions/drain?wait=20",
            json!({"nodes": [blamed], "reason": "x", "exclude": ["gpu001"]}),
            400,
        ),
        (
            "/api/actions/requeue?wait=20",
            json!({"jobs": [id], "reason": "x", "exclude": ["gpu999"]}),
            404,
        ),
        (
            "/api/actions/requeue?wait=20",
            json!({"jobs": [id], "reason": "x", "exclude": ["gpu001; reboot"]}),
            400,
        ),
    ] {
        let e = post_json(r.addr, path, Some(&op), &body).await;
        assert_eq!(e.status, status, "{body}: {}", e.text());
    }
    let rq = post_json(
        r.addr,
        "/api/actions/requeue?wait=20",
        Some(&op),
        &json!({"jobs": [id], "reason": "XID 79", "exclude": [blamed]}),
    )
    .await;
    let body = rq.json();
    assert_eq!(body["outcomes"][0]["status"], "ok", "{body:#}");
    assert!(
        body["outcomes"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("excluding {blamed}"))),
        "{body:#}"
    );
    // Back on other nodes once it runs again (two simulated minutes at the earliest).
    let mut again = None;
    for _ in 0..600 {
        again = r.live.sched().and_then(|s| {
            s.jobs
                .iter()
                .find(|j| j.job.id == id && j.job.state == app::model::JobState::Running)
                .cloned()
        });
        if again.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let again = again.expect("the job ran again");
    assert_eq!(again.excluded, std::slice::from_ref(&blamed));
    assert!(!again.job.nodes.contains(&blamed), "{:?}", again.job.nodes);
    assert_eq!(again.restart_count, 1);
    r.stop().await.expect("stop");
}
