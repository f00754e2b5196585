//! `/`: the live overview. GPUs by state, SM activity, power against capacity, GPUs
//! throttling, jobs, and a rack mini-map.
//!
//! Rendered on the server with the numbers in the HTML; after hydration it subscribes to
//! `/api/live` (snapshot, then deltas) and marks values stale when they are older than
//! two live intervals.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::live::{LiveSnapshot, Overview, RackTile};
use crate::model::UnixMs;
#[cfg(feature = "hydrate")]
use crate::pages::alerts::AlertCount;
use crate::units;

/// The newest overview, for the server-rendered page.
#[server(endpoint = "overview")]
pub async fn get_overview() -> Result<LiveSnapshot, ServerFnError> {
    let backend = crate::backend::backend()?;
    let overview = backend
        .overview()
        .ok_or_else(|| ServerFnError::new("no data yet: the first readings have not arrived"))?;
    Ok(LiveSnapshot {
        server_now_ms: server_now_ms(),
        overview: (*overview).clone(),
    })
}

#[cfg(feature = "ssr")]
fn server_now_ms() -> UnixMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as UnixMs)
        .unwrap_or(0)
}

/// State of the live connection, shown in the status line.
#[cfg_attr(
    not(feature = "hydrate"),
    expect(dead_code, reason = "the browser half constructs the live states")
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    /// Server-rendered; no live connection (yet, or JavaScript is off).
    Static,
    Connecting,
    Live,
    Reconnecting,
}

/// When a live page's data counts as stale: older than two live intervals, by the
/// server's clock when it was sent and by the browser's since it arrived.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub(crate) struct StaleClock {
    stale: RwSignal<bool>,
    limit_ms: i64,
    /// The age of the server-rendered data.
    rendered_age_ms: i64,
}

/// The stale flag of a page rendered from `snap`, and the clock that keeps it.
fn staleness(snap: &LiveSnapshot) -> (Memo<bool>, StaleClock) {
    let limit_ms = 2 * snap.overview.interval_ms.max(1);
    let age_ms = snap.server_now_ms - snap.overview.published_ms;
    let flag = RwSignal::new(age_ms > limit_ms);
    (
        Memo::new(move |_| flag.get()),
        StaleClock {
            stale: flag,
            limit_ms,
            rendered_age_ms: age_ms,
        },
    )
}

#[component]
pub fn OverviewPage() -> impl IntoView {
    let data = Resource::new(|| (), |_| get_overview());
    view! {
        <Title text="Overview"/>
        <Suspense fallback=|| view! { <p class="loading">"Loading the cluster…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(snap) => view! { <OverviewBody snap/> }.into_any(),
                    Err(e) => view! {
                        <h1>"Overview"</h1>
                        <p class="error" role="alert">{format!("Cannot show the cluster: {e}")}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn OverviewBody(snap: LiveSnapshot) -> impl IntoView {
    let (stale, _clock) = staleness(&snap);
    let state = RwSignal::new(snap.overview);
    let conn = RwSignal::new(Conn::Static);

    #[cfg(feature = "hydrate")]
    let alerts = use_context::<AlertCount>();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| client::go_live(state, conn, _clock, alerts));

    let cluster = move || state.with(|s| s.cluster.clone());

    view! {
        <div class="overview" data-test="overview"
            data-seq=move || state.with(|s| s.seq.to_string())
            data-at-ms=move || state.with(|s| s.at_ms.to_string())>
            <div class="page-head">
                <h1>"Overview " <span class="muted">{cluster}</span></h1>
                <LiveStatus state conn stale/>
            </div>
            <Stats state stale/>
            <section aria-labelledby="racks-h" class:stale=move || stale.get()>
                <h2 id="racks-h">"Racks"</h2>
                <p class="legend" aria-hidden="true">
                    <span class="sev sev-ok">"ok"</span>
                    <span class="sev sev-warning">"near limit (over 90%) or throttling"</span>
                    <span class="sev sev-critical">"over power limit"</span>
                </p>
                <RackMap state/>
            </section>
        </div>
    }
}

#[component]
fn Stats(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let sum = move || state.with(|s| s.summary.clone());
    view! {
        <section aria-labelledby="gpus-h" class="cards" class:stale=move || stale.get()>
            <h2 id="gpus-h" class="sr-only">"Cluster now"</h2>
            <dl class="stats">
                <Stat label="GPUs total" test="gpus-total" value=Signal::derive(move || units::count(sum().gpus.total as u64))/>
                <Stat label="Allocated" test="gpus-allocated" state="allocated" value=Signal::derive(move || units::count(sum().gpus.allocated as u64))/>
                <Stat label="Idle" test="gpus-idle" state="idle" value=Signal::derive(move || units::count(sum().gpus.idle as u64))/>
                <Stat label="Drained" test="gpus-drained" state="drained" value=Signal::derive(move || units::count(sum().gpus.drained as u64))/>
                <Stat label="Down" test="gpus-down" state="down" value=Signal::derive(move || units::count(sum().gpus.down as u64))/>
                <Stat label="Mean SM activity" test="sm-active" value=Signal::derive(move || units::percent(sum().sm_active_mean))
                    hint="DCGM_FI_PROF_SM_ACTIVE averaged over allocated GPUs: the best simple proxy for useful GPU work."/>
                <Stat label="Power now" test="power-now" value=Signal::derive(move || units::power(Some(sum().power_watts)))/>
                <Stat label="Power capacity" test="power-capacity" value=Signal::derive(move || units::power(Some(sum().power_capacity_watts)))
                    hint="Sum of the racks' power limits."/>
                <Stat label="GPUs throttling" test="gpus-throttling" value=Signal::derive(move || units::count(sum().gpus_throttling as u64))
                    hint="GPUs whose clocks are held down by power cap, thermal or hardware slowdown right now."/>
                <Stat label="Jobs running" test="jobs-running" value=Signal::derive(move || units::count(sum().jobs_running as u64))/>
                <Stat label="Jobs pending" test="jobs-pending" value=Signal::derive(move || units::count(sum().jobs_pending as u64))/>
            </dl>
        </section>
    }
}

#[component]
fn Stat(
    label: &'static str,
    test: &'static str,
    value: Signal<String>,
    #[prop(optional)] state: Option<&'static str>,
    #[prop(optional)] hint: Option<&'static str>,
) -> impl IntoView {
    let class = state
        .map(|s| format!("stat state-{s}"))
        .unwrap_or_else(|| "stat".into());
    view! {
        <div class=class title=hint>
            <dt>{label}</dt>
            <dd class="num" data-test=test>{value}</dd>
        </div>
    }
}

#[component]
pub(crate) fn LiveStatus(
    state: RwSignal<Overview>,
    conn: RwSignal<Conn>,
    stale: Memo<bool>,
) -> impl IntoView {
    let at = move || state.with(|s| s.at_ms);
    let text = move || {
        let at = at();
        match (conn.get(), stale.get()) {
            (_, true) => format!("Stale: data of {}", units::utc(at)),
            (Conn::Static, false) => format!("As of {}", units::utc(at)),
            (Conn::Connecting, false) => format!("Connecting… data of {}", units::utc(at)),
            (Conn::Live, false) => format!("Live · {}", units::utc(at)),
            (Conn::Reconnecting, false) => format!("Reconnecting… data of {}", units::utc(at)),
        }
    };
    let class = move || {
        let c = match (conn.get(), stale.get()) {
            (_, true) => "stale",
            (Conn::Live, false) => "live",
            (Conn::Reconnecting, false) => "reconnecting",
            _ => "static",
        };
        format!("live-status {c}")
    };
    view! {
        <p class=class data-test="live-status" role="status" aria-live="polite">
            <span class="dot" aria-hidden="true"></span>
            {text}
        </p>
    }
}

#[component]
fn RackMap(state: RwSignal<Overview>) -> impl IntoView {
    // Rows of rack indices, recomputed only when the rack list changes (a snapshot); each
    // tile follows its own rack, so a tick re-renders only the racks it changed.
    let shape = Memo::new(move |_| {
        state.with(|s| shape_of(s.racks.iter().map(|r| (&r.name, &r.row, r.position))))
    });
    let racks = Entries::follow(state, |s| &s.racks);
    let rows = Memo::new(move |_| {
        shape.track();
        state.with_untracked(|s| {
            let mut rows: Vec<(String, Vec<usize>)> = Vec::new();
            for (i, r) in s.racks.iter().enumerate() {
                match rows.iter_mut().find(|(name, _)| *name == r.row) {
                    Some((_, v)) => v.push(i),
                    None => rows.push((r.row.clone(), vec![i])),
                }
            }
            for (_, v) in rows.iter_mut() {
                v.sort_by_key(|&i| s.racks[i].position);
            }
            rows
        })
    });
    view! {
        <div class="rackmap">
            {move || {
                // A new rack list: new tiles, following new signals.
                let rows = rows.get();
                racks.renew(state, |s| &s.racks);
                rows.into_iter().map(|(row, members)| view! {
                <div class="rackrow">
                    <h3 class="rowname">{format!("Row {row}")}</h3>
                    <ul class="racks">
                        {members.into_iter().filter_map(|i| racks.get(i)).map(|r| view! { <RackTileAt r/> }).collect_view()}
                    </ul>
                </div>
                }).collect_view()
            }}
        </div>
    }
}

/// A rack's tile. Its name is fixed (a new rack list lays the map out again); every other
/// part follows the rack's signal, and the DOM is written only where a text or attribute
/// changed.
#[component]
fn RackTileAt(r: RwSignal<RackTile>) -> impl IntoView {
    let name = r.with_untracked(|r| r.name.clone());
    let label = name.clone();
    let text = move |f: fn(&RackTile) -> String| move || r.with(f);
    view! {
        <li class=text(|r| format!("rack sev-{}", r.severity().label())) data-test="rack-tile" data-rack=label
            data-power-watts=text(|r| r.power_watts.map(|p| format!("{p:.1}")).unwrap_or_default())
            aria-label=text(rack_label)>
            <span class="rack-name">{name}</span>
            <span class="rack-power num">{text(|r| format!("{} / {}", units::power(r.power_watts), units::power(Some(r.power_limit_watts))))}</span>
            <span class="bar" aria-hidden="true"><span class="fill" style=text(|r| {
                let fill = r.load_ratio().map(|x| (x.clamp(0.0, 1.0) * 100.0).round() as i64).unwrap_or(0);
                format!("width:{fill}%")
            })></span></span>
            <span class="rack-pct num">{text(|r| match sev_text(r) {
                "" => units::percent(r.load_ratio()),
                t => format!("{} · {t}", units::percent(r.load_ratio())),
            })}</span>
            <span class="rack-inlet num">{text(|r| format!("inlet {}", units::celsius(r.inlet_celsius)))}</span>
            {move || silent_text(r.with(|r| r.nodes_not_reporting)).map(|t| view! { <span class="rack-silent" data-test="rack-silent">{t}</span> })}
            {move || {
                let n = r.with(|r| r.gpus_throttling);
                (n > 0).then(|| view! { <span class="rack-throttle num">{format!("{n} throttling")}</span> })
            }}
        </li>
    }
}

/// Why a rack stands out, in words: over or near its limit.
fn sev_text(r: &RackTile) -> &'static str {
    match (r.severity(), r.load_ratio()) {
        (crate::live::Severity::Critical, _) => "over limit",
        (crate::live::Severity::Warning, Some(x)) if x > 0.9 => "near limit",
        _ => "",
    }
}

fn silent_text(silent: u32) -> Option<String> {
    (silent > 0).then(|| {
        format!(
            "power incomplete: {silent} node{} not reporting",
            if silent == 1 { "" } else { "s" }
        )
    })
}

/// The tile's accessible name: everything it shows, in one sentence.
fn rack_label(r: &RackTile) -> String {
    let sev = sev_text(r);
    format!(
        "Rack {}: {} of {} ({}), inlet {}, {} GPUs throttling{}{}",
        r.name,
        units::power(r.power_watts),
        units::power(Some(r.power_limit_watts)),
        units::percent(r.load_ratio()),
        units::celsius(r.inlet_celsius),
        r.gpus_throttling,
        if sev.is_empty() {
            String::new()
        } else {
            format!(", {sev}")
        },
        silent_text(r.nodes_not_reporting)
            .map(|t| format!(", {t}"))
            .unwrap_or_default()
    )
}

/// The browser half: the SSE subscription and the clock that ages the data.
#[cfg(feature = "hydrate")]
pub(crate) mod client {
    use super::*;
    use crate::live::{OverviewDelta, EVENT_DELTA, EVENT_SNAPSHOT};
    use send_wrapper::SendWrapper;
    use std::time::Duration;
    use wasm_bindgen::{closure::Closure, JsCast};
    use web_sys::{EventSource, MessageEvent};

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
                    a.heard(snap.overview.summary.alerts_firing, local_now() as f64);
                }
                state.set(snap.overview);
                conn.set(Conn::Live);
            }
        });
        let _ = es
            .add_event_listener_with_callback(EVENT_SNAPSHOT, on_snapshot.as_ref().unchecked_ref());
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
                    let n = state.with_untracked(|s| s.summary.alerts_firing);
                    a.heard(n, local_now() as f64);
                }
                deadline.arrived(0);
            }
        });
        let _ = es.add_event_listener_with_callback(EVENT_DELTA, on_delta.as_ref().unchecked_ref());
        on_delta.forget();
        *slot.borrow_mut() = Some(es);
    }
}

/// A fingerprint of what decides a list's layout (names, kinds, places), compared every
/// tick without copying the list: a page re-lays out its rows only when it changes.
pub(crate) fn shape_of<T: std::hash::Hash>(items: impl Iterator<Item = T>) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    for item in items {
        item.hash(&mut h);
    }
    h.finish()
}

/// One signal per entry of a list of the overview (racks, domains), kept equal to it by
/// one effect: a tick sets only the entries that changed, so a table of hundreds of rows
/// re-renders the few that did, and the overview signal has one subscriber, not one per
/// row (a memo per row re-ran every tick, and each re-run re-subscribed it).
pub(crate) struct Entries<T: Send + Sync + 'static>(StoredValue<Vec<RwSignal<T>>>);

impl<T: Send + Sync + 'static> Clone for Entries<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Send + Sync + 'static> Copy for Entries<T> {}

impl<T: Clone + PartialEq + Send + Sync + 'static> Entries<T> {
    /// Follows `list` of `state`. There are no signals until the page lays out its rows
    /// and calls `renew`, which it does again whenever the list's shape changes.
    pub(crate) fn follow(state: RwSignal<Overview>, list: fn(&Overview) -> &[T]) -> Entries<T> {
        Self::kept_by(state, move |s, v| {
            for (sig, item) in v.iter().zip(list(s)) {
                if sig.with_untracked(|x| x != item) {
                    sig.set(item.clone());
                }
            }
        })
    }

    /// Entries kept equal to the overview by one effect, which gives `sync` the overview
    /// and the signals whenever the overview changes. Only the browser follows.
    fn kept_by(
        state: RwSignal<Overview>,
        sync: impl Fn(&Overview, &[RwSignal<T>]) + Send + Sync + 'static,
    ) -> Entries<T> {
        let e = Entries(StoredValue::new(Vec::new()));
        #[cfg(not(feature = "hydrate"))]
        let _ = (state, sync);
        #[cfg(feature = "hydrate")]
        Effect::new(move |_| state.with(|s| e.0.with_value(|v| sync(s, v))));
        e
    }

    /// New signals for the list as it is now.
    pub(crate) fn renew(&self, state: RwSignal<Overview>, list: fn(&Overview) -> &[T]) {
        let v = state.with_untracked(|s| list(s).iter().cloned().map(RwSignal::new).collect());
        self.0.set_value(v);
    }

    /// Like `follow`, for entries a page computes from the overview: entry `i` is
    /// `at(overview, i)`, and there are as many as `at` gives before its first `None`.
    pub(crate) fn follow_computed(
        state: RwSignal<Overview>,
        at: fn(&Overview, usize) -> Option<T>,
    ) -> Entries<T> {
        Self::kept_by(state, move |s, v| {
            for (i, sig) in v.iter().enumerate() {
                match at(s, i) {
                    Some(item) if sig.with_untracked(|x| *x != item) => sig.set(item),
                    _ => {}
                }
            }
        })
    }

    /// `renew` for entries made by `follow_computed`.
    pub(crate) fn renew_computed(
        &self,
        state: RwSignal<Overview>,
        at: fn(&Overview, usize) -> Option<T>,
    ) {
        let v =
            state.with_untracked(|s| (0..).map_while(|i| at(s, i)).map(RwSignal::new).collect());
        self.0.set_value(v);
    }

    /// How many entries there are.
    pub(crate) fn len(&self) -> usize {
        self.0.with_value(Vec::len)
    }

    /// Entry `i`'s signal.
    pub(crate) fn get(&self, i: usize) -> Option<RwSignal<T>> {
        self.0.with_value(|v| v.get(i).copied())
    }
}

/// A page fed by the live overview: rendered on the server from the newest tick, then
/// kept current over `/api/live` like the overview. `body` draws the page's own part.
#[component]
pub fn LiveView(
    title: &'static str,
    heading: &'static str,
    body: fn(RwSignal<Overview>, Memo<bool>) -> AnyView,
) -> impl IntoView {
    let data = Resource::new(|| (), |_| get_overview());
    view! {
        <Title text=title/>
        <Suspense fallback=|| view! { <p class="loading">"Loading the cluster…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(snap) => view! { <LiveBody snap heading body/> }.into_any(),
                    Err(e) => view! {
                        <h1>{heading}</h1>
                        <p class="error" role="alert">{format!("Cannot show the cluster: {e}")}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn LiveBody(
    snap: LiveSnapshot,
    heading: &'static str,
    body: fn(RwSignal<Overview>, Memo<bool>) -> AnyView,
) -> impl IntoView {
    let (stale, _clock) = staleness(&snap);
    let state = RwSignal::new(snap.overview);
    let conn = RwSignal::new(Conn::Static);
    #[cfg(feature = "hydrate")]
    let alerts = use_context::<AlertCount>();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| client::go_live(state, conn, _clock, alerts));
    view! {
        <div class="live-page" data-test="live-page" data-seq=move || state.with(|s| s.seq.to_string())>
            <div class="page-head">
                <h1>{heading}</h1>
                <LiveStatus state conn stale/>
            </div>
            {body(state, stale)}
        </div>
    }
}
