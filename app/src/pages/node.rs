//! `/nodes/:name`: one node. Its GPUs (temperature, power, clocks, decoded throttle reasons,
//! SM activity, ECC, last XID with its meaning and the action it calls for), Slurm state and
//! reason with drain/resume, its jobs, the XIDs it has thrown, and its last hour as charts.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::actions::{ActionKind, ActionTargets};
use crate::model::{NodeState, ThrottleReasons};
use crate::pages::nodes::{cannot_act, state_class, ActionPanel, Pending};
use crate::units;
use crate::views::NodeDetail;
use crate::xid;

#[server(endpoint = "node_detail")]
pub async fn get_node_detail(name: String) -> Result<Option<NodeDetail>, ServerFnError> {
    let backend = crate::backend::backend()?;
    let mut d = backend
        .node_detail(&name)
        .await
        .map_err(ServerFnError::new)?;
    if let Some(d) = d.as_mut() {
        d.me = crate::backend::me();
    }
    Ok(d)
}

#[component]
pub fn NodePage() -> impl IntoView {
    let params = use_params_map();
    let name = move || params.with(|p| p.get("name").unwrap_or_default());
    let data = Resource::new(name, get_node_detail);
    view! {
        <Title text=move || format!("Node {}", name())/>
        <Suspense fallback=|| view! { <p class="loading">"Loading the node…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(Some(d)) => view! { <NodeBody d/> }.into_any(),
                    Ok(None) => {
                        #[cfg(feature = "ssr")]
                        if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
                            resp.set_status(http::StatusCode::NOT_FOUND);
                        }
                        view! {
                            <h1>"No such node"</h1>
                            <p>{format!("Neither the scheduler nor the layout knows a node {:?}. ", name())}<a href="/nodes">"All nodes"</a></p>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show the node: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn NodeBody(d: NodeDetail) -> impl IntoView {
    let interval = d.interval_ms.max(500);
    let now = RwSignal::new(d.server_now_ms);
    let published = RwSignal::new(d.published_ms);
    let state = RwSignal::new(d);
    #[cfg(feature = "hydrate")]
    client::refresh(state, now, published, interval);
    let stale = Memo::new(move |_| now.get() - published.get() > 3 * interval);
    let pending: RwSignal<Option<Pending>> = RwSignal::new(None);
    let name = state.with_untracked(|d| d.name.clone());
    let after = Callback::new(move |_| {
        #[cfg(feature = "hydrate")]
        client::refetch(state, published);
    });
    let slurm_state = move || {
        state.with(|d| {
            d.slurm
                .as_ref()
                .map(|s| s.state)
                .or(d.tile.as_ref().map(|t| t.state))
        })
    };
    let name_for_button = name.clone();
    view! {
        <div class="page-head" data-test="node-page" data-node=name.clone()>
            <h1>{format!("Node {name}")}</h1>
            <p class=move || if stale.get() { "live-status stale" } else { "live-status live" } role="status" aria-live="polite">
                <span class="dot" aria-hidden="true"></span>
                {move || {
                    let at = units::utc(state.with(|d| d.at_ms));
                    if stale.get() { format!("Stale: data of {at}") } else { format!("Data of {at}") }
                }}
            </p>
        </div>
        {move || {
            let (incidents, s) = state.with(|d| (d.incidents.clone(), d.slurm.as_ref().map(|s| s.state).or(d.tile.as_ref().map(|t| t.state))));
            incident_banner(&incidents, s).map(|(words, critical)| view! {
                <section class="incident-banner" class:critical=critical aria-label="Open incidents" data-test="node-incidents">
                    <p><strong>{words}</strong></p>
                    <ul>
                        {incidents.into_iter().map(|i| view! {
                            <li>
                                <span class=format!("badge sev-{}", i.severity)>{i.severity.clone()}</span>" "
                                {i.cause.summary.clone()}": "<em>{i.action.clone()}</em>
                            </li>
                        }).collect_view()}
                    </ul>
                    <p><a href="/alerts">"All incidents"</a></p>
                </section>
            })
        }}
        {move || state.with(|d| d.lemon_html.clone()).map(|h| view! { <div inner_html=h></div> })}
        <section class="node-head" class:stale=move || stale.get() aria-label="Scheduler">
            {move || slurm_state().map(|s| view! {
                <span class=format!("badge {}", state_class(s)) data-test="node-state">{s.label()}</span>
            })}
            {move || state.with(|d| d.slurm.as_ref().and_then(|s| s.reason.clone())).map(|r| view! {
                <span class="reason" data-test="node-reason">{format!("Reason: {r}")}</span>
            })}
            {move || state.with(|d| d.tile.clone()).map(|t| view! {
                <span class="num">{format!("{} · hottest GPU {} · SM {} · rack ", units::power(t.power_watts), units::celsius(t.gpu_temp_max_celsius), units::percent(t.sm_active_mean))}</span>
                <a href="/racks">{t.rack.clone()}</a>
            })}
            {move || {
                let why = state.with(|d| cannot_act(&d.me));
                let drained = matches!(slurm_state(), Some(NodeState::Drained | NodeState::Draining | NodeState::Down));
                let (kind, verb) = if drained { (ActionKind::Resume, "Resume") } else { (ActionKind::Drain, "Drain") };
                let n = name_for_button.clone();
                view! {
                    <button type="button" data-test="node-action" disabled=why.is_some() title=why.unwrap_or("")
                        on:click=move |_| pending.set(Some(Pending { kind, label: n.clone(), targets: ActionTargets { nodes: vec![n.clone()], ..Default::default() }, reason: String::new() }))>
                        {format!("{verb}…")}
                    </button>
                }
            }}
        </section>
        {move || pending.get().map(|p| view! { <ActionPanel p pending after/> })}
        <h2 id="gpus-h">"GPUs"</h2>
        <table class="grid compact" aria-labelledby="gpus-h" data-test="node-gpus" class:stale=move || stale.get()>
            <thead><tr>
                <th scope="col" class="num">"GPU"</th><th scope="col" class="num">"Temp GPU / HBM"</th><th scope="col" class="num">"Power / limit"</th>
                <th scope="col" class="num">"SM clock"</th><th scope="col" class="num">"GPU util"</th><th scope="col" class="num">"Activity SM / tensor / DRAM"</th>
                <th scope="col" class="num">"NVLink / PCIe"</th><th scope="col" class="num">"Energy"</th>
                <th scope="col">"Throttle reasons"</th><th scope="col" class="num">"ECC single / double-bit"</th>
                <th scope="col" class="num">"Remapped rows (uncorr.)"</th><th scope="col" class="num">"PCIe replays"</th><th scope="col">"Last XID"</th>
            </tr></thead>
            <tbody>
                {move || state.with(|d| d.gpus.clone()).into_iter().map(|g| {
                    let reasons = g.throttle.map(|t| {
                        let names = ThrottleReasons(t.0 & ThrottleReasons::THROTTLING_MASK).names();
                        if names.is_empty() { "none".to_string() } else { names.join(", ") }
                    }).unwrap_or_else(|| "-".into());
                    let dbe = g.ecc_dbe_total;
                    view! {
                        <tr data-test="gpu-row" data-gpu=g.index.to_string()>
                            <th scope="row" class="num">{g.index}</th>
                            <td class="num">{format!("{} / {}", units::celsius(g.temp_celsius), units::celsius(g.memory_temp_celsius))}</td>
                            <td class="num">{format!("{} / {}", units::power(g.power_watts), units::power(g.power_limit_watts))}</td>
                            <td class="num">{g.sm_clock_mhz.map(|c| format!("{c:.0} MHz")).unwrap_or_else(|| "-".into())}</td>
                            <td class="num">{units::percent(g.gpu_util_percent.map(|p| p / 100.0))}</td>
                            <td class="num" data-test="gpu-activity">{format!("{} / {} / {}", units::percent(g.sm_active_ratio), units::percent(g.tensor_active_ratio), units::percent(g.dram_active_ratio))}</td>
                            <td class="num">{format!("{} / {}", g.nvlink_bytes_per_second.map(units::bytes_per_second).unwrap_or_else(|| "-".into()), g.pcie_bytes_per_second.map(units::bytes_per_second).unwrap_or_else(|| "-".into()))}</td>
                            <td class="num">{g.energy_joules.map(|j| format!("{:.1} kWh", j / 3.6e6)).unwrap_or_else(|| "-".into())}</td>
                            <td>{reasons}</td>
                            <td class="num" class:warn=dbe.is_some_and(|x| x > 0)>
                                {format!("{} / {}", g.ecc_sbe_total.map(|x| x.to_string()).unwrap_or_else(|| "-".into()), dbe.map(|x| x.to_string()).unwrap_or_else(|| "-".into()))}
                            </td>
                            <td class="num" class:warn=g.remapped_rows_uncorrectable.is_some_and(|x| x > 0)>{g.remapped_rows_uncorrectable.map(|x| x.to_string()).unwrap_or_else(|| "-".into())}</td>
                            <td class="num">{g.pcie_replay_total.map(|x| x.to_string()).unwrap_or_else(|| "-".into())}</td>
                            <td data-test="gpu-xid">{g.last_xid.map(xid::describe).unwrap_or_else(|| "none".into())}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        {move || state.with(|d| d.switches_html.clone()).map(|h| view! { <div inner_html=h></div> })}
        <h2 id="jobs-h">"Jobs on this node"</h2>
        {move || {
            let jobs = state.with(|d| d.jobs.clone());
            if jobs.is_empty() {
                view! { <p>"None running."</p> }.into_any()
            } else {
                view! {
                    <ul>{jobs.into_iter().map(|j| view! {
                        <li><a href=format!("/jobs/{}", j.id)>{format!("job {}", j.id)}</a>{format!(" {} ({}), {} GPUs over {} node(s)", j.name, j.user, j.gpus, j.nodes.len())}</li>
                    }).collect_view()}</ul>
                }.into_any()
            }
        }}
        <h2 id="xid-h">"XID errors"</h2>
        {move || {
            let xids = state.with(|d| d.xids.clone());
            if xids.is_empty() {
                view! { <p data-test="xids-none">"None recorded."</p> }.into_any()
            } else {
                view! {
                    <table class="grid compact" aria-labelledby="xid-h" data-test="node-xids">
                        <thead><tr><th scope="col">"When (UTC)"</th><th scope="col" class="num">"GPU"</th><th scope="col">"XID, meaning and action"</th></tr></thead>
                        <tbody>{xids.into_iter().map(|x| view! {
                            <tr><td class="num">{units::utc(x.at_ms)}</td><td class="num">{x.gpu}</td><td>{xid::describe(x.xid)}</td></tr>
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            }
        }}
        <h2 id="hour-h">"Last hour"</h2>
        <div class="charts">
            {["power_watts", "temp_celsius", "sm_active_ratio"].into_iter().map(|m| {
                let src = format!(
                    "/api/charts/history.svg?scope={}&metric={m}",
                    units::url_component(&format!("node:{name}"))
                );
                let alt = format!("{name}: {} over the last hour", match m { "power_watts" => "power", "temp_celsius" => "GPU temperature", _ => "SM activity" });
                view! {
                    <figure>
                        <img src=src.clone() alt=alt width="480" height="200" loading="lazy" data-test="node-chart"/>
                        <figcaption><a href=src download>"SVG"</a></figcaption>
                    </figure>
                }
            }).collect_view()}
        </div>
    }
}

#[cfg(feature = "hydrate")]
mod client {
    use super::*;
    use crate::model::UnixMs;
    use std::time::Duration;

    fn local_now() -> UnixMs {
        js_sys::Date::now() as UnixMs
    }

    pub fn refetch(state: RwSignal<NodeDetail>, published: RwSignal<UnixMs>) {
        let name = state.with_untracked(|d| d.name.clone());
        leptos::task::spawn_local(async move {
            if let Ok(Some(d)) = get_node_detail(name).await {
                published.set(local_now() - (d.server_now_ms - d.published_ms).max(0));
                state.set(d);
            }
        });
    }

    /// Re-reads the node every interval (at least 2 s), and ticks the clock that ages it.
    pub fn refresh(
        state: RwSignal<NodeDetail>,
        now: RwSignal<UnixMs>,
        published: RwSignal<UnixMs>,
        interval_ms: i64,
    ) {
        let age = state.with_untracked(|d| d.server_now_ms - d.published_ms);
        published.set(local_now() - age.max(0));
        now.set(local_now());
        let clock =
            set_interval_with_handle(move || now.set(local_now()), Duration::from_millis(1000))
                .ok();
        let poll = set_interval_with_handle(
            move || refetch(state, published),
            Duration::from_millis(interval_ms.clamp(2000, 10_000) as u64),
        )
        .ok();
        on_cleanup(move || {
            if let Some(c) = clock {
                c.clear();
            }
            if let Some(p) = poll {
                p.clear();
            }
        });
    }
}

/// A node's NVSwitches as HTML the server writes (server builds only): no browser logic;
/// the page's refresh brings a new one.
#[cfg(feature = "ssr")]
pub fn switches_html(switches: &[crate::model::SwitchReading]) -> String {
    view! {
        <h2 id="nvswitch-h">"NVSwitches"</h2>
        <table class="grid compact" aria-labelledby="nvswitch-h" data-test="node-nvswitches">
            <thead><tr>
                <th scope="col" class="num">"Switch"</th><th scope="col" class="num">"Temp (slowdown / shutdown)"</th>
                <th scope="col">"Fatal SXid"</th><th scope="col">"Non-fatal SXid"</th>
                <th scope="col">"Reset required"</th><th scope="col">"Links"</th>
            </tr></thead>
            <tbody>{switches.iter().map(|w| {
                let links = if w.links_active == 0 && w.links_not_active.is_empty() {
                    "-".to_string()
                } else if w.links_not_active.is_empty() {
                    format!("{} active", w.links_active)
                } else {
                    let down: Vec<String> = w.links_not_active.iter().map(u32::to_string).collect();
                    format!("{} active; not active: {}", w.links_active, down.join(", "))
                };
                view! {
                    <tr data-test="nvswitch-row" data-switch=w.switch.to_string() class:crit=w.fatal_sxid.is_some() class:warn=w.is_hot()>
                        <th scope="row" class="num">{w.switch}</th>
                        <td class="num">{format!("{} ({} / {})", units::celsius(w.temp_celsius), units::celsius(w.slowdown_celsius), units::celsius(w.shutdown_celsius))}</td>
                        <td data-test="nvswitch-fatal">{w.fatal_sxid.map(|x| format!("SXid {x}")).unwrap_or_else(|| "none".into())}</td>
                        <td>{w.non_fatal_sxid.map(|x| format!("SXid {x}")).unwrap_or_else(|| "none".into())}</td>
                        <td>{match w.reset_required { Some(true) => "yes", Some(false) => "no", None => "-" }}</td>
                        <td>{links}</td>
                    </tr>
                }
            }).collect_view()}</tbody>
        </table>
    }
    .to_html()
}

/// The lemon mark as HTML the server writes (server builds only): no browser logic.
#[cfg(feature = "ssr")]
pub fn lemon_html(l: &crate::reliability::Lemon) -> String {
    view! {
        <p class="lemon-mark" role="note" data-test="lemon-mark">
            <span class="badge sev-critical">"Lemon: RMA / deep diagnostics"</span>
            {format!(" Last 30 days: {}. See the reliability page.", l.evidence)}
        </p>
    }
    .to_html()
}

/// The node's incidents in words ("2 critical, 1 warning; still accepting jobs"), and
/// whether any is critical; `None` without one.
fn incident_banner(
    incidents: &[crate::views::Incident],
    state: Option<crate::model::NodeState>,
) -> Option<(String, bool)> {
    use crate::model::NodeState;
    if incidents.is_empty() {
        return None;
    }
    let critical = incidents
        .iter()
        .filter(|i| i.severity == "critical")
        .count();
    let others = incidents.len() - critical;
    let mut parts = Vec::new();
    if critical > 0 {
        parts.push(format!("{critical} critical"));
    }
    if others > 0 {
        parts.push(format!("{others} warning"));
    }
    let taking = match state {
        Some(NodeState::Idle | NodeState::Allocated | NodeState::Mixed) => "still accepting jobs",
        Some(NodeState::Draining) => "draining",
        Some(NodeState::Drained | NodeState::Maintenance) => "out of service",
        Some(NodeState::Down | NodeState::NotResponding) => "down",
        _ => "scheduler state unknown",
    };
    Some((
        format!(
            "{} incident{} open; {taking}",
            parts.join(", "),
            if incidents.len() == 1 { "" } else { "s" }
        ),
        critical > 0,
    ))
}

#[cfg(test)]
mod banner_tests {
    use crate::model::NodeState;

    #[test]
    fn the_banner_counts_by_severity_and_says_whether_it_takes_jobs() {
        let one = |severity: &str| -> crate::views::Incident {
            serde_json::from_value(serde_json::json!({
                "id": 1, "severity": severity, "started_ms": 0, "acked": false,
                "cause": {"id": 1, "rule": "xid", "subject": "node:n", "severity": severity,
                    "summary": "s", "link": "", "state": "firing", "started_ms": 0,
                    "resolved_ms": null, "acked_by": null, "acked_ms": null, "ack_note": null,
                    "silenced_until_ms": null},
                "alerts": [], "place": "node n", "place_link": "/nodes/n", "nodes": ["n"],
                "racks": [], "jobs": [], "action": "Drain node n."
            }))
            .expect("an incident")
        };
        assert_eq!(super::incident_banner(&[], Some(NodeState::Idle)), None);
        assert_eq!(
            super::incident_banner(
                &[one("critical"), one("critical"), one("warning")],
                Some(NodeState::Allocated)
            ),
            Some((
                "2 critical, 1 warning incidents open; still accepting jobs".into(),
                true
            ))
        );
        assert_eq!(
            super::incident_banner(&[one("warning")], Some(NodeState::Drained)),
            Some(("1 warning incident open; out of service".into(), false))
        );
    }
}
