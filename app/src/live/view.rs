//! The live client the pages share: [`LiveView`] renders a page on the server from the
//! newest tick, then keeps it current over `/api/live` (see [`super::client`]) and marks
//! its values stale when they are older than two live intervals; [`LiveStatus`] says so.
//! [`Entries`] and [`shape_of`] let a page follow a list of the overview row by row.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::live::{LiveSnapshot, Overview};
#[cfg(feature = "ssr")]
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
    pub(super) stale: RwSignal<bool>,
    pub(super) limit_ms: i64,
    /// The age of the server-rendered data.
    pub(super) rendered_age_ms: i64,
}

/// The stale flag of a page rendered from `snap`, and the clock that keeps it.
pub(crate) fn staleness(snap: &LiveSnapshot) -> (Memo<bool>, StaleClock) {
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
    Effect::new(move |_| super::client::go_live(state, conn, _clock, alerts));
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
