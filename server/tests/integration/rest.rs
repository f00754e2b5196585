//! The slurmrestd client against a slurmrestd of a newer API (v0.0.41, Slurm 24.05) that
//! this test plays, from documents written in that version's format: version detection,
//! the JWT headers, the node update body, and Slurm's refusal inside a 200.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use server::scheduler::Scheduler;
use server::slurm::rest::{Address, Rest};

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, String, String)>>>);

fn meta() -> serde_json::Value {
    json!({"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld", "data_parser": "data_parser/v0.0.41"},
           "client": {"source": "[127.0.0.1]:50000", "user": "root", "group": "root"},
           "slurm": {"version": {"major": "24", "micro": "5", "minor": "05"}, "release": "24.05.5", "cluster": "test"}})
}

async fn openapi() -> axum::Json<serde_json::Value> {
    axum::Json(json!({"openapi": "3.0.2", "paths": {
        "/slurm/v0.0.39/nodes/": {}, "/slurm/v0.0.40/nodes/": {}, "/slurm/v0.0.41/nodes/": {},
        "/slurm/v0.0.41/node/{node_name}": {}, "/slurmdb/v0.0.41/jobs/": {}
    }}))
}

async fn nodes(State(seen): State<Seen>, h: HeaderMap) -> axum::Json<serde_json::Value> {
    let who = h
        .get("x-slurm-user-name")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    seen.0
        .lock()
        .expect("lock")
        .push(("GET".into(), "nodes".into(), who));
    axum::Json(
        json!({"meta": meta(), "errors": [], "warnings": [], "last_update": {"set": true, "infinite": false, "number": 1795968000},
        "nodes": [
            {"name": "gpu-017", "state": ["MIXED", "DRAIN"], "reason": "XID 79", "partitions": ["gpu"], "gres": "gpu:h100:8", "gres_used": "gpu:h100:8(IDX:0-7)"},
            {"name": "gpu-018", "state": ["IDLE"], "reason": "", "partitions": ["gpu"], "gres": "gpu:h100:8", "gres_used": "gpu:h100:0(IDX:N/A)"},
            {"name": "gpu-019", "state": ["FUTURE_STATE_OF_SLURM_99"], "partitions": ["gpu"]}
        ]}),
    )
}

async fn update(
    State(seen): State<Seen>,
    Path(node): Path<String>,
    h: HeaderMap,
    body: Bytes,
) -> (StatusCode, axum::Json<serde_json::Value>) {
    let token = h
        .get("x-slurm-user-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if token != "jwt-for-test" {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({})));
    }
    seen.0.lock().expect("lock").push((
        "POST".into(),
        node.clone(),
        String::from_utf8_lossy(&body).into(),
    ));
    if node == "gpu-404" {
        // Slurm refuses inside a 200, as slurmrestd does.
        return (
            StatusCode::OK,
            axum::Json(json!({"meta": meta(), "errors": [
            {"description": "Invalid node name specified", "error_number": 2017, "error": "Invalid node name specified", "source": "slurm_update_node"}
        ], "warnings": []})),
        );
    }
    (
        StatusCode::OK,
        axum::Json(json!({"meta": meta(), "errors": [], "warnings": []})),
    )
}

#[tokio::test]
async fn a_newer_slurmrestd_drains_and_resumes_over_rest() {
    let seen = Seen::default();
    let app = Router::new()
        .route("/openapi/v3", get(openapi))
        .route("/slurm/v0.0.41/nodes/", get(nodes))
        .route("/slurm/v0.0.41/node/{node}", post(update))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let rest = Rest::new(
        Address::parse(&format!("http://{addr}")).expect("address"),
        Some("root".into()),
        Some("jwt-for-test".into()),
        None,
        Duration::from_secs(5),
        None,
    );
    assert_eq!(rest.version().await.expect("version"), 41);
    let ns = Rest::nodes(&rest).await.expect("nodes");
    assert_eq!(ns.len(), 3);
    assert_eq!(ns[0].state, app::model::NodeState::Draining);
    assert_eq!(ns[0].gpus_total, Some(8));
    // A state this Gantry does not know is kept in Slurm's words, not fatal.
    assert_eq!(
        ns[2].raw_state,
        vec!["FUTURE_STATE_OF_SLURM_99".to_string()]
    );

    Scheduler::drain(&rest, "gpu-018", "fan swap \"quoted\" $(x)")
        .await
        .expect("drain");
    Scheduler::resume(&rest, "gpu-017").await.expect("resume");
    let e = Scheduler::drain(&rest, "gpu-404", "x")
        .await
        .expect_err("refused");
    assert!(e.to_string().contains("Invalid node name specified"), "{e}");
    // Names are validated before anything is sent.
    assert!(Scheduler::drain(&rest, "gpu-018/../../jobs", "x")
        .await
        .is_err());
    // Requeue has no REST call before v0.0.45; without a CLI it is refused, clearly.
    let e = Scheduler::requeue(&rest, 7, false, &[])
        .await
        .expect_err("no requeue");
    assert!(e.to_string().contains("no REST call before v0.0.45"), "{e}");

    let seen = seen.0.lock().expect("lock").clone();
    let posts: Vec<(String, serde_json::Value)> = seen
        .iter()
        .filter(|(m, _, _)| m == "POST")
        .map(|(_, n, b)| (n.clone(), serde_json::from_str(b).expect("json body")))
        .collect();
    assert_eq!(
        posts,
        vec![
            (
                "gpu-018".into(),
                json!({"state": ["DRAIN"], "reason": "fan swap \"quoted\" $(x)"})
            ),
            ("gpu-017".into(), json!({"state": ["RESUME"]})),
            ("gpu-404".into(), json!({"state": ["DRAIN"], "reason": "x"})),
        ]
    );
    assert!(
        seen.iter().any(|(m, _, who)| m == "GET" && who == "root"),
        "X-SLURM-USER-NAME sent"
    );
}
