//! Remediation policies over real scrapes (incidents.rs's proxy in front of a simulated
//! cluster's dcgm-exporters): with the kill switch on, an execute rule records what it
//! would do and drains nothing; switched off, it drains the node as `gantry` (a `gantry:`
//! reason, an audit row, verified); a storm of double-bit ECC errors on three more nodes
//! within the window trips the fleet breaker before anything else runs, and it stays open
//! until an admin resets it. Every change an admin makes is audited. On SQLite and
//! PostgreSQL.

use std::time::Duration;

use serde_json::{json, Value};

use crate::incidents::{through_proxy, NODE};
use crate::support;

async fn remediation(addr: std::net::SocketAddr, cookie: &str) -> Value {
    let r = support::get_with(addr, "/api/remediation", &[("Cookie", cookie)]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// The decisions on `node` with `outcome`, read until one holds or `secs` pass.
async fn decision_until(
    addr: std::net::SocketAddr,
    cookie: &str,
    node: &str,
    outcome: &str,
    secs: u64,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..secs * 10 {
        last = remediation(addr, cookie).await;
        let found = last["decisions"].as_array().and_then(|v| {
            v.iter()
                .find(|d| d["node"] == node && d["outcome"] == outcome)
                .cloned()
        });
        if let Some(d) = found {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {outcome} decision on {node} in {secs} s: {last:#}");
}

fn node_state(r: &server::serve::Running, node: &str) -> Option<app::model::NodeState> {
    r.live
        .sched()
        .and_then(|s| s.nodes.iter().find(|n| n.name == node).map(|n| n.state))
}

async fn policies(db: String) {
    let (a, b, knobs) = through_proxy(db, |cfg| cfg.auth.anonymous_read = false).await;
    support::add_users(&b.store).await;
    let admin = support::login(b.addr, "admin1").await;
    let op = support::login(b.addr, "operator1").await;
    let post = |path: &'static str, cookie: String, body: Value| async move {
        support::post_json(b.addr, path, Some(&cookie), &body).await
    };

    // The defaults: each drain-class cause recommended, nothing open.
    let v = remediation(b.addr, &op).await;
    let ecc = v["rules"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["cause"] == "ecc_double_bit"))
        .cloned()
        .expect("an ecc_double_bit rule");
    assert_eq!(
        (ecc["mode"].as_str(), ecc["configured"].as_str()),
        (Some("recommend"), Some("recommend"))
    );
    assert!(
        v["kill_switch"].is_null() && v["breakers"] == json!([]),
        "{v:#}"
    );

    // Operators read; only admins change.
    let r = post(
        "/api/admin/remediation/kill_switch",
        op.clone(),
        json!({"on": true}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(
        "/api/admin/remediation/kill_switch",
        admin.clone(),
        json!({"on": true, "note": "maintenance window"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kill_switch"]["by"], "admin1");
    let r = post(
        "/api/admin/remediation/mode",
        admin.clone(),
        json!({"cause": "ecc_double_bit", "mode": "execute"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(
        "/api/admin/remediation/mode",
        admin.clone(),
        json!({"cause": "no_such_rule", "mode": "execute"}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text());

    // The kill switch holds the execution: recorded, nothing drained.
    knobs.ecc_on();
    let held = decision_until(b.addr, &op, NODE, "held", 30).await;
    assert!(
        held["detail"]
            .as_str()
            .is_some_and(|d| d.contains("kill switch")),
        "{held:#}"
    );
    assert_eq!(held["mode"], "execute");
    // The incident says what the policy did.
    let incidents = support::get_with(b.addr, "/api/incidents", &[("Cookie", &op)])
        .await
        .json();
    let inc = incidents["incidents"]
        .as_array()
        .and_then(|v| v.iter().find(|i| i["id"] == held["incident"]).cloned())
        .expect("the incident");
    assert_eq!(inc["remedy"]["outcome"], "held", "{inc:#}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !matches!(
            node_state(&b, NODE),
            Some(app::model::NodeState::Drained | app::model::NodeState::Draining)
        ),
        "drained under the kill switch"
    );

    // Off: the rule drains it as `gantry`, through the audited action path.
    let r = post(
        "/api/admin/remediation/kill_switch",
        admin.clone(),
        json!({"on": false}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let done = decision_until(b.addr, &op, NODE, "executed", 30).await;
    assert!(done["action_id"].as_i64().is_some(), "{done:#}");
    let verified = |audit: &[app::actions::AuditEntry]| {
        audit.iter().any(|a| {
            a.target == NODE
                && a.action == "drain"
                && a.status == "ok"
                && a.detail.starts_with("gantry: incident ")
        })
    };
    let audit = support::policy_audit_until(&b.store, verified).await;
    assert!(verified(&audit), "{audit:?}");
    // The live view shows it at its next scheduler poll (the audit row read Slurm itself).
    let drained = || {
        matches!(
            node_state(&b, NODE),
            Some(app::model::NodeState::Drained | app::model::NodeState::Draining)
        )
    };
    for _ in 0..50 {
        if drained() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(drained(), "{:?}", node_state(&b, NODE));
    // The incident's timeline: what the policy decided, and (for operators) the drain
    // that names it in the audit log; a viewer sees the decisions, not the audit log.
    let id = done["incident"].as_i64().expect("incident id");
    let story = |cookie: String| async move {
        let r = support::get_with(
            b.addr,
            &format!("/api/incidents/{id}"),
            &[("Cookie", &cookie)],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["timeline"]
            .as_array()
            .expect("timeline")
            .iter()
            .filter_map(|e| e["what"].as_str().map(String::from))
            .collect::<Vec<String>>()
    };
    let seen = story(op.clone()).await;
    assert!(
        seen.iter()
            .any(|w| w.starts_with("policy (execute mode) held")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|w| w.starts_with("policy (execute mode) executed")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|w| w.starts_with("gantry (operator) drain ")),
        "{seen:?}"
    );
    let viewer = support::login(b.addr, "viewer1").await;
    let seen = story(viewer).await;
    assert!(
        seen.iter()
            .any(|w| w.starts_with("policy (execute mode) executed")),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|w| w.starts_with("gantry (operator)")),
        "{seen:?}"
    );

    // A storm: three more nodes within the window. The fleet (16 nodes, 5%) may lose one:
    // the breaker trips and none of them is drained.
    let storm = ["gpu005", "gpu006", "gpu007"];
    knobs
        .ecc_nodes
        .lock()
        .expect("knobs")
        .extend(storm.iter().map(|s| s.to_string()));
    for n in storm {
        let d = decision_until(b.addr, &op, n, "held", 30).await;
        assert!(
            d["detail"]
                .as_str()
                .is_some_and(|t| t.contains("fleet breaker")),
            "{d:#}"
        );
    }
    let v = remediation(b.addr, &op).await;
    assert!(
        v["breakers"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["domain"] == "fleet")),
        "{v:#}"
    );
    assert_eq!(v["executed_last_hour"], 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for n in storm {
        assert!(
            !matches!(
                node_state(&b, n),
                Some(app::model::NodeState::Drained | app::model::NodeState::Draining)
            ),
            "{n} drained past the breaker"
        );
    }
    // Only a person closes it; a breaker that is not open is not found.
    let r = post(
        "/api/admin/remediation/reset_breaker",
        admin.clone(),
        json!({"domain": "rack:nowhere"}),
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = post(
        "/api/admin/remediation/reset_breaker",
        admin.clone(),
        json!({"domain": "fleet", "note": "checked the storm"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // Every change is in the audit log, with who made it.
    let changes = b
        .store
        .audit(&app::actions::AuditFilter {
            user: Some("admin1".into()),
            ..Default::default()
        })
        .await
        .expect("audit");
    let kinds: Vec<&str> = changes.iter().map(|a| a.action.as_str()).collect();
    for want in [
        "remediation_kill_switch",
        "remediation_mode",
        "remediation_breaker_reset",
    ] {
        assert!(kinds.contains(&want), "{kinds:?}");
    }
    let tripped = support::policy_audit_until(&b.store, |a| {
        a.iter()
            .any(|a| a.action == "remediation_breaker" && a.target == "fleet")
    })
    .await;
    assert!(
        tripped.iter().any(|a| a.action == "remediation_breaker"),
        "{tripped:?}"
    );
    b.stop().await.expect("stop b");
    a.stop().await.expect("stop a");
}

#[tokio::test]
async fn policies_hold_their_limits_on_sqlite() {
    policies(support::sqlite_url()).await;
}

#[tokio::test]
async fn policies_hold_their_limits_on_postgres() {
    let Some(url) = support::postgres_url().await else {
        return;
    };
    policies(url).await;
}
