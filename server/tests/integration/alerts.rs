//! Alerts end to end on the simulator: rules fire on what the simulated cluster does, a
//! webhook receiver gets exactly one delivery per firing and per resolution, the opt-in
//! policy drains the failing node through the audited action path; and the ingest API.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use crate::support::{self, add_users, login, post_json, request};

/// A webhook receiver on a real socket: every body it was sent.
pub(crate) async fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let g = Arc::clone(&got);
    let app = Router::new().route(
        "/hook",
        post(move |body: axum::body::Bytes| {
            let g = Arc::clone(&g);
            async move {
                if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                    g.lock().expect("lock").push(v);
                }
                "ok"
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (format!("http://{addr}/hook"), got)
}

async fn wait_for<F: FnMut() -> bool>(what: &str, mut f: F) {
    for _ in 0..300 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

#[tokio::test]
async fn a_bad_gpu_fires_is_drained_by_policy_and_resolves() {
    let (url, got) = receiver().await;
    // 20,000 x: the ECC node's GPU fails about two simulated hours in, within a second.
    let mut cfg = support::test_config(support::sqlite_url(), 64, 20_000.0, 200);
    cfg.auth.anonymous_read = false;
    cfg.alerts.webhook_url = Some(url);
    cfg.alerts.auto_drain = true;
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    add_users(&r.store).await;
    let op = login(r.addr, "operator1").await;
    let viewer = login(r.addr, "viewer1").await;

    let fired = |rule: &str, subject: &str| {
        got.lock()
            .expect("lock")
            .iter()
            .any(|v| v["event"] == "firing" && v["rule"] == rule && v["subject"] == subject)
    };
    wait_for("the double-bit ECC alert on gpu038", || {
        fired("ecc_double_bit", "node:gpu038")
    })
    .await;
    // The policy drained it like an operator would: an audit row, verified.
    let verified = |audit: &[app::actions::AuditEntry]| {
        audit.iter().any(|a| {
            a.target == "gpu038"
                && a.action == "drain"
                && a.status == "ok"
                && a.detail.starts_with("gantry: incident ")
        })
    };
    let audit = crate::support::policy_audit_until(&r.store, verified).await;
    assert!(verified(&audit), "auto-drain audit row: {audit:?}");
    // Out of service now: its hardware alerts resolve, and the receiver hears it once.
    let resolved = |subject: &str| {
        got.lock()
            .expect("lock")
            .iter()
            .filter(|v| v["event"] == "resolved" && v["subject"] == subject)
            .count()
    };
    wait_for("the ECC alert resolving", || resolved("node:gpu038") >= 1).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let all = got.lock().expect("lock").clone();
    let mut per: std::collections::HashMap<(i64, String), usize> = Default::default();
    for v in &all {
        *per.entry((
            v["id"].as_i64().unwrap_or(-1),
            v["event"].as_str().unwrap_or("").to_string(),
        ))
        .or_default() += 1;
    }
    assert!(
        per.values().all(|&n| n == 1),
        "exactly one delivery per firing and resolution: {per:?}"
    );
    // Every delivery attempt is logged.
    let id = all
        .iter()
        .find(|v| v["rule"] == "ecc_double_bit")
        .and_then(|v| v["id"].as_i64())
        .expect("id");
    let log = r.store.deliveries(id).await.expect("deliveries");
    assert!(
        log.iter()
            .any(|(e, _, s, _)| e == "firing" && s == "delivered"),
        "{log:?}"
    );

    // The down node is firing; operators acknowledge with a note, viewers may not.
    let list = support::get_with(r.addr, "/api/alerts", &[("Cookie", &op)])
        .await
        .json();
    let down = list["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| {
            a["rule"] == "node_not_responding"
                && a["subject"] == "node:gpu061"
                && a["state"] == "firing"
        })
        .expect("gpu061 not responding")
        .clone();
    let path = format!("/api/alerts/{}/ack", down["id"]);
    assert_eq!(
        post_json(r.addr, &path, Some(&viewer), &json!({"note": "x"}))
            .await
            .status,
        403
    );
    let acked = post_json(
        r.addr,
        &path,
        Some(&op),
        &json!({"note": "PSU ticket 4711"}),
    )
    .await;
    assert_eq!(acked.status, 200, "{}", acked.text());
    assert_eq!(acked.json()["acked_by"], "operator1");
    assert_eq!(acked.json()["ack_note"], "PSU ticket 4711");
    let s = post_json(
        r.addr,
        &format!("/api/alerts/{}/silence", down["id"]),
        Some(&op),
        &json!({"minutes": 60}),
    )
    .await;
    assert!(
        s.json()["silenced_until_ms"].as_i64().is_some(),
        "{}",
        s.text()
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn training_jobs_post_checkpoints_and_nccl_latency() {
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.ingest_token = Some(server::config::Secret::new("ingest-token-for-tests".into()));
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let jobs = support::get(r.addr, "/api/jobs").await.json();
    let job = jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["job"]["state"] == "running")
        .expect("a running job")["job"]["id"]
        .as_u64()
        .expect("id");
    let post = |path: &'static str, token: Option<&'static str>, body: Value| {
        let addr = r.addr;
        async move {
            let b = body.to_string();
            let auth = token.map(|t| format!("Bearer {t}"));
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| ("Authorization", a))
                .into_iter()
                .collect();
            request(
                addr,
                "POST",
                path,
                &headers,
                Some(("application/json", b.as_bytes())),
            )
            .await
        }
    };
    let ck = json!({"job_id": job, "step": 1200, "bytes": 5_000_000_000u64, "duration_ms": 45_000, "path": "/ckpt/x/step-1200", "status": "complete"});
    assert_eq!(
        post("/api/ingest/checkpoint", None, ck.clone())
            .await
            .status,
        401
    );
    assert_eq!(
        post(
            "/api/ingest/checkpoint",
            Some("wrong-token-wrong-token"),
            ck.clone()
        )
        .await
        .status,
        401
    );
    let unknown = post("/api/ingest/checkpoint", Some("ingest-token-for-tests"), json!({"job_id": 999_999, "step": 1, "bytes": 1, "duration_ms": 1, "path": "/x", "status": "complete"})).await;
    assert_eq!(unknown.status, 404, "a job Gantry does not know");
    assert!(unknown.text().contains("unknown job 999999"));
    let ok = post("/api/ingest/checkpoint", Some("ingest-token-for-tests"), ck).await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    let stored = r.store.checkpoints(job).await.expect("checkpoints");
    assert!(stored
        .iter()
        .any(|c| c.step == Some(1200) && c.complete && c.duration_ms == 45_000));
    // Three slow all-reduces in a row: the NCCL rule fires for this job.
    for (step, us) in [(1u64, 40.0), (2, 180.0), (3, 190.0), (4, 210.0)] {
        let resp = post(
            "/api/ingest/nccl",
            Some("ingest-token-for-tests"),
            json!({"job_id": job, "step": step, "latency_us": us, "message_bytes": 8}),
        )
        .await;
        assert_eq!(resp.status, 201, "{}", resp.text());
    }
    assert_eq!(
        post(
            "/api/ingest/nccl",
            Some("ingest-token-for-tests"),
            json!({"job_id": job, "step": 5, "latency_us": -1.0})
        )
        .await
        .status,
        400
    );
    let mut seen = false;
    for _ in 0..50 {
        let list = support::get(r.addr, "/api/alerts").await.json();
        if list["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["rule"] == "nccl_latency" && x["subject"] == format!("job:{job}"))
        }) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "nccl_latency alert for job {job}");
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn the_scanner_records_checkpoints_of_running_jobs() {
    let root = std::env::temp_dir().join(format!("gantry-scan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    // Job 1000 is the simulator's first long run.
    let d = root.join("llama/1000/step-700");
    std::fs::create_dir_all(&d).expect("mkdir");
    for f in [".metadata", "__0_0.distcp", "__1_0.distcp"] {
        std::fs::write(d.join(f), b"shard").expect("write");
    }
    let mut cfg = support::test_config(support::sqlite_url(), 16, 1.0, 200);
    cfg.checkpoint_roots = vec![root.clone()];
    cfg.checkpoint_scan_interval_ms = 1000;
    let r = server::serve::start(cfg).await.expect("start");
    let mut found = Vec::new();
    for _ in 0..50 {
        found = r.store.checkpoints(1000).await.expect("checkpoints");
        if found.iter().any(|c| c.step == Some(700)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = found
        .iter()
        .find(|c| c.step == Some(700))
        .expect("step 700 recorded");
    assert!(c.complete);
    assert_eq!(c.size_bytes, 15);
    r.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(&root);
}

/// At start the store writer is still catching up on a day of history; jobs that checkpoint
/// regularly must not be called overdue meanwhile.
#[tokio::test]
async fn no_false_checkpoint_alerts_while_history_is_written() {
    let (url, got) = receiver().await;
    let mut cfg = support::test_config(support::sqlite_url(), 64, 1.0, 200);
    cfg.alerts.webhook_url = Some(url);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    // Something fires (the down node), so deliveries flow; nothing about checkpoints.
    wait_for("the down node's alert", || {
        got.lock()
            .expect("lock")
            .iter()
            .any(|v| v["rule"] == "node_not_responding")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let overdue: Vec<Value> = got
        .lock()
        .expect("lock")
        .iter()
        .filter(|v| v["rule"] == "checkpoint_overdue")
        .cloned()
        .collect();
    assert!(overdue.is_empty(), "{overdue:?}");
    r.stop().await.expect("stop");
}

/// A silence is about the problem: the same rule and subject firing again while it lasts
/// comes back silenced; another subject, or a firing after it ended, does not.
async fn silence_carries_over(url: String) {
    let store = server::store::Store::connect(&url).await.expect("connect");
    let t0 = 1_795_968_000_000i64;
    let cond = |subject: &str| server::alerts::Condition {
        rule: "pcie_replays",
        subject: subject.into(),
        severity: "warning",
        summary: "PCIe replays rising".into(),
        link: String::new(),
        drain_node: None,
    };
    let (first, none) = store
        .fire_alert(&cond("node:gpu007").as_new_alert(), t0)
        .await
        .expect("fire");
    assert_eq!(none, None);
    assert!(store
        .silence_alert(first, Some(t0 + 3_600_000), "operator1", "", t0)
        .await
        .expect("silence"));
    // Still open: firing again is the same row, silenced.
    assert_eq!(
        store
            .fire_alert(&cond("node:gpu007").as_new_alert(), t0 + 1)
            .await
            .expect("again"),
        (first, Some(t0 + 3_600_000))
    );
    store
        .resolve_alert(first, t0 + 60_000)
        .await
        .expect("resolve");
    let (second, silenced) = store
        .fire_alert(&cond("node:gpu007").as_new_alert(), t0 + 600_000)
        .await
        .expect("fires again");
    assert_ne!(second, first, "a new firing is a new row");
    assert_eq!(silenced, Some(t0 + 3_600_000), "and inherits the silence");
    let other = store
        .fire_alert(&cond("node:gpu008").as_new_alert(), t0 + 600_000)
        .await
        .expect("other node");
    assert_eq!(other.1, None, "another subject is not silenced");
    store
        .resolve_alert(second, t0 + 700_000)
        .await
        .expect("resolve");
    let (_, after) = store
        .fire_alert(&cond("node:gpu007").as_new_alert(), t0 + 3_600_001)
        .await
        .expect("after the silence");
    assert_eq!(after, None, "the silence has ended");
}

#[tokio::test]
async fn a_silence_covers_the_next_firing_on_sqlite() {
    silence_carries_over(support::sqlite_url()).await;
}

#[tokio::test]
async fn a_silence_covers_the_next_firing_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    silence_carries_over(url).await;
}

/// Named ingest tokens over HTTP: one scoped to an account writes for that account's jobs
/// only; an unscoped one for any; a revoked one is refused; none is ever listed.
async fn scoped_ingest_tokens(db: String) {
    use server::auth::{add_ingest_token, revoke_ingest_token, token_digest, Actor};
    let cfg = support::test_config(db, 16, 1.0, 200);
    assert!(cfg.ingest_token.is_none());
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let jobs = support::get(r.addr, "/api/jobs").await.json();
    let jobs: Vec<(u64, String)> = jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["job"]["id"].as_u64().expect("id"),
                j["job"]["account"].as_str().expect("account").to_string(),
            )
        })
        .collect();
    let (mine, account) = jobs.first().expect("a job").clone();
    let (theirs, _) = jobs
        .iter()
        .find(|(_, a)| *a != account)
        .expect("a job of another account")
        .clone();
    let post = |path: &'static str, token: String, body: Value| {
        let addr = r.addr;
        async move {
            let b = body.to_string();
            let auth = format!("Bearer {token}");
            request(
                addr,
                "POST",
                path,
                &[("Authorization", auth.as_str())],
                Some(("application/json", b.as_bytes())),
            )
            .await
        }
    };
    let ck = |job: u64, step: u64| json!({"job_id": job, "step": step, "bytes": 1, "duration_ms": 10, "path": format!("/ckpt/{job}/{step}"), "status": "complete"});
    // No ingest_token and no named token: ingest is off.
    let off = post("/api/ingest/checkpoint", "a".repeat(64), ck(mine, 1)).await;
    assert_eq!(off.status, 403, "{}", off.text());
    assert!(off.text().contains("ingest is off"));

    let cli = Actor::cli();
    let scoped = add_ingest_token(&r.store, &cli, "scoped", Some(&account))
        .await
        .expect("add");
    let any = add_ingest_token(&r.store, &cli, "any", None)
        .await
        .expect("add");
    let ok = post("/api/ingest/checkpoint", scoped.clone(), ck(mine, 1)).await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    let nccl = json!({"job_id": mine, "step": 1, "latency_us": 40.0});
    let ok = post("/api/ingest/nccl", scoped.clone(), nccl).await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    // Another account's job: refused, saying why, and nothing recorded.
    let no = post("/api/ingest/checkpoint", scoped.clone(), ck(theirs, 2)).await;
    assert_eq!(no.status, 403, "{}", no.text());
    assert!(
        no.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("only for jobs of its own account"),
        "{}",
        no.text()
    );
    let nccl = json!({"job_id": theirs, "step": 1, "latency_us": 40.0});
    assert_eq!(
        post("/api/ingest/nccl", scoped.clone(), nccl).await.status,
        403
    );
    assert!(!r
        .store
        .checkpoints(theirs)
        .await
        .expect("checkpoints")
        .iter()
        .any(|c| c.step == Some(2)));
    // An unknown job is still a 404, and an unscoped token writes for any account.
    let unknown = post("/api/ingest/checkpoint", scoped.clone(), ck(999_999, 1)).await;
    assert_eq!(unknown.status, 404);
    let ok = post("/api/ingest/checkpoint", any.clone(), ck(theirs, 3)).await;
    assert_eq!(ok.status, 201, "{}", ok.text());
    assert!(r
        .store
        .checkpoints(theirs)
        .await
        .expect("checkpoints")
        .iter()
        .any(|c| c.step == Some(3)));
    // Listed with its use, never with the token or its digest.
    let listed =
        serde_json::to_string(&r.store.ingest_tokens().await.expect("list")).expect("json");
    let used: Vec<bool> = r
        .store
        .ingest_tokens()
        .await
        .expect("list")
        .iter()
        .map(|t| t.last_used_ms.is_some())
        .collect();
    assert_eq!(used, [true, true], "{listed}");
    for secret in [&scoped, &any, &token_digest(&scoped), &token_digest(&any)] {
        assert!(!listed.contains(secret.as_str()), "{listed}");
    }
    // Revoked: refused from the next request on; a wrong token too.
    revoke_ingest_token(&r.store, &cli, "scoped")
        .await
        .expect("revoke");
    let gone = post("/api/ingest/checkpoint", scoped, ck(mine, 4)).await;
    assert_eq!(gone.status, 401, "{}", gone.text());
    let wrong = post("/api/ingest/checkpoint", "b".repeat(64), ck(mine, 5)).await;
    assert_eq!(wrong.status, 401);
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn scoped_ingest_tokens_on_sqlite() {
    scoped_ingest_tokens(support::sqlite_url()).await;
}

#[tokio::test]
async fn scoped_ingest_tokens_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    scoped_ingest_tokens(url).await;
}

#[tokio::test]
async fn a_fatal_nvswitch_error_fires_naming_switch_and_sxid_and_the_node_page_shows_it() {
    // 2,000 x: gpu024's NVSwitch 2 fails three simulated hours in (5.4 s). Read by
    // scraping the simulator's dcgm-exporter text, which lists the switch fields.
    let cfg = support::test_config(support::sqlite_url(), 64, 2_000.0, 250);
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    let mut alert = None;
    for _ in 0..400 {
        let open = r.store.open_alerts().await.expect("alerts");
        if let Some(a) = open.into_iter().find(|a| a.rule == "nvswitch_fatal") {
            alert = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let alert = alert.expect("an nvswitch_fatal alert within 40 s");
    let truth = r.live.truth(None).expect("truth");
    assert_eq!(truth.nvswitch_fatal, [("gpu024".to_string(), 2, 12028)]);
    assert_eq!(alert.subject, "node:gpu024");
    assert_eq!(alert.severity, "critical");
    assert!(
        alert
            .summary
            .starts_with("gpu024: fatal NVSwitch error (NVSwitch 2 SXid 12028), reset required;"),
        "{}",
        alert.summary
    );
    // Only the failed switch's node.
    let open = r.store.open_alerts().await.expect("alerts");
    assert_eq!(
        open.iter().filter(|a| a.rule == "nvswitch_fatal").count(),
        1
    );
    // The node's page lists its switches, the failed one with its SXid.
    let page = support::get(r.addr, "/nodes/gpu024").await;
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(html.contains(r#"data-test="node-nvswitches""#), "{html}");
    assert_eq!(html.matches(r#"data-test="nvswitch-row""#).count(), 4);
    assert!(html.contains("SXid 12028"));
    r.stop().await.expect("stop");
}
