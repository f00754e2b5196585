//! `/api/live`: server-sent events, a snapshot then one delta per tick. A client names what
//! it shows (`?since=` or the browser's `Last-Event-ID`) and gets nothing, a delta or a
//! snapshot first.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use app::live::{LiveSnapshot, Overview, EVENT_DELTA, EVENT_SNAPSHOT};
use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

use super::error::ApiError;
use super::{AppState, Routes};
use crate::live::{wall_now_ms, Live, Tick};

pub(super) fn routes() -> Routes {
    vec![("/api/live", get(live_sse))]
}

fn snapshot_event(overview: &Overview) -> Event {
    let snap = LiveSnapshot {
        server_now_ms: wall_now_ms(),
        overview: overview.clone(),
    };
    Event::default()
        .event(EVENT_SNAPSHOT)
        .id(app::live::resume_id(overview))
        .data(serde_json::to_string(&snap).unwrap_or_default())
}

fn delta_event(tick: &Tick) -> Event {
    Event::default()
        .event(EVENT_DELTA)
        .id(app::live::resume_id(&tick.overview))
        .data(&*tick.delta_json)
}

/// `GET /api/live`'s query: the sequence the client already shows (a page rendered on the
/// server carries it), so it needs no snapshot when it is current.
#[derive(Deserialize)]
struct LiveQuery {
    since: Option<String>,
}

/// The first event of a stream for a client that shows `since` (a sequence and when it was
/// published, `app::live::resume_id`): nothing when that is the current tick, the tick's
/// delta when it is the one before, else a snapshot. The publication time tells this
/// process's sequence 57 from a previous process's.
fn first_event(tick: &Tick, since: Option<(u64, app::model::UnixMs)>) -> Option<Event> {
    let now = (tick.overview.seq, tick.overview.published_ms);
    let before = tick.from_published_ms.map(|p| (tick.from_seq, p));
    match since {
        Some(s) if s == now => None,
        Some(s) if Some(s) == before && !tick.reshaped => Some(delta_event(tick)),
        _ => Some(snapshot_event(&tick.overview)),
    }
}

struct StreamState {
    pending: Option<Event>,
    last_seq: u64,
    rx: broadcast::Receiver<Arc<Tick>>,
    live: Arc<Live>,
    shutdown: watch::Receiver<bool>,
    _guard: crate::metrics::SseClientGuard,
}

/// `/api/live`: a snapshot first, then one delta per tick. A client that falls behind
/// gets a fresh snapshot; every stream ends when the server shuts down.
async fn live_sse(
    State(st): State<AppState>,
    headers: axum::http::HeaderMap,
    Query(q): Query<LiveQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Subscribe before reading the current tick, so nothing falls between the two.
    let rx = st.live.subscribe();
    let first = st.live.current().ok_or(ApiError::NotReady)?;
    // What the client shows: the browser's own reconnection says it in `Last-Event-ID`
    // (every event's id names its tick), a first connection in `?since=`. Anything
    // unreadable is a client that shows nothing usable: it gets a snapshot.
    let since = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .or(q.since.as_deref())
        .and_then(app::live::parse_resume_id);
    let state = StreamState {
        pending: first_event(&first, since),
        last_seq: first.overview.seq,
        rx,
        live: Arc::clone(&st.live),
        shutdown: st.shutdown.clone(),
        _guard: st.live.metrics.sse_client(),
    };
    let s = stream::unfold(state, |mut s| async move {
        if let Some(ev) = s.pending.take() {
            return Some((Ok(ev), s));
        }
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = s.shutdown.changed() => return None,
                msg = s.rx.recv() => match msg {
                    Ok(tick) if tick.overview.seq <= s.last_seq => continue,
                    Ok(tick) if tick.from_seq == s.last_seq && !tick.reshaped => {
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(delta_event(&tick)), s));
                    }
                    Ok(tick) => {
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick.overview)), s));
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let Some(tick) = s.live.current() else { continue };
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick.overview)), s));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    });
    Ok(Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
