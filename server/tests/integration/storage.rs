//! The storage story, run unchanged on SQLite and on PostgreSQL.

use app::model::{Checkpoint, Job, JobState};
use server::sim::{layout, Sim};
use server::store::{Dialect, Rollup, Store};

use crate::support;

const T0: i64 = 1_795_968_000_000;

fn job(id: u64, state: JobState, nodes: &[&str]) -> Job {
    Job {
        id,
        name: "llama-70b-sft".into(),
        user: "alice".into(),
        account: "llm-finetune".into(),
        partition: "gpu".into(),
        state,
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        gpus: 8 * nodes.len() as u32,
        submit_ms: T0,
        start_ms: None,
        end_ms: None,
    }
}

async fn story(url: &str, dialect: Dialect) {
    let store = Store::connect(url).await.expect("connect and migrate");
    assert_eq!(store.dialect(), dialect);
    store.ping().await.expect("ping");
    if dialect == Dialect::Sqlite {
        assert_eq!(
            store
                .sqlite_journal_mode()
                .await
                .expect("pragma")
                .as_deref(),
            Some("wal")
        );
    }
    // Migrations are idempotent: a second start on the same database is fine.
    let store = Store::connect(url).await.expect("reconnect");

    // Inventory: replaced whole, read back in floor order.
    let inv = layout(16, "t");
    store.put_inventory(&inv).await.expect("inventory");
    store.put_inventory(&inv).await.expect("inventory again");
    assert_eq!(store.node_count().await.expect("count"), 16);
    let racks = store.racks().await.expect("racks");
    assert_eq!(racks, inv.racks);

    // A job's life: pending -> running -> requeued -> running -> completed.
    let mut j = job(4242, JobState::Pending, &[]);
    store.record_job(&j, T0, "").await.expect("pending");
    j.state = JobState::Running;
    j.nodes = vec!["gpu001".into(), "gpu002".into()];
    j.start_ms = Some(T0 + 60_000);
    store
        .record_job(&j, T0 + 60_000, "")
        .await
        .expect("running");
    j.state = JobState::Requeued;
    store
        .record_job(&j, T0 + 600_000, "requeued by alice: node gpu002 drained")
        .await
        .expect("requeued");
    // A retried write is idempotent: no second event, no second requeue.
    store
        .record_job(&j, T0 + 600_000, "requeued by alice: node gpu002 drained")
        .await
        .expect("retry");
    j.state = JobState::Running;
    j.nodes = vec!["gpu003".into(), "gpu004".into()];
    store
        .record_job(&j, T0 + 720_000, "")
        .await
        .expect("running again");
    j.state = JobState::Completed;
    j.end_ms = Some(T0 + 3_600_000);
    store
        .record_job(&j, T0 + 3_600_000, "")
        .await
        .expect("completed");

    let got = store.job(4242).await.expect("get").expect("exists");
    assert_eq!(got, j);
    assert_eq!(store.job(1).await.expect("get"), None);
    assert_eq!(store.requeue_count(4242).await.expect("requeues"), Some(1));
    let ev = store.job_events(4242).await.expect("events");
    let states: Vec<JobState> = ev.iter().map(|e| e.state).collect();
    assert_eq!(
        states,
        vec![
            JobState::Pending,
            JobState::Running,
            JobState::Requeued,
            JobState::Running,
            JobState::Completed
        ]
    );
    assert_eq!(ev[2].detail, "requeued by alice: node gpu002 drained");
    assert_eq!(ev[3].nodes, vec!["gpu003", "gpu004"]);
    assert_eq!(
        store
            .jobs_in_state(JobState::Completed, 10)
            .await
            .expect("by state")
            .len(),
        1
    );
    assert!(store
        .jobs_in_state(JobState::Running, 10)
        .await
        .expect("by state")
        .is_empty());

    // Hostile text is data, stored and returned verbatim.
    let mut evil = job(7, JobState::Pending, &[]);
    evil.name = "x'); DROP TABLE jobs; -- \"quoted\" \u{1F525} $1 ?".into();
    evil.user = "o'brien".into();
    store
        .record_job(&evil, T0, "line1\nline2")
        .await
        .expect("hostile");
    assert_eq!(
        store.job(7).await.expect("get").expect("exists").name,
        evil.name
    );
    assert_eq!(
        store
            .job(4242)
            .await
            .expect("still there")
            .expect("exists")
            .id,
        4242
    );

    // Checkpoints: the same (job, path) again updates it.
    let mut c = Checkpoint {
        job_id: 4242,
        step: Some(1000),
        path: "/lustre/ckpt/run/step-1000".into(),
        size_bytes: 160_000_000_000,
        started_ms: T0 + 1_800_000,
        duration_ms: 45_000,
        complete: false,
    };
    store.put_checkpoint(&c).await.expect("checkpoint");
    c.complete = true;
    store.put_checkpoint(&c).await.expect("checkpoint done");
    let mut c2 = c.clone();
    c2.step = Some(500);
    c2.path = "/lustre/ckpt/run/step-500".into();
    c2.started_ms = T0 + 900_000;
    store.put_checkpoint(&c2).await.expect("earlier step");
    // A save whose step nothing records: kept as unknown, never as 0, beside the others.
    let mut c3 = c.clone();
    c3.step = None;
    c3.path = "/lustre/ckpt/run/checkpoint_3".into();
    c3.started_ms = T0 + 2_700_000;
    store.put_checkpoint(&c3).await.expect("unknown step");
    let cks = store.checkpoints(4242).await.expect("checkpoints");
    assert_eq!(
        cks.iter().map(|c| c.step).collect::<Vec<_>>(),
        vec![Some(500), Some(1000), None]
    );
    assert!(cks[1].complete);
    assert_eq!(cks[1].size_bytes, 160_000_000_000);

    // Rollups: upsert per (scope, minute), range queries, retention.
    for m in 0..5 {
        let r = Rollup {
            scope: "rack:A01".into(),
            at_ms: T0 + m * 60_000,
            power_watts_mean: 30_000.0 + m as f64,
            sm_active_mean: if m == 2 { None } else { Some(0.5) },
            gpus_throttling_max: m as u32,
            throttled_s_by_reason: [60.0 * m as f64, 0.0, 30.0, 0.0, 0.5],
            samples: 60,
        };
        store.put_rollup(&r).await.expect("rollup");
        store.put_rollup(&r).await.expect("rollup again");
    }
    let rs = store
        .rollups("rack:A01", T0 + 60_000, T0 + 240_000)
        .await
        .expect("range");
    assert_eq!(rs.len(), 3);
    assert_eq!(rs[1].sm_active_mean, None);
    assert_eq!(rs[2].power_watts_mean, 30_003.0);
    assert_eq!(rs[2].throttled_s_by_reason, [180.0, 0.0, 30.0, 0.0, 0.5]);
    assert_eq!(store.prune_rollups(T0 + 120_000).await.expect("prune"), 2);
    assert_eq!(
        store
            .rollups("rack:A01", 0, i64::MAX)
            .await
            .expect("all")
            .len(),
        3
    );

    // XIDs, idempotent.
    store.put_xid("gpu038", 3, 48, T0).await.expect("xid");
    store.put_xid("gpu038", 3, 48, T0).await.expect("xid again");
    assert_eq!(store.xids("gpu038").await.expect("xids"), vec![(3, 48, T0)]);
}

/// The simulator's history lands in the store through the live writer, complete.
async fn history(url: &str) {
    let store = Store::connect(url).await.expect("connect");
    let metrics = std::sync::Arc::new(server::metrics::Metrics::default());
    let (q, writer) = server::live::spawn_store_writer(store.clone(), metrics.clone());
    let mut sim = Sim::new(64, 5, "t", T0);
    let warmup = sim.drain_events();
    sim.advance_to(T0 + 6 * 3_600_000);
    let events = sim.drain_events();
    let checkpoints: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            server::sim::SimEvent::Checkpoint { checkpoint } => Some(checkpoint.clone()),
            _ => None,
        })
        .collect();
    assert!(!checkpoints.is_empty());
    let live = server::live::Live::new(std::sync::Arc::new(server::metrics::Metrics::default()));
    let mut pipeline = server::live::Pipeline::new(1_000, 0.05);
    pipeline.record(server::sources::sim::events(warmup), &live, &q);
    pipeline.record(server::sources::sim::events(events), &live, &q);
    // Checkpoints are noted in memory at once, before the store writer gets to them.
    let newest = checkpoints
        .iter()
        .map(|c| c.started_ms + c.duration_ms)
        .max();
    assert_eq!(live.last_checkpoints().values().copied().max(), newest);
    drop(q);
    writer.await.expect("writer ends when the queue closes");
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(metrics.store_errors_total.load(Relaxed), 0);
    assert_eq!(metrics.store_queue_dropped_total.load(Relaxed), 0);
    let first = &checkpoints[0];
    let stored = store.checkpoints(first.job_id).await.expect("checkpoints");
    assert!(stored.contains(first), "{first:?} not in {stored:?}");
    let ev = store.job_events(first.job_id).await.expect("events");
    assert!(ev.iter().any(|e| e.state == JobState::Running));
}

#[tokio::test]
async fn storage_story_on_sqlite() {
    story(&support::sqlite_url(), Dialect::Sqlite).await;
}

#[tokio::test]
async fn storage_story_on_postgres() {
    if let Some(url) = support::postgres_url().await {
        story(&url, Dialect::Postgres).await;
    }
}

#[tokio::test]
async fn simulated_history_reaches_sqlite() {
    history(&support::sqlite_url()).await;
}

#[tokio::test]
async fn simulated_history_reaches_postgres() {
    if let Some(url) = support::postgres_url().await {
        history(&url).await;
    }
}

/// On one connection, a rollup without SM activity and then one with it. sqlx 0.8's Any
/// driver once made the second fail on PostgreSQL ("incorrect binary data format in bind
/// parameter 4"): a bound NULL double was declared float4.
async fn null_double_then_value(url: &str) {
    let store = Store::connect_with(url, Some(1)).await.expect("connect");
    for (i, sm) in [None, Some(0.5), None, Some(0.25)].into_iter().enumerate() {
        let r = Rollup {
            scope: "cluster".into(),
            at_ms: T0 + i as i64 * 60_000,
            power_watts_mean: 1.0,
            sm_active_mean: sm,
            gpus_throttling_max: 0,
            throttled_s_by_reason: [0.0, 1.0, 0.0, 0.0, 0.0],
            samples: 1,
        };
        store
            .put_rollup(&r)
            .await
            .unwrap_or_else(|e| panic!("write {i} ({sm:?}): {e}"));
    }
    let got: Vec<_> = store
        .rollups("cluster", 0, i64::MAX)
        .await
        .expect("read")
        .into_iter()
        .map(|r| r.sm_active_mean)
        .collect();
    assert_eq!(got, vec![None, Some(0.5), None, Some(0.25)]);
}

#[tokio::test]
async fn a_missing_double_then_a_value_on_sqlite() {
    null_double_then_value(&support::sqlite_url()).await;
}

#[tokio::test]
async fn a_missing_double_then_a_value_on_postgres() {
    if let Some(url) = support::postgres_url().await {
        null_double_then_value(&url).await;
    }
}

#[tokio::test]
async fn a_bad_database_url_is_a_clear_error() {
    let e = Store::connect("mysql://x").await.expect_err("unsupported");
    assert!(e.to_string().contains("unsupported database URL"), "{e}");
    let e = Store::connect("sqlite:///nonexistent-dir/for/sure/gantry.db")
        .await
        .expect_err("no dir");
    assert!(
        e.to_string().contains("unable to open database file"),
        "{e}"
    );
}

/// The job history's filters and pages, and the audit log's, on one database.
async fn filters(url: &str) {
    let store = Store::connect(url).await.expect("connect");
    for i in 0..30u64 {
        let mut j = job(
            5000 + i,
            if i % 3 == 0 {
                JobState::Failed
            } else {
                JobState::Completed
            },
            &["gpu001"],
        );
        j.user = if i % 2 == 0 {
            "alice".into()
        } else {
            "bob".into()
        };
        j.gpus = if i < 10 { 64 } else { 8 };
        j.submit_ms = T0 + i as i64 * 1000;
        store.record_job(&j, j.submit_ms, "").await.expect("record");
    }
    let f = |state: Option<&str>, user: Option<&str>, min_gpus: Option<u32>, page: u32| {
        app::views::JobFilter {
            state: state.map(str::to_string),
            user: user.map(str::to_string),
            min_gpus,
            page,
            per_page: 4,
            ..Default::default()
        }
    };
    let (jobs, total) = store
        .jobs_filtered(&f(Some("failed"), None, None, 0))
        .await
        .expect("failed");
    assert_eq!(total, 10);
    assert_eq!(jobs.len(), 4);
    assert!(
        jobs.windows(2).all(|w| w[0].submit_ms >= w[1].submit_ms),
        "newest first"
    );
    let (_, total) = store
        .jobs_filtered(&f(None, Some("bob"), Some(64), 0))
        .await
        .expect("bob big");
    assert_eq!(total, 5);
    let (last, _) = store
        .jobs_filtered(&f(Some("failed"), None, None, 2))
        .await
        .expect("page 3");
    assert_eq!(
        last.len(),
        2,
        "10 failed jobs, 4 a page: the third page has 2"
    );
    let (none, total) = store
        .jobs_filtered(&f(Some("failed"), Some("carol"), None, 0))
        .await
        .expect("none");
    assert_eq!((none.len(), total), (0, 0));
}

#[tokio::test]
async fn job_history_filters_on_sqlite() {
    filters(&support::sqlite_url()).await;
}

#[tokio::test]
async fn job_history_filters_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    filters(&url).await;
}

/// One-hour rollups on one connection: one without SM activity, then one with it (the NULL
/// double trap of sqlx's Any driver), range reads and retention.
async fn hourly(url: &str) {
    use server::store::Rollup1h;
    let store = Store::connect_with(url, Some(1)).await.expect("connect");
    let h = |at: i64, sm: Option<f64>| Rollup1h {
        scope: "cluster".into(),
        at_ms: at,
        power_watts_mean: 40_000.0,
        power_watts_min: 35_000.0,
        power_watts_max: 44_000.0,
        energy_wh: 40_000.0,
        sm_active_mean: sm,
        gpus_throttling_max: 3,
        throttled_gpu_seconds: 1800.0,
        throttled_s_by_reason: [600.0, 0.0, 1200.0, 0.5, 0.0],
        samples: 3600,
    };
    store.put_rollup_1h(&h(T0, None)).await.expect("without SM");
    store
        .put_rollup_1h(&h(T0 + 3_600_000, Some(0.8)))
        .await
        .expect("with SM, same connection");
    store
        .put_rollup_1h(&h(T0 + 3_600_000, Some(0.7)))
        .await
        .expect("again: replaces");
    let rows = store
        .rollups_1h("cluster", T0, T0 + 7_200_000)
        .await
        .expect("read");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0], h(T0, None));
    assert_eq!(rows[1].sm_active_mean, Some(0.7));
    assert_eq!(store.prune_rollups_1h(T0 + 1).await.expect("prune"), 1);
    assert_eq!(
        store
            .rollups_1h("cluster", 0, i64::MAX)
            .await
            .expect("read")
            .len(),
        1
    );
}

#[tokio::test]
async fn hourly_rollups_on_sqlite() {
    hourly(&support::sqlite_url()).await;
}

#[tokio::test]
async fn hourly_rollups_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    hourly(&url).await;
}

/// The alert rules' facts for many jobs at once: the first and the newest 200 NCCL samples
/// of a long job, and each job's newest complete checkpoint.
async fn alert_facts(url: &str) {
    let store = Store::connect(url).await.expect("connect");
    for step in 0..500u64 {
        store
            .put_nccl(7, step, T0 + step as i64, 50.0 + step as f64, Some(8))
            .await
            .expect("nccl");
    }
    store.put_nccl(8, 1, T0, 99.0, None).await.expect("nccl");
    let ck = |job: u64, step: u64, started: i64, complete: bool| Checkpoint {
        job_id: job,
        step: Some(step),
        path: format!("/ckpt/{job}/{step}"),
        size_bytes: 1,
        started_ms: started,
        duration_ms: 1000,
        complete,
    };
    store.put_checkpoint(&ck(7, 1, T0, true)).await.expect("ck");
    store
        .put_checkpoint(&ck(7, 2, T0 + 5000, false))
        .await
        .expect("ck");
    let (nccl, last) = store.alert_facts(&[7, 8, 9]).await.expect("facts");
    let s7 = &nccl[&7];
    assert_eq!(s7.len(), 400);
    assert_eq!(
        (s7[0].0, s7[199].0, s7[200].0, s7[399].0),
        (0, 199, 300, 499),
        "head and tail, in order"
    );
    assert_eq!(nccl[&8], vec![(1, 99.0)]);
    assert!(!nccl.contains_key(&9));
    assert_eq!(
        last.get(&7),
        Some(&(T0 + 1000)),
        "the incomplete one does not count"
    );
    assert!(!last.contains_key(&8));
}

#[tokio::test]
async fn alert_facts_on_sqlite() {
    alert_facts(&support::sqlite_url()).await;
}

#[tokio::test]
async fn alert_facts_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    alert_facts(&url).await;
}

/// Users, sessions and the revocation epoch: idle and absolute expiry, last-seen written
/// at most once a minute, every change of a user ending its sessions and bumping the
/// epoch, disabled users refused, and many sessions rechecked at once.
async fn user_lifecycle(url: &str) {
    use app::actions::Role;
    use server::auth::{self, token_digest, Actor};
    let store = Store::connect(url).await.expect("connect");
    let now = server::clock::wall_now_ms();
    let (hour, minute) = (3_600_000, 60_000);
    for (name, role) in [
        ("alice", Role::Operator),
        ("bob", Role::Admin),
        ("carol", Role::Viewer),
    ] {
        auth::add_user(&store, name, support::PASSWORD, role)
            .await
            .expect("add");
    }
    let e0 = store.auth_epoch().await.expect("epoch");
    // A session of 12 h absolute, 10 min idle.
    let start = |user: &'static str| {
        let store = store.clone();
        async move {
            auth::start_session(&store, user, now, 12 * hour, 10 * minute)
                .await
                .expect("session")
        }
    };
    let a1 = start("alice").await;
    let a2 = start("alice").await;
    let b1 = start("bob").await;
    let c1 = start("carol").await;
    let user_of = |token: &str, at: i64| {
        let store = store.clone();
        let d = token_digest(token);
        async move { store.session_user(&d, at).await.expect("session user") }
    };
    assert_eq!(
        user_of(&a1, now + 1000).await,
        Some(("alice".into(), Role::Operator))
    );
    // Idle: 9 min later still valid (and seen, since over a minute passed); 10 min after
    // that last sight, gone.
    assert!(user_of(&b1, now + 9 * minute).await.is_some());
    let seen = |id_user: &'static str| {
        let store = store.clone();
        async move {
            store
                .sessions(now)
                .await
                .expect("sessions")
                .into_iter()
                .filter(|s| s.user == id_user)
                .map(|s| s.last_seen_ms)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        seen("bob").await,
        vec![now + 9 * minute],
        "seen after 9 min"
    );
    // Within a minute of the last write, nothing is written.
    assert!(user_of(&b1, now + 9 * minute + 59_000).await.is_some());
    assert_eq!(seen("bob").await, vec![now + 9 * minute], "not rewritten");
    assert!(
        user_of(&b1, now + 18 * minute).await.is_some(),
        "idle window moved"
    );
    assert!(user_of(&b1, now + 27 * minute + 59_000).await.is_some());
    assert!(
        user_of(&b1, now + 38 * minute).await.is_none(),
        "idle for over 10 min since 27:59"
    );
    // carol, never used: idle after 10 min; alice's a1 was seen at +1 s only.
    assert!(user_of(&c1, now + 10 * minute).await.is_none());
    // Absolute: a session of one hour used every 5 min still ends at its hour.
    let d1 = auth::start_session(&store, "carol", now, hour, 10 * minute)
        .await
        .expect("session");
    for k in 1..12 {
        assert!(user_of(&d1, now + k * 5 * minute).await.is_some(), "{k}");
    }
    assert!(
        user_of(&d1, now + hour).await.is_none(),
        "absolute lifetime"
    );

    // Many sessions rechecked in one call, across chunks: only the valid ones come back.
    let mut digests: Vec<String> = (0..1200).map(|i| token_digest(&format!("x{i}"))).collect();
    digests.insert(700, token_digest(&a1));
    digests.push(token_digest(&a2));
    digests.push(token_digest(&c1));
    let valid = store
        .sessions_valid(&digests, now + 1000)
        .await
        .expect("valid");
    let want: std::collections::HashSet<String> =
        [token_digest(&a1), token_digest(&a2), token_digest(&c1)].into();
    assert_eq!(valid, want);
    assert!(store
        .sessions_valid(&[], now)
        .await
        .expect("empty")
        .is_empty());
    // An epoch does not move on reads.
    assert_eq!(store.auth_epoch().await.expect("epoch"), e0);

    // A role change ends alice's sessions, both, and bumps the epoch.
    let cli = Actor::cli();
    let users = store.users(now + 1000).await.expect("users");
    let alice = users.iter().find(|u| u.name == "alice").expect("alice");
    assert_eq!(
        (alice.role, alice.disabled, alice.sessions),
        (Role::Operator, false, 2)
    );
    assert_eq!(
        auth::change_role(&store, &cli, "alice", Role::Viewer)
            .await
            .expect("role"),
        2
    );
    let e1 = store.auth_epoch().await.expect("epoch");
    assert!(e1 > e0, "{e1} > {e0}");
    assert!(store
        .sessions_valid(&[token_digest(&a1), token_digest(&a2)], now + 1000)
        .await
        .expect("valid")
        .is_empty());
    assert_eq!(
        store.user("alice").await.expect("user").map(|u| u.role),
        Some(Role::Viewer)
    );

    // A password change ends sessions; the old password stops working.
    let a3 = start("alice").await;
    auth::change_password(&store, &cli, "alice", "a brand new password")
        .await
        .expect("passwd");
    assert!(user_of(&a3, now + 1000).await.is_none());
    let e2 = store.auth_epoch().await.expect("epoch");
    assert!(e2 > e1);
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        support::PASSWORD.into()
    )
    .await
    .expect("auth")
    .user()
    .is_none());
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        "a brand new password".into()
    )
    .await
    .expect("auth")
    .user()
    .is_some());
    // `user add` over an existing user is a password change too.
    let a4 = start("alice").await;
    auth::add_user(&store, "alice", support::PASSWORD, Role::Operator)
        .await
        .expect("re-add");
    assert!(user_of(&a4, now + 1000).await.is_none());
    let e3 = store.auth_epoch().await.expect("epoch");
    assert!(e3 > e2);

    // Disabled: sessions end, the right password is refused, and a session row cannot
    // stand for them; enabled again, they sign in.
    let a5 = start("alice").await;
    assert_eq!(
        auth::set_disabled(&store, &cli, "alice", true)
            .await
            .expect("disable"),
        1
    );
    assert!(user_of(&a5, now + 1000).await.is_none());
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        support::PASSWORD.into()
    )
    .await
    .expect("auth")
    .user()
    .is_none());
    let a6 = start("alice").await;
    assert!(user_of(&a6, now + 1000).await.is_none(), "disabled user");
    assert!(store
        .sessions_valid(&[token_digest(&a6)], now + 1000)
        .await
        .expect("valid")
        .is_empty());
    assert!(
        auth::named_caller(&store, "alice")
            .await
            .expect("proxy")
            .role
            .is_none(),
        "a proxy naming a disabled user gets no role"
    );
    let listed = store.users(now).await.expect("users");
    let alice = listed.iter().find(|u| u.name == "alice").expect("alice");
    assert!(alice.disabled && alice.disabled_ms.is_some());
    let e4 = store.auth_epoch().await.expect("epoch");
    assert!(e4 > e3);
    auth::set_disabled(&store, &cli, "alice", false)
        .await
        .expect("enable");
    assert!(auth::authenticate(
        &store,
        &server::auth::HashPool::new(1, 4),
        None,
        "alice",
        support::PASSWORD.into()
    )
    .await
    .expect("auth")
    .user()
    .is_some());
    assert!(
        user_of(&a6, now + 1000).await.is_none(),
        "a session from while disabled does not come back"
    );

    // A change that changes nothing ends nothing: enabling an enabled user, giving the
    // role they have (it is still audited, as unchanged).
    let a8 = start("alice").await;
    let before = store.auth_epoch().await.expect("epoch");
    assert_eq!(
        auth::set_disabled(&store, &cli, "alice", false)
            .await
            .expect("enable again"),
        0
    );
    let role_now = store
        .user("alice")
        .await
        .expect("user")
        .expect("alice")
        .role;
    assert_eq!(
        auth::change_role(&store, &cli, "alice", role_now)
            .await
            .expect("same role"),
        0
    );
    assert!(user_of(&a8, now + 1000).await.is_some(), "still signed in");
    assert_eq!(store.auth_epoch().await.expect("epoch"), before);
    auth::end_session(&store, &a8).await.expect("sign out");

    // An admin revokes one session by its opaque id: the other stays.
    let a6 = start("alice").await;
    let a7 = start("alice").await;
    let listed = store.sessions(now + 1000).await.expect("sessions");
    let mine: Vec<_> = listed.iter().filter(|s| s.user == "alice").collect();
    assert_eq!(mine.len(), 2, "{listed:?}");
    for s in &listed {
        assert_eq!(s.id.len(), 16);
        assert!(!token_digest(&a6).contains(&s.id) && !token_digest(&a7).contains(&s.id));
    }
    let e5 = store.auth_epoch().await.expect("epoch");
    let by = auth::revoke_session(&store, &cli, &mine[0].id)
        .await
        .expect("revoke");
    assert_eq!(by, "alice");
    assert!(store.auth_epoch().await.expect("epoch") > e5);
    let left = store
        .sessions_valid(&[token_digest(&a6), token_digest(&a7)], now + 1000)
        .await
        .expect("valid");
    assert_eq!(left.len(), 1);
    assert!(matches!(
        auth::revoke_session(&store, &cli, &mine[0].id).await,
        Err(auth::AuthError::UnknownSession)
    ));

    // Signing out is a revocation too.
    let e6 = store.auth_epoch().await.expect("epoch");
    auth::end_session(&store, &a7).await.expect("sign out");
    auth::end_session(&store, &a6).await.expect("sign out");
    assert!(store.auth_epoch().await.expect("epoch") > e6);

    // Delete: gone with its sessions; unknown users are errors; the last admin stays.
    let c2 = start("carol").await;
    assert_eq!(
        auth::delete_user(&store, &cli, "carol")
            .await
            .expect("delete"),
        3,
        "c1, d1 and c2"
    );
    assert!(user_of(&c2, now + 1000).await.is_none());
    assert!(store.user("carol").await.expect("user").is_none());
    for r in [
        auth::delete_user(&store, &cli, "carol").await,
        auth::change_role(&store, &cli, "nobody", Role::Admin).await,
        auth::set_disabled(&store, &cli, "nobody", true).await,
    ] {
        assert!(matches!(r, Err(auth::AuthError::UnknownUser(_))), "{r:?}");
    }
    for r in [
        auth::delete_user(&store, &cli, "bob").await,
        auth::change_role(&store, &cli, "bob", Role::Operator).await,
        auth::set_disabled(&store, &cli, "bob", true).await,
    ] {
        assert!(matches!(r, Err(auth::AuthError::LastAdmin)), "{r:?}");
    }
    // Each change, and only changes, in the audit log, by who made it.
    let audit = store.audit(&Default::default()).await.expect("audit");
    let done: Vec<(&str, &str, &str)> = audit
        .iter()
        .rev()
        .map(|e| (e.action.as_str(), e.target.as_str(), e.status.as_str()))
        .collect();
    assert_eq!(
        done,
        [
            ("user_role", "alice", "ok"),
            ("user_password", "alice", "ok"),
            ("user_disable", "alice", "ok"),
            ("user_enable", "alice", "ok"),
            ("user_enable", "alice", "ok"),
            ("user_role", "alice", "ok"),
            ("session_revoke", "alice", "ok"),
            ("user_delete", "carol", "ok"),
        ]
    );
    assert!(audit.iter().all(|e| e.user == "gantry-cli"));

    // Housekeeping drops expired and idle sessions without bumping the epoch.
    let e7 = store.auth_epoch().await.expect("epoch");
    let _idle = start("alice").await;
    assert!(
        store
            .prune_sessions(now + 11 * minute)
            .await
            .expect("prune")
            >= 1
    );
    assert_eq!(store.auth_epoch().await.expect("epoch"), e7);
    assert!(!store
        .sessions(now)
        .await
        .expect("sessions")
        .iter()
        .any(|s| s.user == "alice"));
}

#[tokio::test]
async fn user_lifecycle_on_sqlite() {
    user_lifecycle(&support::sqlite_url()).await;
}

#[tokio::test]
async fn user_lifecycle_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    user_lifecycle(&url).await;
}

/// Named ingest tokens: kept as SHA-256 only, unique names, last use written at most once
/// a minute, revocation final.
async fn ingest_tokens(url: &str) {
    use server::auth::{self, token_digest, Actor, IngestScope};
    let store = Store::connect(url).await.expect("connect");
    let cli = Actor::cli();
    assert!(!store.has_ingest_tokens().await.expect("any"));
    let llm = auth::add_ingest_token(&store, &cli, "ci-llm", Some("llm"))
        .await
        .expect("add");
    let any = auth::add_ingest_token(&store, &cli, "ci-any", None)
        .await
        .expect("add");
    assert_eq!(llm.len(), 64);
    assert_ne!(llm, any);
    assert!(matches!(
        auth::add_ingest_token(&store, &cli, "ci-llm", None).await,
        Err(auth::AuthError::TokenExists(_))
    ));
    assert!(matches!(
        auth::add_ingest_token(&store, &cli, "x", Some("bad account!")).await,
        Err(auth::AuthError::BadAccount)
    ));
    assert!(store.has_ingest_tokens().await.expect("any"));
    let t = store
        .use_ingest_token(&token_digest(&llm), T0)
        .await
        .expect("use")
        .expect("known");
    assert_eq!(IngestScope::of(&t), IngestScope::Account("llm".into()));
    assert!(IngestScope::of(&t).allows("llm") && !IngestScope::of(&t).allows("research"));
    let listed = store.ingest_tokens().await.expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|t| (t.name.as_str(), t.account.as_deref(), t.last_used_ms))
            .collect::<Vec<_>>(),
        [("ci-any", None, None), ("ci-llm", Some("llm"), Some(T0))]
    );
    let text = serde_json::to_string(&listed).expect("json");
    for secret in [&llm, &any, &token_digest(&llm), &token_digest(&any)] {
        assert!(!text.contains(secret.as_str()), "{text}");
    }
    // Used again within the minute: not rewritten; after it, rewritten.
    store
        .use_ingest_token(&token_digest(&llm), T0 + 59_000)
        .await
        .expect("use");
    let last =
        |store: Store| async move { store.ingest_tokens().await.expect("list")[1].last_used_ms };
    assert_eq!(last(store.clone()).await, Some(T0));
    store
        .use_ingest_token(&token_digest(&llm), T0 + 61_000)
        .await
        .expect("use");
    assert_eq!(last(store.clone()).await, Some(T0 + 61_000));
    auth::revoke_ingest_token(&store, &cli, "ci-llm")
        .await
        .expect("revoke");
    assert!(store
        .use_ingest_token(&token_digest(&llm), T0)
        .await
        .expect("use")
        .is_none());
    assert!(matches!(
        auth::revoke_ingest_token(&store, &cli, "ci-llm").await,
        Err(auth::AuthError::UnknownToken(_))
    ));
}

#[tokio::test]
async fn ingest_tokens_on_sqlite() {
    ingest_tokens(&support::sqlite_url()).await;
}

#[tokio::test]
async fn ingest_tokens_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    ingest_tokens(&url).await;
}
