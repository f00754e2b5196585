//! Ingest's bounds: numbers out of range are refused with a 400 naming the field, and rows
//! an older version stored out of range (written here straight into the database) are
//! skipped, so the alert rules and the job's checkpoints keep working. On both databases.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{self, request, Resp};

const TOKEN: &str = "ingest-token-for-bounds";

async fn post(addr: std::net::SocketAddr, path: &str, body: &Value) -> Resp {
    let b = body.to_string();
    let auth = format!("Bearer {TOKEN}");
    request(
        addr,
        "POST",
        path,
        &[("Authorization", auth.as_str())],
        Some(("application/json", b.as_bytes())),
    )
    .await
}

/// Whether the NCCL rule fires for `job` within 10 s of its slow samples.
async fn nccl_alert_fires(r: &server::serve::Running, job: u64) -> bool {
    for (step, us) in [(1u64, 40.0), (2, 180.0), (3, 190.0), (4, 210.0)] {
        let resp = post(
            r.addr,
            "/api/ingest/nccl",
            &json!({"job_id": job, "step": step, "latency_us": us}),
        )
        .await;
        assert_eq!(resp.status, 201, "{}", resp.text());
    }
    for _ in 0..100 {
        let list = support::get(r.addr, "/api/alerts").await.json();
        if list["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["rule"] == "nccl_latency" && x["subject"] == format!("job:{job}"))
        }) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn running_job(r: &server::serve::Running) -> u64 {
    let jobs = support::get(r.addr, "/api/jobs").await.json();
    jobs["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["job"]["state"] == "running")
        .expect("a running job")["job"]["id"]
        .as_u64()
        .expect("id")
}

async fn start(db: String) -> server::serve::Running {
    let mut cfg = support::test_config(db, 16, 1.0, 200);
    cfg.ingest_token = Some(server::config::Secret::new(TOKEN.into()));
    let r = server::serve::start(cfg).await.expect("start");
    support::wait_ready(&r).await;
    r
}

async fn reports_out_of_range_are_refused(db: String) {
    let r = start(db).await;
    let job = running_job(&r).await;
    let near_max = i64::MAX - 5;
    let huge = 1u64 << 63;
    let ck = |patch: Value| {
        let mut v = json!({"job_id": job, "step": 10, "bytes": 1, "duration_ms": 100,
            "path": "/ckpt/bounds", "status": "complete"});
        if let (Some(v), Some(p)) = (v.as_object_mut(), patch.as_object()) {
            for (k, x) in p {
                v.insert(k.clone(), x.clone());
            }
        }
        v
    };
    let cases = [
        (
            "/api/ingest/checkpoint",
            ck(json!({"started_ms": near_max})),
            "started_ms",
        ),
        (
            "/api/ingest/checkpoint",
            ck(json!({"started_ms": -1})),
            "started_ms",
        ),
        ("/api/ingest/checkpoint", ck(json!({"step": huge})), "step"),
        (
            "/api/ingest/checkpoint",
            ck(json!({"bytes": huge})),
            "bytes",
        ),
        (
            "/api/ingest/checkpoint",
            ck(json!({"duration_ms": near_max})),
            "duration_ms",
        ),
        (
            "/api/ingest/checkpoint",
            ck(json!({"duration_ms": -1})),
            "duration_ms",
        ),
        (
            "/api/ingest/nccl",
            json!({"job_id": job, "step": huge, "latency_us": 10.0}),
            "step",
        ),
        (
            "/api/ingest/nccl",
            json!({"job_id": job, "step": 1, "latency_us": 10.0, "at_ms": near_max}),
            "at_ms",
        ),
        (
            "/api/ingest/nccl",
            json!({"job_id": job, "step": 1, "latency_us": 10.0, "message_bytes": huge}),
            "message_bytes",
        ),
    ];
    for (path, body, field) in &cases {
        let resp = post(r.addr, path, body).await;
        assert_eq!(resp.status, 400, "{path} {body}: {}", resp.text());
        let message = resp.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message.starts_with(&format!("{field}:")),
            "{path} {body}: {message}"
        );
    }
    // Nothing of them was stored; the job's checkpoints read; the rules still run.
    // (The simulator's own jobs save checkpoints too: only ours are looked for.)
    let stored = r.store.checkpoints(job).await.expect("checkpoints read");
    assert!(
        stored.iter().all(|c| c.path != "/ckpt/bounds"),
        "{stored:?}"
    );
    assert!(
        nccl_alert_fires(&r, job).await,
        "nccl_latency for job {job}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn reports_out_of_range_are_refused_on_sqlite() {
    reports_out_of_range_are_refused(support::sqlite_url()).await;
}

#[tokio::test]
async fn reports_out_of_range_are_refused_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    reports_out_of_range_are_refused(url).await;
}

/// Rows as an older version stored them: a save whose end overflows, steps of 2^63 and more
/// (stored as negative). Every query skips them; they are counted for one warning.
async fn rows_stored_out_of_range_are_skipped(db: String) {
    let r = start(db.clone()).await;
    let job = running_job(&r).await as i64;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db).await.expect("connect");
    let now = 1_795_968_000_000i64;
    for (step, started, duration) in [
        (7_777_777i64, i64::MAX - 5, 100i64),
        (-1, now, 10),
        (8_888_888, now, 50),
    ] {
        sqlx::query(
            "INSERT INTO checkpoints (job_id, step, path, size_bytes, started_ms, duration_ms, complete) \
             VALUES ($1, $2, $5, 1, $3, $4, 1)",
        )
        .bind(job)
        .bind(step)
        .bind(started)
        .bind(duration)
        .bind(format!("/ckpt/old/{step}"))
        .execute(&pool)
        .await
        .expect("insert checkpoint");
    }
    sqlx::query(
        "INSERT INTO nccl_samples (job_id, step, at_ms, latency_us) VALUES ($1, -1, $2, 30.0)",
    )
    .bind(job)
    .bind(now)
    .execute(&pool)
    .await
    .expect("insert nccl");
    pool.close().await;
    assert_eq!(
        r.store.rows_out_of_range().await.expect("count"),
        (2, 1),
        "two checkpoints and one NCCL sample out of range"
    );
    let job = job as u64;
    let stored = r
        .store
        .checkpoints(job)
        .await
        .expect("the job's checkpoints read");
    let old: Vec<Option<u64>> = stored
        .iter()
        .filter(|c| c.path.starts_with("/ckpt/old/"))
        .map(|c| c.step)
        .collect();
    assert_eq!(old, vec![Some(8_888_888)], "only the row in range");
    let (_, ends) = r.store.alert_facts(&[job]).await.expect("alert facts");
    assert!(ends.get(&job).is_some_and(|e| *e >= now + 50), "{ends:?}");
    assert!(
        nccl_alert_fires(&r, job).await,
        "nccl_latency for job {job}"
    );
    r.stop().await.expect("stop");
}

#[tokio::test]
async fn rows_stored_out_of_range_are_skipped_on_sqlite() {
    rows_stored_out_of_range_are_skipped(support::sqlite_url()).await;
}

#[tokio::test]
async fn rows_stored_out_of_range_are_skipped_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    rows_stored_out_of_range_are_skipped(url).await;
}
