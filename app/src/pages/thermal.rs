//! `/thermal`: GPUs throttling now, by reason, by rack (inlet against the hottest GPU) and
//! by job, and the GPU-hours lost to throttling (clock deficit x time) since Gantry started.

use leptos::prelude::*;

use crate::live::Overview;
use crate::live::{Entries, LiveView};
use crate::units;

fn reason_label(r: &str) -> &'static str {
    match r {
        "hw_thermal" => "HW thermal slowdown",
        "sw_thermal" => "SW thermal slowdown",
        "sw_power_cap" => "SW power cap",
        "hw_slowdown" => "HW slowdown",
        "hw_power_brake" => "HW power brake",
        _ => "other",
    }
}

#[component]
pub fn ThermalPage() -> impl IntoView {
    view! { <LiveView title="Thermal" heading="Thermal throttling" body=|state, stale| view! { <Thermal state stale/> }.into_any()/> }
}

/// What a rack's row shows, and nothing else: the rack's power changes every tick, its
/// temperatures and throttled GPUs seldom, so a row is touched only when what it shows
/// changed.
#[derive(Clone, Debug, PartialEq)]
struct RackThermal {
    name: String,
    inlet_celsius: Option<f64>,
    inlet_limit_celsius: f64,
    gpu_temp_max_celsius: Option<f64>,
    gpus_throttling: u32,
    /// GPU-hours lost since start, as shown (hundredths).
    lost_centi_gpu_hours: i64,
}

/// Rack `i`'s row as the overview has it now.
fn rack_thermal(s: &Overview, i: usize) -> Option<RackThermal> {
    let r = s.racks.get(i)?;
    let lost = s
        .thermal
        .lost_by_rack
        .iter()
        .find(|(n, _)| *n == r.name)
        .map_or(0.0, |x| x.1);
    Some(RackThermal {
        name: r.name.clone(),
        inlet_celsius: r.inlet_celsius,
        inlet_limit_celsius: r.inlet_limit_celsius,
        gpu_temp_max_celsius: r.gpu_temp_max_celsius,
        gpus_throttling: r.gpus_throttling,
        lost_centi_gpu_hours: (lost * 100.0).round() as i64,
    })
}

/// A rack's row. Its name is fixed (a new rack list lays the table out again); each other
/// cell follows the row's entry, and the DOM is written only where a cell changed.
#[component]
fn RackRow(r: RwSignal<RackThermal>) -> impl IntoView {
    let name = r.with_untracked(|r| r.name.clone());
    let label = name.clone();
    let hot = move || r.with(|r| r.inlet_celsius.is_some_and(|t| t >= r.inlet_limit_celsius));
    let cell = move |f: fn(&RackThermal) -> String| move || r.with(f);
    view! {
        <tr data-rack=label class:warn=hot>
            <th scope="row"><a href="/racks?metric=temp">{name}</a></th>
            <td class="num">{move || format!("{}{}", r.with(|r| units::celsius(r.inlet_celsius)), if hot() { " · hot" } else { "" })}</td>
            <td class="num">{cell(|r| units::celsius(Some(r.inlet_limit_celsius)))}</td>
            <td class="num">{cell(|r| units::celsius(r.gpu_temp_max_celsius))}</td>
            <td class="num" data-test="rack-throttling">{cell(|r| r.gpus_throttling.to_string())}</td>
            <td class="num">{cell(|r| format!("{:.2} GPU-h", r.lost_centi_gpu_hours as f64 / 100.0))}</td>
        </tr>
    }
}

#[component]
fn Thermal(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let total = move || state.with(|s| s.summary.gpus_throttling);
    let lost = move || state.with(|s| s.thermal.lost_gpu_hours);
    // One row per rack, each following its own entry: a tick writes only the cells it
    // changed. The rows are laid out again when the list of racks changes.
    let shape =
        Memo::new(move |_| state.with(|s| crate::live::shape_of(s.racks.iter().map(|r| &r.name))));
    let racks = Entries::follow_computed(state, rack_thermal);
    // The reasons and the jobs are redrawn when they changed, not on every tick.
    let by_reason = Memo::new(move |_| state.with(|s| s.thermal.by_reason.clone()));
    let by_job = Memo::new(move |_| state.with(|s| s.thermal.by_job.clone()));
    // Liquid racks' coolant loops, redrawn when one changed (held to sensor steps).
    let coolant = Memo::new(move |_| {
        state.with(|s| {
            s.racks
                .iter()
                .filter_map(|r| {
                    r.coolant
                        .clone()
                        .map(|c| (r.name.clone(), r.inlet_celsius, c))
                })
                .collect::<Vec<_>>()
        })
    });
    view! {
        <div class:stale=move || stale.get()>
            <dl class="stats">
                <div class="stat"><dt>"GPUs throttling now"</dt><dd class="num" data-test="thermal-throttling">{move || units::count(u64::from(total()))}</dd></div>
                <div class="stat" title="Sum over throttled GPUs of (1 − SM clock / 1,980 MHz boost) × time, since this server started">
                    <dt>"Lost to throttling"</dt><dd class="num" data-test="thermal-lost">{move || format!("{:.2} GPU-h", lost())}</dd>
                </div>
            </dl>
            <h2 id="history-h">"Last 24 hours"</h2>
            <figure class="charts">
                <img src="/api/charts/throttling.svg?scope=cluster&hours=24" width="480" height="200" loading="lazy"
                    data-test="thermal-history" alt="GPUs throttling in the whole cluster, the most in each minute, over the last 24 hours"/>
                <figcaption><a href="/api/charts/throttling.svg?scope=cluster&hours=24" download>"SVG"</a></figcaption>
            </figure>
            <h2 id="by-reason">"By reason"</h2>
            <table class="grid compact" aria-labelledby="by-reason" data-test="thermal-reasons">
                <thead><tr><th scope="col">"Reason"</th><th scope="col" class="num">"GPUs"</th></tr></thead>
                <tbody>
                    {move || by_reason.get().into_iter().map(|c| view! {
                        <tr data-reason=c.reason.clone()><th scope="row">{reason_label(&c.reason)}</th><td class="num">{c.gpus}</td></tr>
                    }).collect_view()}
                </tbody>
            </table>
            <p class="muted">"A GPU can throttle for several reasons at once, so the rows may add up to more than the total."</p>
            <h2 id="by-rack">"By rack"</h2>
            <table class="grid compact" aria-labelledby="by-rack" data-test="thermal-racks">
                <thead><tr>
                    <th scope="col">"Rack"</th><th scope="col" class="num">"Inlet"</th><th scope="col" class="num">"Inlet limit"</th>
                    <th scope="col" class="num">"Hottest GPU"</th><th scope="col" class="num">"GPUs throttling"</th>
                    <th scope="col" class="num">"Lost since start"</th>
                </tr></thead>
                <tbody>
                    {move || {
                        shape.track();
                        racks.renew_computed(state, rack_thermal);
                        (0..racks.len()).filter_map(|i| racks.get(i)).map(|r| view! { <RackRow r/> }).collect_view()
                    }}
                </tbody>
            </table>
            {move || {
                let racks = coolant.get();
                (!racks.is_empty()).then(|| view! {
                    <h2 id="liquid">"Liquid cooling"</h2>
                    <table class="grid compact" aria-labelledby="liquid" data-test="thermal-coolant">
                        <thead><tr>
                            <th scope="col">"Rack"</th><th scope="col">"Leak detectors"</th>
                            <th scope="col" class="num">"Supply"</th><th scope="col" class="num">"Return"</th>
                            <th scope="col" class="num">"ΔT (limit)"</th><th scope="col" class="num">"Flow"</th>
                            <th scope="col">"Trays short of flow (limit per tray)"</th><th scope="col" class="num">"Inlet air"</th>
                        </tr></thead>
                        <tbody>
                            {racks.into_iter().map(|(name, inlet, c)| {
                                let leak = c.leak != crate::model::LeakState::Ok;
                                let warn = c.delta_t_high() || !c.low_flow.is_empty();
                                let key = name.clone();
                                view! {
                                    <tr data-rack=key class:crit=leak class:warn=warn>
                                        <th scope="row"><a href="/racks">{name}</a></th>
                                        <td data-test="coolant-leak">{if leak {
                                            format!("{} at {}", c.leak.label(), c.leaking.join(", "))
                                        } else {
                                            format!("OK ({} trays reporting)", c.trays_reporting)
                                        }}</td>
                                        <td class="num">{super::racks::tenths(c.supply_celsius, "°C")}</td>
                                        <td class="num">{super::racks::tenths(c.return_celsius, "°C")}</td>
                                        <td class="num">{format!("{} ({})", super::racks::tenths(c.delta_t_celsius, "°C"), super::racks::tenths(c.delta_t_max_celsius, "°C"))}</td>
                                        <td class="num">{super::racks::tenths(c.flow_lpm, "L/min")}</td>
                                        <td data-test="coolant-low-flow">{format!("{} ({})",
                                            if c.low_flow.is_empty() { "none".to_string() } else { c.low_flow.join(", ") },
                                            super::racks::tenths(c.flow_min_lpm, "L/min"))}</td>
                                        <td class="num">{units::celsius(inlet)}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                    <p class="muted">"Supply and return are means over the trays that report them; flow is their sum. A liquid rack is judged by its coolant first: inlet air is secondary."</p>
                })
            }}
            <h2 id="by-job">"By job"</h2>
            {move || {
                let jobs = by_job.get();
                if jobs.is_empty() {
                    view! { <p>"No running job has a throttled GPU."</p> }.into_any()
                } else {
                    view! {
                        <table class="grid compact" aria-labelledby="by-job" data-test="thermal-jobs">
                            <thead><tr>
                                <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th>
                                <th scope="col" class="num">"GPUs throttling"</th><th scope="col" class="num">"Clock deficit"</th>
                            </tr></thead>
                            <tbody>
                                {jobs.into_iter().map(|j| view! {
                                    <tr>
                                        <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                        <td>{j.name.clone()}</td>
                                        <td class="num">{format!("{} of {}", j.gpus_throttling, j.gpus)}</td>
                                        <td class="num">{units::percent(j.clock_deficit)}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }
            }}
        </div>
    }
}
