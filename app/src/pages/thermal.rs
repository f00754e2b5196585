//! `/thermal`: GPUs throttling now, by reason, by rack (inlet against the hottest GPU) and
//! by job, and the GPU-hours lost to throttling (clock deficit x time) since Gantry started.

use leptos::prelude::*;

use crate::live::Overview;
use crate::pages::overview::LiveView;
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

/// What a rack's row shows.
#[derive(Clone, Debug, PartialEq)]
struct RackThermal {
    rack: crate::live::RackTile,
    lost_gpu_hours: f64,
}

#[component]
fn RackRow(state: RwSignal<Overview>, i: usize) -> impl IntoView {
    let row = Memo::new(move |_| {
        state.with(|s| {
            let rack = s.racks.get(i)?.clone();
            let lost_gpu_hours = s
                .thermal
                .lost_by_rack
                .iter()
                .find(|(n, _)| *n == rack.name)
                .map_or(0.0, |x| x.1);
            Some(RackThermal {
                rack,
                lost_gpu_hours,
            })
        })
    });
    move || {
        row.get().map(|RackThermal { rack: r, lost_gpu_hours: lost }| {
            let hot = r.inlet_celsius.is_some_and(|t| t >= r.inlet_limit_celsius);
            view! {
                <tr data-rack=r.name.clone() class:warn=hot>
                    <th scope="row"><a href="/racks?metric=temp">{r.name.clone()}</a></th>
                    <td class="num">{units::celsius(r.inlet_celsius)}{hot.then_some(" · hot")}</td>
                    <td class="num">{units::celsius(Some(r.inlet_limit_celsius))}</td>
                    <td class="num">{units::celsius(r.gpu_temp_max_celsius)}</td>
                    <td class="num" data-test="rack-throttling">{r.gpus_throttling}</td>
                    <td class="num">{format!("{lost:.2} GPU-h")}</td>
                </tr>
            }
        })
    }
}

#[component]
fn Thermal(state: RwSignal<Overview>, stale: Memo<bool>) -> impl IntoView {
    let total = move || state.with(|s| s.summary.gpus_throttling);
    let lost = move || state.with(|s| s.thermal.lost_gpu_hours);
    // One row per rack, each following its own rack: a tick re-renders the racks it changed.
    let rack_count = Memo::new(move |_| state.with(|s| s.racks.len()));
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
                    {move || state.with(|s| s.thermal.by_reason.clone()).into_iter().map(|c| view! {
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
                    {move || (0..rack_count.get()).map(|i| view! { <RackRow state i/> }).collect_view()}
                </tbody>
            </table>
            <h2 id="by-job">"By job"</h2>
            {move || {
                let jobs = state.with(|s| s.thermal.by_job.clone());
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
