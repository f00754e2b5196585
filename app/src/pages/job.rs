//! `/jobs/:id`: one job. Its state transitions with times and nodes, its checkpoints (step,
//! size, save duration and throughput), the last good checkpoint, work at risk now, and
//! GPU-hours lost to failures and requeues; requeue for operators.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::actions::{ActionKind, ActionTargets};
use crate::model::JobState;
use crate::pages::nodes::{cannot_act, ActionPanel, Pending};
use crate::units;
use crate::views::JobDetail;

#[server(endpoint = "job_detail")]
pub async fn get_job_detail(id: u64) -> Result<Option<JobDetail>, ServerFnError> {
    let backend = crate::backend::backend()?;
    let mut d = backend.job_detail(id).await.map_err(ServerFnError::new)?;
    if let Some(d) = d.as_mut() {
        d.me = crate::backend::me();
    }
    Ok(d)
}

#[cfg(feature = "ssr")]
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[component]
pub fn JobPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0));
    let data = Resource::new(id, get_job_detail);
    view! {
        <Title text=move || format!("Job {}", id())/>
        <Suspense fallback=|| view! { <p class="loading">"Loading the job…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(Some(d)) => view! { <JobBody d data/> }.into_any(),
                    Ok(None) => {
                        #[cfg(feature = "ssr")]
                        if let Some(resp) = use_context::<leptos_axum::ResponseOptions>() {
                            resp.set_status(http::StatusCode::NOT_FOUND);
                        }
                        view! { <h1>"No such job"</h1><p>"Gantry has not seen this job. "<a href="/jobs">"All jobs"</a></p> }.into_any()
                    }
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show the job: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn JobBody(
    d: JobDetail,
    data: Resource<Result<Option<JobDetail>, ServerFnError>>,
) -> impl IntoView {
    let pending: RwSignal<Option<Pending>> = RwSignal::new(None);
    let after = Callback::new(move |_| data.refetch());
    let j = d.job.clone();
    let why = cannot_act(&d.me)
        .or((j.state != JobState::Running).then_some("Only running jobs can be requeued"));
    let id = j.id;
    let now = d.now_ms;
    view! {
        <div class="page-head" data-test="job-page" data-job=j.id.to_string()>
            <h1>{format!("Job {} ", j.id)}<span class="muted">{j.name.clone()}</span></h1>
        </div>
        <section class="node-head" aria-label="Job">
            <span class="badge" data-test="job-state">{j.state.label()}</span>
            <span>{format!("{} · {} · {} · {} GPUs", j.user, j.account, j.partition, j.gpus)}</span>
            <span>{format!("requeues: {}", d.restart_count)}</span>
            {d.time_limit_ms.map(|t| view! { <span>{format!("time limit: {}", units::duration_ms(t))}</span> })}
            {d.reason.clone().filter(|r| r != "None" && d.wait.is_none()).map(|r| view! { <span class="muted">{format!("reason: {r}")}</span> })}
            <button type="button" data-test="job-requeue" disabled=why.is_some() title=why.unwrap_or("")
                on:click=move |_| pending.set(Some(Pending { kind: ActionKind::Requeue, label: format!("job {id}"), targets: ActionTargets { jobs: vec![id], ..Default::default() }, reason: String::new() }))>
                "Requeue…"
            </button>
        </section>
        {move || pending.get().map(|p| view! { <ActionPanel p pending after/> })}
        {d.wait.clone().map(|w| view! {
            <section class="card" aria-labelledby="wait-h" data-test="job-wait" data-wait=w.kind.as_str()>
                <h2 id="wait-h">{format!("Why it waits: {}", w.kind.label())}</h2>
                <p>{crate::pages::nodes::wait_sentence(&w)}" "<code class="muted" title="Slurm's reason">{w.reason.clone()}</code></p>
            </section>
        })}
        {d.idle.clone().map(|h| view! {
            <section class="card" aria-labelledby="idle-h" data-test="job-idle">
                <h2 id="idle-h">"GPUs held idle"</h2>
                <p>{h.sentence(d.now_ms)}"; SM activity under the threshold and no memory in use. Use them or release them."</p>
            </section>
        })}
        <p>
            "Nodes: "
            {j.nodes.iter().map(|n| view! { <a href=units::node_href(n)>{n.clone()}</a>" " }).collect_view()}
        </p>
        <dl class="stats">
            <div class="stat"><dt>"Work at risk now"</dt><dd class="num" data-test="work-at-risk">
                {d.work_at_risk_gpu_hours.map(|h| format!("{h:.1} GPU-h")).unwrap_or_else(|| "-".into())}
            </dd></div>
            <div class="stat"><dt>"Lost to failures and requeues"</dt><dd class="num" data-test="work-lost">{format!("{:.1} GPU-h", d.lost_gpu_hours)}</dd></div>
            {d.energy.clone().map(|e| view! {
                <div class="stat wide"><dt>"Energy"</dt><dd class="num" data-test="job-energy"
                    title="Its nodes' energy shared by its GPU-hours; its GPUs' own from their energy counters">
                    {format!("{:.1} kWh (GPUs {:.1} kWh{}) · {:.2} {}{}",
                        e.kwh, e.gpu_kwh,
                        if e.estimated_kwh > 0.0 { format!(", {:.1} estimated from power", e.estimated_kwh) } else { String::new() },
                        e.cost, e.currency,
                        e.co2_kg.map(|c| format!(" · {c:.1} kg CO2")).unwrap_or_default())}
                </dd></div>
            })}
            <div class="stat wide"><dt>"Last good checkpoint"</dt><dd class="num" data-test="last-good"
                title=d.last_good.as_ref().map(|c| format!("ended {}", units::utc(c.started_ms + c.duration_ms))).unwrap_or_default()>
                {d.last_good.as_ref().map(|c| format!("step {} · {} ago", c.step.map_or("unknown".into(), |s| s.to_string()), units::duration_ms(now - c.started_ms - c.duration_ms))).unwrap_or_else(|| "none".into())}
            </dd></div>
        </dl>
        <div inner_html=d.radar_html.clone()></div>
        <div inner_html=d.ledger_html.clone()></div>
        <h2 id="act-h">"GPU activity"</h2>
        <figure class="charts">
            <img src=format!("/api/charts/job/{id}/activity.svg") width="480" height="200" loading="lazy" data-test="job-activity"
                alt=format!("Job {id}: mean SM activity of its GPUs per minute since it started")/>
        </figure>
        <div inner_html=d.history_html.clone()></div>
        <div inner_html=d.advice_html.clone()></div>
    }
}

/// The job page's sections the server writes as HTML (server builds only): the radar's
/// alerts and the checkpoint advice. They need no browser logic, so the bundle carries
/// none of them.
#[cfg(feature = "ssr")]
pub mod server_html {
    use leptos::prelude::*;

    use super::gib;
    use crate::model::Checkpoint;
    use crate::reliability::{Badput, CheckpointAdvice, JobCoverage};
    use crate::units;
    use crate::views::{AlertItem, JobTransition};

    /// The radar's open alerts for the job (empty: nothing).
    pub fn radar(radar: &[AlertItem]) -> String {
        if radar.is_empty() {
            return String::new();
        }
        view! {
            <section class="radar" aria-labelledby="radar-h" data-test="job-radar">
                <h2 id="radar-h">"Stragglers and hangs"</h2>
                {crate::pages::reliability::radar_list(radar)}
            </section>
        }
        .to_html()
    }

    /// Its effective training time and where its allocated GPU time went, across its
    /// runs (`None`: the rollups hold nothing of it yet).
    pub fn ledger(b: Option<&Badput>, coverage: &JobCoverage) -> String {
        let Some(b) = b.filter(|b| b.allocated_gh > 0.0) else {
            return view! {
                <section aria-labelledby="jl-h" data-test="job-ledger">
                    <h2 id="jl-h">"Effective training time"</h2>
                    <p>"Not booked yet: the ledger counts a job's GPU time from its first run."</p>
                    <p class="muted" data-test="job-coverage">{coverage.words(0.0)}</p>
                </section>
            }
            .to_html();
        };
        let wall = b.allocated_gh + b.restart_wait_gh;
        view! {
            <section aria-labelledby="jl-h" data-test="job-ledger">
                <h2 id="jl-h">"Effective training time"</h2>
                <p data-test="job-ettr" data-ettr=b.ettr().map(|e| format!("{e:.4}")).unwrap_or_default()>{format!(
                    "ETTR {}: {:.1} productive GPU-hours of {:.1} allocated plus {:.1} waiting to restart, across the runs Gantry watched.",
                    units::percent(b.ettr()),
                    b.productive_gh,
                    b.allocated_gh,
                    b.restart_wait_gh
                )}</p>
                <p data-test="job-coverage">{coverage.words(b.allocated_gh)}</p>
                <table class="grid compact" aria-labelledby="jl-h" data-test="job-ledger-buckets">
                    <thead><tr>
                        <th scope="col">"Bucket"</th><th scope="col" class="num">"GPU-hours"</th><th scope="col" class="num">"Share"</th>
                    </tr></thead>
                    <tbody>
                        {b.buckets().into_iter().map(|(n, v)| view! {
                            <tr><th scope="row">{n}</th><td class="num">{format!("{v:.2}")}</td>
                            <td class="num">{units::percent((wall > 0.0).then(|| v / wall))}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
                <p class="muted">"Definitions, and every job's ledger: "<a href="/reliability">"Reliability"</a>"."</p>
            </section>
        }
        .to_html()
    }

    /// The state transitions and checkpoints (newest checkpoint first).
    pub fn history(transitions: &[JobTransition], checkpoints: &[Checkpoint]) -> String {
        view! {
                <h2 id="tr-h">"State transitions"</h2>
                <table class="grid compact" aria-labelledby="tr-h" data-test="job-transitions">
                    <thead><tr><th scope="col">"When (UTC)"</th><th scope="col">"State"</th><th scope="col">"Nodes"</th><th scope="col">"Detail"</th></tr></thead>
                    <tbody>
                        {transitions.iter().map(|t| view! {
                            <tr><td class="num">{units::utc(t.at_ms)}</td><td>{t.state.label()}</td>
                            <td>{units::hostlist_short(&t.nodes)}</td><td>{t.detail.clone()}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
                <h2 id="ck-h">"Checkpoints"</h2>
                {if checkpoints.is_empty() {
                    view! { <p>"None known."</p> }.into_any()
                } else {
                    view! {
                        <table class="grid compact" aria-labelledby="ck-h" data-test="job-checkpoints">
                            <thead><tr>
                                <th scope="col" class="num">"Step"</th><th scope="col">"Started (UTC)"</th><th scope="col" class="num">"Size"</th>
                                <th scope="col" class="num">"Save took"</th><th scope="col" class="num">"Throughput"</th><th scope="col">"Complete"</th>
                            </tr></thead>
                            <tbody>
                                {checkpoints.iter().rev().map(|c| {
                                    let gbps = (c.duration_ms > 0).then(|| c.size_bytes as f64 / 1e9 / (c.duration_ms as f64 / 1000.0));
                                    view! {
                                        <tr data-test="checkpoint" data-step=c.step.map(|s| s.to_string()).unwrap_or_default()>
                                            <td class="num">{c.step.map_or_else(|| "unknown".to_string(), |s| s.to_string())}</td><td class="num">{units::utc(c.started_ms)}</td>
                                            <td class="num">{gib(c.size_bytes)}</td><td class="num">{units::duration_ms(c.duration_ms)}</td>
                                            <td class="num">{gbps.map(|g| format!("{g:.1} GB/s")).unwrap_or_else(|| "-".into())}</td>
                                            <td>{if c.complete { "yes" } else { "no" }}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any()
                }}
        }
        .to_html()
    }

    /// The checkpoint advice section.
    pub fn advice(advice: Option<CheckpointAdvice>) -> String {
        view! {
            <h2 id="adv-h">"Checkpoint advice"</h2>
            {match advice {
                None => view! { <p class="muted" data-test="checkpoint-advice">"No advice: it needs a complete checkpoint with a save time, and jobs that ran in the last 30 days to judge interruptions by."</p> }.into_any(),
                Some(a) => {
                    let secs = |s: f64| units::duration_ms((s * 1000.0).round() as i64);
                    let now = match (a.interval_s, a.loss_gpu_hours_per_day) {
                        (Some(i), Some(l)) => format!(
                            "It saves for {} every {}, which costs about {l:.1} GPU-hours a day in saves and in work redone after interruptions.",
                            secs(a.save_s), secs(i)
                        ),
                        _ => format!("It saved for {} (one save so far: no interval yet).", secs(a.save_s)),
                    };
                    let saved = a.loss_gpu_hours_per_day.map(|l| l - a.optimal_loss_gpu_hours_per_day);
                    // Without an interruption the time to one is a lower bound, and so is
                    // the best interval: advice in those words.
                    let change = if a.mtti_at_least {
                        match (a.interval_s, saved) {
                            (Some(i), Some(s)) if i < a.optimal_interval_s && s >= 0.05 => format!(
                                "With no interruption to go by, the best interval is at least {}: saving that seldom or less would save at least {s:.1} GPU-hours a day.",
                                secs(a.optimal_interval_s)
                            ),
                            (Some(_), _) => format!(
                                "With no interruption to go by, the best interval is at least {}; its interval is within that: fine as it is, or longer.",
                                secs(a.optimal_interval_s)
                            ),
                            (None, _) => format!(
                                "With no interruption to go by, any interval of at least {} is fine.",
                                secs(a.optimal_interval_s)
                            ),
                        }
                    } else {
                        match saved {
                        Some(s) if s >= 0.05 => format!("Checkpointing every {} instead would save about {s:.1} GPU-hours a day.", secs(a.optimal_interval_s)),
                        Some(_) => format!("Its interval is about optimal ({}).", secs(a.optimal_interval_s)),
                        None => format!("The interval that minimises expected loss is {}.", secs(a.optimal_interval_s)),
                        }
                    };
                    view! {
                        <div data-test="checkpoint-advice">
                            <p>{now}</p>
                            <p>{format!("Mean time to interruption at its size: {}{:.1} h ({}).", if a.mtti_at_least { "at least " } else { "" }, a.mtti_hours, a.mtti_basis)}</p>
                            <p data-test="advice-change">{change}</p>
                            <p class="muted">"Interval after Daly (Young's sqrt(2 x save x MTTI), refined for longer saves); losses by Young's first-order model."</p>
                        </div>
                    }.into_any()
                }
            }}
        }
        .to_html()
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::server_html;
    use crate::views::AlertItem;

    fn alert(rule: &str, subject: &str, summary: &str) -> AlertItem {
        AlertItem {
            id: 1,
            rule: rule.into(),
            subject: subject.into(),
            severity: if rule == "job_hung" {
                "critical"
            } else {
                "warning"
            }
            .into(),
            summary: summary.into(),
            link: "/jobs/7".into(),
            state: "firing".into(),
            started_ms: 1_794_268_800_000,
            resolved_ms: None,
            acked_by: None,
            acked_ms: None,
            ack_note: None,
            silenced_until_ms: None,
            silenced_by: None,
            silence_note: None,
            flaps: 0,
            no_data_since_ms: None,
        }
    }

    #[test]
    fn the_radar_section_names_each_alert_escaped_and_is_absent_without_one() {
        assert_eq!(server_html::radar(&[]), "");
        let h = server_html::radar(&[
            alert(
                "straggler",
                "job:7:gpu001:gpu3",
                "job 7: gpu001 GPU 3 at 55% <of> its peers",
            ),
            alert("job_hung", "job:7", "job 7: hung"),
        ]);
        assert!(h.contains("data-test=\"job-radar\""), "{h}");
        assert!(h.contains("data-rule=\"straggler\"") && h.contains("data-rule=\"job_hung\""));
        assert!(h.contains("badge sev-critical\">Hung"), "{h}");
        assert!(h.contains("55% &lt;of&gt; its peers"), "escaped: {h}");
        assert!(h.contains("since 2026-11-10 00:00"), "{h}");
    }

    #[test]
    fn a_jobs_ledger_says_what_it_covers() {
        use crate::reliability::{Badput, JobCoverage};
        // A 64-GPU job that ran 24 h, watched for its last hour.
        let c = JobCoverage {
            first_run_ms: Some(1_794_268_800_000),
            held_gh: 64.0 * 24.0,
            booked_from_ms: Some(1_794_268_800_000 + 23 * 3_600_000),
        };
        let b = Badput {
            allocated_gh: 64.0,
            productive_gh: 64.0,
            ..Default::default()
        };
        let h = server_html::ledger(Some(&b), &c);
        assert!(h.contains("across the runs Gantry watched"), "{h}");
        assert!(
            h.contains("Covers 64.0 GPU-h of its 1,536.0 GPU-h (4%), first run from 2026-11-10 00:00 UTC: Gantry counts what it watched, from the hour of 2026-11-10 23:00 UTC; the rest ran before."),
            "{h}"
        );
        let whole = JobCoverage {
            held_gh: 64.0,
            ..c.clone()
        };
        assert!(server_html::ledger(Some(&b), &whole)
            .contains("Covers all of its 64.0 GPU-h, first run"));
        let unbooked = JobCoverage {
            booked_from_ms: None,
            ..c
        };
        assert!(server_html::ledger(None, &unbooked).contains(
            "It has held 1,536.0 GPU-h, first run from 2026-11-10 00:00 UTC; Gantry books"
        ));
    }

    #[test]
    fn without_an_interruption_the_advice_is_a_bound_in_words() {
        let ck = |start_s: i64| crate::model::Checkpoint {
            job_id: 7,
            step: Some(1),
            path: String::new(),
            started_ms: start_s * 1000,
            duration_ms: 45_000,
            size_bytes: 1,
            complete: true,
        };
        let cps = [ck(0), ck(600), ck(1200)];
        let a = crate::reliability::advise(256, &cps, &[], None, 256_000.0);
        let h = server_html::advice(a);
        assert!(
            h.contains("at least 1000.0 h (no interruption in 256,000 GPU-hours"),
            "{h}"
        );
        assert!(
            h.contains("With no interruption to go by, the best interval is at least"),
            "{h}"
        );
        assert!(
            h.contains("saving that seldom or less would save at least"),
            "{h}"
        );
        assert!(!h.contains("No advice"), "{h}");
    }

    #[test]
    fn without_advice_the_section_says_what_it_needs() {
        let h = server_html::advice(None);
        assert!(
            h.contains("Checkpoint advice") && h.contains("No advice"),
            "{h}"
        );
    }
}
