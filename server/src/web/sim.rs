//! The simulator's own endpoints, routed only when it is the source: its ground truth and
//! each node's exporters, as those exporters would answer.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{Path, Query};
use super::{AppState, Routes};

pub(super) fn routes() -> Routes {
    vec![
        ("/sim/truth", get(sim_truth)),
        ("/sim/exporter/dcgm/{node}/metrics", get(sim_dcgm)),
        ("/sim/exporter/ipmi/{node}/metrics", get(sim_ipmi)),
        ("/sim/exporter/node/{node}/metrics", get(sim_node)),
        ("/sim/exporter/redfish/{rack}/metrics", get(sim_redfish)),
        (
            "/sim/exporter/nmxt/{rack}/xcset/nvlink_domain_telemetry",
            get(sim_nmxt),
        ),
    ]
}

#[derive(Deserialize)]
struct TruthQuery {
    seq: Option<u64>,
}

/// The simulator's ground truth (at tick `seq` if given), for tests and outside checks.
async fn sim_truth(
    State(st): State<AppState>,
    Query(q): Query<TruthQuery>,
) -> Result<Response, ApiError> {
    let t = st.live.truth(q.seq).ok_or(match q.seq {
        Some(_) => ApiError::NotFound,
        None => ApiError::NotReady,
    })?;
    Ok(Json(serde_json::json!({ "seq": q.seq, "truth": &*t })).into_response())
}

/// Serves one simulated node's exporter text, as its exporter would.
fn sim_exporter(
    st: &AppState,
    node: &str,
    render: fn(&app::model::Inventory, &crate::telemetry::Readings, &str) -> Option<String>,
) -> Result<Response, ApiError> {
    let frame = st.live.sim_frame().ok_or(ApiError::NotReady)?;
    if crate::sim::exporter::inventory_node(&frame.inventory, &frame.readings, node).is_none() {
        return Err(ApiError::NotFound);
    }
    // A down node's exporter does not answer; over a shared listener that is a 503.
    let body = render(&frame.inventory, &frame.readings, node).ok_or(ApiError::NodeDown)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

async fn sim_dcgm(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_dcgm)
}

async fn sim_ipmi(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_ipmi)
}

/// One simulated rack's power controller, as redfish_exporter would answer for it.
async fn sim_redfish(
    State(st): State<AppState>,
    Path(rack): Path<String>,
) -> Result<Response, ApiError> {
    sim_rack(&st, &rack, crate::sim::exporter::render_redfish)
}

/// One simulated NVL72 rack's NVLink domain, as NMX-T would answer for it.
async fn sim_nmxt(
    State(st): State<AppState>,
    Path(rack): Path<String>,
) -> Result<Response, ApiError> {
    sim_rack(&st, &rack, crate::sim::exporter::render_nmxt)
}

/// Serves one simulated rack's exporter text (404 for a rack that has no such exporter).
fn sim_rack(
    st: &AppState,
    rack: &str,
    render: fn(&crate::telemetry::Readings, &str) -> Option<String>,
) -> Result<Response, ApiError> {
    let frame = st.live.sim_frame().ok_or(ApiError::NotReady)?;
    let body = render(&frame.readings, rack).ok_or(ApiError::NotFound)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

async fn sim_node(
    State(st): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    sim_exporter(&st, &node, crate::sim::exporter::render_node)
}
