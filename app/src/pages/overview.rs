//! `/`: the live overview. "Needs action" (the open incidents, critical first, each with
//! what to do), GPUs by state, SM activity, power against capacity, GPUs throttling, jobs,
//! the data halls (the fleet level, where the layout names halls) and a rack mini-map.
//!
//! Rendered on the server with the numbers in the HTML; after hydration it subscribes to
//! `/api/live` (snapshot, then deltas) and marks values stale when they are older than
//! two live intervals.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::live::view::{get_overview, staleness, Conn, LiveStatus};
use crate::live::{shape_of, Entries, LiveSnapshot, Overview, RackTile};
use crate::pages::alerts::get_incidents;
#[cfg(feature = "hydrate")]
use crate::pages::alerts::AlertCount;
use crate::units;

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
    Effect::new(move |_| crate::live::client::go_live(state, conn, _clock, alerts));

    let cluster = move || state.with(|s| s.cluster.clone());

    view! {
        <div class="overview" data-test="overview"
            data-seq=move || state.with(|s| s.seq.to_string())
            data-at-ms=move || state.with(|s| s.at_ms.to_string())>
            <div class="page-head">
                <h1>"Overview " <span class="muted">{cluster}</span></h1>
                <LiveStatus state conn stale/>
            </div>
            <NeedsAction/>
            <Stats state stale/>
            <Halls state stale/>
            <section aria-labelledby="racks-h" class:stale=move || stale.get()>
                <h2 id="racks-h">"Racks"</h2>
                <p class="legend" aria-hidden="true">
                    <span class="sev sev-ok">"ok"</span>
                    <span class="sev sev-warning">"near limit (over 90%), throttling or a warning incident"</span>
                    <span class="sev sev-critical">"over power limit or a critical incident"</span>
                </p>
                <RackMap state/>
            </section>
        </div>
    }
}

/// How many incidents "Needs action" lists; the rest are on `/alerts`.
const NEEDS_ACTION_SHOWN: usize = 8;

/// "Needs action": the open incidents, critical first, each naming its place with one link
/// and what to do. Read again whenever the live stream's alert count changes, and every
/// 30 s.
#[component]
fn NeedsAction() -> impl IntoView {
    let incidents = Resource::new(|| (), |_| get_incidents());
    #[cfg(feature = "hydrate")]
    {
        if let Some(count) = use_context::<AlertCount>() {
            Effect::new(move |prev: Option<Option<(u32, u32)>>| {
                let now = count.get();
                if prev.is_some_and(|p| p != now) {
                    incidents.refetch();
                }
                now
            });
        }
        let poll = set_interval_with_handle(
            move || incidents.refetch(),
            std::time::Duration::from_secs(30),
        )
        .ok();
        on_cleanup(move || {
            if let Some(p) = poll {
                p.clear();
            }
        });
    }
    view! {
        <section aria-labelledby="attention-h" class="attention" data-test="needs-action">
            <h2 id="attention-h">"Needs action"</h2>
            <Transition fallback=|| view! { <p class="loading">"Loading incidents…"</p> }>
                {move || Suspend::new(async move {
                    match incidents.await {
                        Ok(list) if list.is_empty() => view! {
                            <p data-test="needs-action-none">"Nothing needs action: no open incident."</p>
                        }.into_any(),
                        Ok(list) => {
                            let more = list.len().saturating_sub(NEEDS_ACTION_SHOWN);
                            view! {
                                <ol class="attention-list">
                                    {list.into_iter().take(NEEDS_ACTION_SHOWN).map(|i| view! {
                                        <li data-test="attention-item" data-severity=i.severity.clone() class:acked=i.acked>
                                            <span class=format!("badge sev-{}", i.severity)>{i.severity.clone()}</span>" "
                                            <a href=i.place_link.clone()>{i.place.clone()}</a>": "
                                            <strong>{i.action.clone()}</strong>
                                            <span class="muted">{format!(" {} · since {}", i.cause.summary, units::utc(i.started_ms))}</span>
                                        </li>
                                    }).collect_view()}
                                </ol>
                                {(more > 0).then(|| view! {
                                    <p><a href="/alerts">{format!("{more} more on the alerts page")}</a></p>
                                })}
                            }.into_any()
                        }
                        Err(e) => view! {
                            <p class="error" role="alert">{format!("Cannot read incidents: {e}")}</p>
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
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

/// The fleet level: one row per data hall, its power against its feed, GPUs by state,
/// throttling, SM activity and its worst open problem; each hall links to its floor
/// (`/racks?hall=`). Nothing where the layout names no halls.
#[component]
fn Halls(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let halls = Memo::new(move |_| state.with(|s| s.halls.clone()));
    view! {
        <section aria-labelledby="halls-h" class:stale=move || stale.get() hidden=move || halls.with(Vec::is_empty)
            data-test="halls">
            <h2 id="halls-h">"Halls"</h2>
            <div class="table-wrap" tabindex="0" role="region" aria-labelledby="halls-h">
            <table class="grid report">
                <thead><tr>
                    <th scope="col">"Hall"</th>
                    <th scope="col" class="num">"Power"</th>
                    <th scope="col" class="num">"Feed"</th>
                    <th scope="col" class="num">"Of feed"</th>
                    <th scope="col" class="num">"GPUs"</th>
                    <th scope="col" class="num">"Allocated"</th>
                    <th scope="col" class="num">"Idle"</th>
                    <th scope="col" class="num">"Drained"</th>
                    <th scope="col" class="num">"Down"</th>
                    <th scope="col" class="num">"Throttling"</th>
                    <th scope="col" class="num">"SM activity"</th>
                    <th scope="col">"Worst open problem"</th>
                </tr></thead>
                <tbody>
                    <For each=move || halls.get() key=|h| format!("{h:?}") let:h>
                        {
                            let share = h.feed_share();
                            let over = share.is_some_and(|x| x > 1.0);
                            let near = share.is_some_and(|x| x > 0.9);
                            let partial = (h.nodes_not_reporting > 0).then(|| format!(
                                " (lower bound: {} node{} not reporting)",
                                h.nodes_not_reporting,
                                if h.nodes_not_reporting == 1 { "" } else { "s" }
                            ));
                            view! {
                                <tr data-hall=h.name.clone() class:crit=over class:warn=near && !over>
                                    <th scope="row"><a href=format!("/racks?hall={}", crate::nav::encode_component(&h.name))>{format!("Hall {}", h.name)}</a>
                                        <span class="muted">{format!(" {} rows, {} racks", h.rows, h.racks)}</span></th>
                                    <td class="num" data-test="hall-power">{units::power(Some(h.power_watts))}{partial}</td>
                                    <td class="num">{h.power_feed_watts.map(|f| units::power(Some(f))).unwrap_or_else(|| "not set".into())}</td>
                                    <td class="num" data-test="hall-feed-share">{share.map(|x| format!("{}{}", units::percent(Some(x)), if over { " over" } else { "" })).unwrap_or_else(|| "-".into())}</td>
                                    <td class="num">{units::count(u64::from(h.gpus.total))}</td>
                                    <td class="num" data-test="hall-allocated">{units::count(u64::from(h.gpus.allocated))}</td>
                                    <td class="num">{units::count(u64::from(h.gpus.idle))}</td>
                                    <td class="num">{units::count(u64::from(h.gpus.drained))}</td>
                                    <td class="num">{units::count(u64::from(h.gpus.down))}</td>
                                    <td class="num">{units::count(u64::from(h.gpus_throttling))}</td>
                                    <td class="num">{units::percent(h.sm_active_mean)}</td>
                                    <td>{match h.incident.as_ref() {
                                        Some(i) => view! { <a href=i.link.clone()>{incident_words(i)}</a> }.into_any(),
                                        None => view! { <span class="muted">"none open"</span> }.into_any(),
                                    }}</td>
                                </tr>
                            }
                        }
                    </For>
                </tbody>
            </table>
            </div>
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
            {move || r.with(|r| r.incident.clone()).map(|i| view! {
                <a class=format!("rack-incident sev-{}", i.severity) data-test="rack-incident" href=i.link.clone()>
                    {incident_words(&i)}
                </a>
            })}
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

/// A rack's worst open incident in words: its severity, what and where, how many more.
fn incident_words(i: &crate::live::RackIncident) -> String {
    let more = i.count.saturating_sub(1);
    format!(
        "{} incident: {}{}",
        i.severity,
        i.words,
        if more == 0 {
            String::new()
        } else {
            format!(" (+{more} more)")
        }
    )
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
    ) + &r
        .incident
        .as_ref()
        .map(|i| format!("; {}", incident_words(i)))
        .unwrap_or_default()
}
