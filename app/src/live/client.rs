//! The browser half of the live pages: the subscription to `/api/live` (snapshot, then
//! deltas; a gap starts over from a snapshot) and the timer that marks the data stale.

use std::time::Duration;

use leptos::prelude::*;
use send_wrapper::SendWrapper;
use wasm_bindgen::{closure::Closure, JsCast};
use web_sys::{EventSource, MessageEvent};

use super::view::{Conn, StaleClock};
use crate::live::{LiveSnapshot, Overview, OverviewDelta, EVENT_DELTA, EVENT_SNAPSHOT};
use crate::model::UnixMs;
use crate::pages::alerts::AlertCount;

fn local_now() -> UnixMs {
    js_sys::Date::now() as UnixMs
}

/// The one open EventSource, replaced on reconnect and closed on cleanup.
type Slot = std::rc::Rc<std::cell::RefCell<Option<EventSource>>>;

/// Marks the data stale when no newer data arrives in time: one timer, re-armed by
/// each arrival, rather than a clock ticking while nothing changes.
#[derive(Clone)]
struct Deadline {
    clock: StaleClock,
    timer: std::rc::Rc<std::cell::Cell<Option<TimeoutHandle>>>,
}

impl Deadline {
    /// Data that was `age_ms` old (by the server's clock) arrived now.
    fn arrived(&self, age_ms: i64) {
        self.clear();
        let stale = self.clock.stale;
        let left = self.clock.limit_ms - age_ms.max(0);
        if left < 0 {
            if !stale.get_untracked() {
                stale.set(true);
            }
            return;
        }
        if stale.get_untracked() {
            stale.set(false);
        }
        // Stale once strictly older than the limit.
        let at = Duration::from_millis(left as u64 + 1);
        self.timer
            .set(set_timeout_with_handle(move || stale.set(true), at).ok());
    }

    fn clear(&self) {
        if let Some(t) = self.timer.take() {
            t.clear();
        }
    }
}

pub fn go_live(
    state: RwSignal<Overview>,
    conn: RwSignal<Conn>,
    clock: StaleClock,
    alerts: Option<AlertCount>,
) {
    // From here on ages are measured on the client's clock, from now.
    let deadline = Deadline {
        clock,
        timer: Default::default(),
    };
    deadline.arrived(clock.rendered_age_ms);
    let slot: Slot = Default::default();
    connect(state, conn, deadline.clone(), slot.clone(), alerts);
    let held = SendWrapper::new((slot, deadline));
    on_cleanup(move || {
        let (slot, deadline) = &*held;
        deadline.clear();
        if let Some(es) = slot.borrow_mut().take() {
            es.close();
        }
    });
}

fn connect(
    state: RwSignal<Overview>,
    conn: RwSignal<Conn>,
    deadline: Deadline,
    slot: Slot,
    alerts: Option<AlertCount>,
) {
    if let Some(old) = slot.borrow_mut().take() {
        old.close();
    }
    conn.set(Conn::Connecting);
    // The page shows a sequence already (rendered on the server, or kept from before a
    // gap): when it is current the server sends no snapshot, only what follows.
    let since = state.with_untracked(crate::live::resume_id);
    let Ok(es) = EventSource::new(&format!("/api/live?since={since}")) else {
        conn.set(Conn::Reconnecting);
        return;
    };

    let on_open = Closure::<dyn FnMut()>::new(move || conn.set(Conn::Live));
    es.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    on_open.forget();

    // EventSource reconnects by itself, saying the last sequence it received
    // (`Last-Event-ID`); the server answers with a snapshot unless that is current.
    let on_error = Closure::<dyn FnMut()>::new(move || conn.set(Conn::Reconnecting));
    es.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    on_error.forget();

    let on_arrival = deadline.clone();
    let on_snapshot = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        if let Ok(snap) = serde_json::from_str::<LiveSnapshot>(&text) {
            on_arrival.arrived(snap.server_now_ms - snap.overview.published_ms);
            if let Some(a) = alerts {
                let s = &snap.overview.summary;
                a.heard((s.alerts_firing, s.alerts_critical), local_now() as f64);
            }
            state.set(snap.overview);
            conn.set(Conn::Live);
        }
    });
    let _ =
        es.add_event_listener_with_callback(EVENT_SNAPSHOT, on_snapshot.as_ref().unchecked_ref());
    on_snapshot.forget();

    let slot_for_gap = slot.clone();
    let on_delta = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
        let Some(text) = ev.data().as_string() else {
            return;
        };
        let Ok(delta) = serde_json::from_str::<OverviewDelta>(&text) else {
            return;
        };
        let mut gap = false;
        state.update(|s| gap = s.apply(&delta).is_err());
        if gap {
            // Missed an update: start over from a fresh snapshot on a new connection.
            conn.set(Conn::Reconnecting);
            connect(state, conn, deadline.clone(), slot_for_gap.clone(), alerts);
        } else {
            if let Some(a) = alerts {
                let n =
                    state.with_untracked(|s| (s.summary.alerts_firing, s.summary.alerts_critical));
                a.heard(n, local_now() as f64);
            }
            deadline.arrived(0);
        }
    });
    let _ = es.add_event_listener_with_callback(EVENT_DELTA, on_delta.as_ref().unchecked_ref());
    on_delta.forget();
    *slot.borrow_mut() = Some(es);
}
