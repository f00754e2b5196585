//! `/api/live`: server-sent events, a snapshot then one delta per tick. A client names what
//! it shows (`?since=` or the browser's `Last-Event-ID`) and gets nothing, a delta or a
//! snapshot first.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use app::live::{EVENT_DELTA, EVENT_SNAPSHOT};
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use tokio::sync::{broadcast, watch};

use super::error::ApiError;
use super::extract::Query;
use super::guard::Peer;
use super::{AppState, Routes};
use crate::auth::Caller;
use crate::clock::wall_now_ms;
use crate::live::{Live, Tick};

/// How a stream's caller is signed in, so that the stream ends when that does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// Anonymous reading: nothing to end.
    None,
    /// A session cookie: its token's SHA-256.
    Session(String),
    /// A trusted proxy's user.
    Proxy(String),
}

#[derive(Default)]
struct Open {
    total: usize,
    per_key: std::collections::HashMap<String, usize>,
    /// Signed-in streams: their credential and what ends them.
    watched: std::collections::HashMap<u64, (Credential, Arc<watch::Sender<bool>>)>,
    next_id: u64,
}

/// Open live streams, in all and per user: each stream holds a slot while it runs, and a
/// signed-in one is ended by [`StreamSlots::end_revoked`] when its session or user is.
pub struct StreamSlots {
    total: usize,
    per_user: usize,
    open: std::sync::Mutex<Open>,
}

/// Why a stream was not opened.
#[derive(Debug, PartialEq, Eq)]
pub enum SlotRefused {
    Total,
    PerUser,
}

/// A stream's slot; freed when the stream ends, however it ends.
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    key: String,
    id: u64,
    /// Turns true when the stream's session or user has ended.
    pub ended: watch::Receiver<bool>,
    /// Its sender lives as long as the slot (an anonymous stream's is in no registry).
    _end: Arc<watch::Sender<bool>>,
}

impl StreamSlots {
    pub fn new(total: usize, per_user: usize) -> Arc<StreamSlots> {
        Arc::new(StreamSlots {
            total,
            per_user,
            open: std::sync::Mutex::new(Open::default()),
        })
    }

    /// A slot for a stream of `key` (a user, or an anonymous client's address).
    pub fn try_open(
        self: &Arc<Self>,
        key: String,
        credential: Credential,
    ) -> Result<StreamSlot, SlotRefused> {
        let Ok(mut open) = self.open.lock() else {
            return Err(SlotRefused::Total);
        };
        if open.total >= self.total {
            return Err(SlotRefused::Total);
        }
        let mine = open.per_key.entry(key.clone()).or_insert(0);
        if *mine >= self.per_user {
            return Err(SlotRefused::PerUser);
        }
        *mine += 1;
        open.total += 1;
        open.next_id += 1;
        let id = open.next_id;
        let (tx, ended) = watch::channel(false);
        let tx = Arc::new(tx);
        if credential != Credential::None {
            open.watched.insert(id, (credential, Arc::clone(&tx)));
        }
        Ok(StreamSlot {
            slots: Arc::clone(self),
            key,
            id,
            ended,
            _end: tx,
        })
    }

    /// Ends every stream whose session is no longer valid (signed out, revoked, expired,
    /// idle, its user changed or disabled) or whose proxy-named user no longer has a
    /// role: one query for all sessions, one per proxy user. How many it ended.
    pub async fn end_revoked(
        &self,
        store: &crate::store::Store,
        now_ms: app::model::UnixMs,
    ) -> usize {
        let watched: Vec<(u64, Credential)> = match self.open.lock() {
            Ok(o) => o
                .watched
                .iter()
                .map(|(id, (c, _))| (*id, c.clone()))
                .collect(),
            Err(_) => return 0,
        };
        if watched.is_empty() {
            return 0;
        }
        let mut digests: Vec<String> = watched
            .iter()
            .filter_map(|(_, c)| match c {
                Credential::Session(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        digests.sort_unstable();
        digests.dedup();
        let valid = match store.sessions_valid(&digests, now_ms).await {
            Ok(v) => v,
            Err(e) => {
                // Not knowing is not revocation: the streams go on until the next check.
                tracing::warn!(error = %e, "cannot recheck live streams' sessions");
                return 0;
            }
        };
        let mut users: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
        let mut ended = Vec::new();
        for (id, c) in watched {
            let alive = match &c {
                Credential::None => true,
                Credential::Session(d) => valid.contains(d),
                Credential::Proxy(u) => match users.get(u) {
                    Some(ok) => *ok,
                    None => {
                        let ok = crate::auth::named_caller(store, u)
                            .await
                            .map(|c| c.role.is_some())
                            .unwrap_or(true);
                        users.insert(u.clone(), ok);
                        ok
                    }
                },
            };
            if !alive {
                ended.push(id);
            }
        }
        if let Ok(o) = self.open.lock() {
            for id in &ended {
                if let Some((_, tx)) = o.watched.get(id) {
                    let _ = tx.send(true);
                }
            }
        }
        ended.len()
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.slots.open.lock() {
            open.total = open.total.saturating_sub(1);
            open.watched.remove(&self.id);
            if let Some(n) = open.per_key.get_mut(&self.key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.per_key.remove(&self.key);
                }
            }
        }
    }
}

/// Ends live streams whose session or user has ended, within one `interval` of a change
/// made anywhere (another replica, the CLI): it reads the store's `auth_epoch` each
/// interval and rechecks every signed-in stream when it moved, and once a minute anyway
/// (sessions also end by time).
pub async fn watch_sessions(
    slots: Arc<StreamSlots>,
    store: crate::store::Store,
    interval: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ticker = tokio::time::interval(interval);
    let mut last_epoch = None;
    let mut last_full = tokio::time::Instant::now();
    while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
        let epoch = match store.auth_epoch().await {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read auth_epoch");
                None
            }
        };
        let moved = epoch.is_some() && epoch != last_epoch;
        if moved || last_full.elapsed() >= Duration::from_secs(60) {
            let n = slots.end_revoked(&store, wall_now_ms()).await;
            if n > 0 {
                tracing::info!(streams = n, "live streams of ended sessions closed");
            }
            last_full = tokio::time::Instant::now();
            if epoch.is_some() {
                last_epoch = epoch;
            }
        }
    }
}

pub(super) fn routes() -> Routes {
    vec![("/api/live", get(live_sse))]
}

/// A `LiveSnapshot` as JSON: this moment's server clock around the tick's overview, which
/// is serialized once per tick, however many streams start.
fn snapshot_event(tick: &Tick) -> Event {
    let data = format!(
        "{{\"server_now_ms\":{},\"overview\":{}}}",
        wall_now_ms(),
        tick.overview_json()
    );
    Event::default()
        .event(EVENT_SNAPSHOT)
        .id(app::live::resume_id(&tick.overview))
        .data(data)
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
        _ => Some(snapshot_event(tick)),
    }
}

struct StreamState {
    pending: Option<Event>,
    last_seq: u64,
    rx: broadcast::Receiver<Arc<Tick>>,
    live: Arc<Live>,
    shutdown: watch::Receiver<bool>,
    _guard: crate::metrics::SseClientGuard,
    slot: StreamSlot,
}

/// `/api/live`: a snapshot first, then one delta per tick. A client that falls behind
/// gets a fresh snapshot; every stream ends when the server shuts down.
#[utoipa::path(get, path = "/api/live", tag = "cluster",
    responses((status = 200, description = "server-sent events: `snapshot` (a LiveSnapshot as JSON), then `delta` once a tick",
        content_type = "text/event-stream", body = app::live::LiveSnapshot)))]
async fn live_sse(
    State(st): State<AppState>,
    caller: Caller,
    axum::Extension(credential): axum::Extension<Credential>,
    axum::Extension(Peer(peer)): axum::Extension<Peer>,
    headers: axum::http::HeaderMap,
    Query(q): Query<LiveQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // Streams are capped in all and per user (an anonymous reader: per address), before
    // anything is allocated for this one.
    let key = match (&caller.user, peer) {
        (Some(u), _) => format!("user:{u}"),
        (None, Some(a)) => format!("addr:{a}"),
        (None, None) => "addr:unknown".to_string(),
    };
    let slot = st.streams.try_open(key, credential).map_err(|why| {
        st.live
            .metrics
            .sse_refused_total
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match why {
            SlotRefused::Total => {
                ApiError::Busy("too many live streams are open: try again in a moment".into())
            }
            SlotRefused::PerUser => ApiError::TooMany(
                "too many live streams of yours are open: close some Gantry tabs".into(),
                10,
            ),
        }
    })?;
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
        slot,
    };
    let s = stream::unfold(state, |mut s| async move {
        if let Some(ev) = s.pending.take() {
            return Some((Ok(ev), s));
        }
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            if *s.slot.ended.borrow() {
                return None;
            }
            tokio::select! {
                _ = s.shutdown.changed() => return None,
                // The session or the user ended: so does the stream.
                _ = s.slot.ended.changed() => return None,
                msg = s.rx.recv() => match msg {
                    Ok(tick) if tick.overview.seq <= s.last_seq => continue,
                    Ok(tick) if tick.from_seq == s.last_seq && !tick.reshaped => {
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(delta_event(&tick)), s));
                    }
                    Ok(tick) => {
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick)), s));
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let Some(tick) = s.live.current() else { continue };
                        s.live.metrics.sse_resyncs_total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        s.last_seq = tick.overview.seq;
                        return Some((Ok(snapshot_event(&tick)), s));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    });
    Ok(Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
