//! `/jobs`: pending and running jobs as of the scheduler's last poll, why each pending job
//! waits (one category, the evidence in words, Slurm's start estimate), filtered by that
//! category in the URL (`/jobs?wait=resources`, a GET form that works without
//! JavaScript), with requeue for operators; running jobs holding GPUs idle above the table;
//! the job history below.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::order::jobs_href;
use super::{
    cannot_act, hydrated_marker, page_in, refresher, ActionPanel, Pager, Pending, PollStatus,
    WithView,
};
use crate::actions::{ActionKind, ActionTargets};
use crate::model::JobState;
use crate::queue::{Cycles, HealthView, Wait, WaitKind};
use crate::units;
use crate::views::{JobRow, ListQuery, NodesView};

#[component]
pub fn JobsPage() -> impl IntoView {
    let q = use_query_map();
    let query = Memo::new(move |_| {
        q.with(|q| ListQuery {
            jobs: true,
            wait: q.get("wait").unwrap_or_default(),
            page: page_in(q),
            ..Default::default()
        })
    });
    view! {
        <Title text="Jobs"/>
        <WithView query children=|state, stale| view! { <JobsBody state stale/> }.into_any()/>
        <Estimates/>
        <crate::pages::history::JobHistory/>
    }
}

/// How far Slurm's start estimates were from the starts, per partition, last seven days.
#[server(endpoint = "estimate_accuracy")]
pub async fn get_estimate_accuracy() -> Result<crate::queue::EstimatesView, ServerFnError> {
    crate::backend::backend()?
        .estimates()
        .await
        .map_err(ServerFnError::new)
}

#[component]
fn Estimates() -> impl IntoView {
    let data = Resource::new(|| (), |_| get_estimate_accuracy());
    let dur = |ms: i64| units::duration_ms(ms);
    view! {
        <h2 id="estimates-h">"How good Slurm's start estimates were"</h2>
        <Suspense fallback=|| view! { <p class="loading">"Loading the estimates…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) if v.partitions.is_empty() => view! {
                        <p class="muted" data-test="estimates-none">{format!("No job has started after waiting with an estimate since {}.", units::utc(v.since_ms))}</p>
                    }.into_any(),
                    Ok(v) => view! {
                        <table class="grid compact" aria-labelledby="estimates-h" data-test="estimates">
                            <caption class="sr-only">{format!("Jobs started since {}, by partition", units::utc(v.since_ms))}</caption>
                            <thead><tr>
                                <th scope="col">"Partition"</th><th scope="col" class="num">"Jobs"</th>
                                <th scope="col" class="num">"First estimate: median error"</th><th scope="col" class="num">"p90"</th>
                                <th scope="col" class="num">"Last estimate: median error"</th><th scope="col" class="num">"p90"</th>
                                <th scope="col" class="num">"Started later than first estimated"</th>
                            </tr></thead>
                            <tbody>
                                {v.partitions.into_iter().map(|p| view! {
                                    <tr data-test="estimate-row" data-partition=p.partition.clone()>
                                        <th scope="row">{p.partition.clone()}</th>
                                        <td class="num">{units::count(p.jobs)}</td>
                                        <td class="num">{dur(p.first_median_ms)}</td><td class="num">{dur(p.first_p90_ms)}</td>
                                        <td class="num">{dur(p.last_median_ms)}</td><td class="num">{dur(p.last_p90_ms)}</td>
                                        <td class="num">{units::count(p.late)}</td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot read the estimates: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// "Waiting for … Slurm estimates 14:20 UTC."
pub(crate) fn wait_sentence(w: &Wait) -> String {
    match w.est_start_ms {
        Some(t) => format!("{}. Slurm estimates {}.", w.words, units::utc(t)),
        None => format!("{}.", w.words),
    }
}

/// "last 23 µs, mean 198 µs, max 2,567 µs over 118 cycles".
fn cycles_words(c: &Cycles) -> String {
    let us = |v: Option<u64>| v.map_or("—".to_string(), |v| format!("{} µs", units::count(v)));
    let mut w = format!(
        "last {}, mean {}, max {}",
        us(c.last_us),
        us(c.mean_us),
        us(c.max_us)
    );
    if let Some(n) = c.count {
        w.push_str(&format!(" over {} cycles", units::count(n)));
    }
    w
}

/// The scheduler's health strip in words: its read's time, its two schedulers' cycles,
/// threads and agent queue, and Gantry's share of its RPCs.
#[derive(Clone, Debug, PartialEq)]
struct StripWords {
    as_of: String,
    stale: bool,
    main: String,
    backfill: String,
    threads: String,
    rpcs: String,
}

impl StripWords {
    fn of(h: &HealthView, stale: bool) -> StripWords {
        let s = &h.health;
        let gantry = match (&s.gantry_user, s.gantry_rpcs) {
            (Some(u), Some(n)) if s.rpcs_total > 0 => format!(
                "; user {u} (Gantry's) {} ({:.1}%)",
                units::count(n),
                100.0 * n as f64 / s.rpcs_total as f64
            ),
            _ => String::new(),
        };
        let since = s
            .since_ms
            .map(|t| format!(" since {}", units::utc(t)))
            .unwrap_or_default();
        let opt = |v: Option<u64>| v.map_or("—".to_string(), units::count);
        let n = |v: Option<u64>, one: &str| match v {
            Some(1) => format!("1 {one}"),
            Some(k) => format!("{} {one}s", units::count(k)),
            None => format!("— {one}s"),
        };
        let rpcs = if s.rpcs_by_type.is_empty() {
            "none reported".to_string()
        } else {
            format!(
                "{}{since}{gantry}; most: {}",
                units::count(s.rpcs_total),
                s.rpcs_by_type
                    .iter()
                    .take(3)
                    .map(|r| format!("{} {}", r.name, units::count(r.count)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        StripWords {
            as_of: format!(
                "as of {}{}",
                units::utc(h.polled_ms),
                if stale { " (stale)" } else { "" }
            ),
            stale,
            main: format!("Main scheduler: {}.", cycles_words(&s.main)),
            backfill: format!(
                "Backfill: {}; depth {}; {} started by backfill.",
                cycles_words(&s.backfill),
                opt(s.backfill.depth),
                n(s.backfilled_jobs, "job")
            ),
            threads: format!(
                "{}; agent queue {}; database agent queue {}.",
                n(s.server_threads, "server thread"),
                opt(s.agent_queue),
                opt(s.dbd_agent_queue)
            ),
            rpcs: format!("RPCs: {rpcs}."),
        }
    }
}

/// The scheduler's own health in one strip, drawn once: each refresh rewrites the words
/// that changed (drawn anew, the strip made the browser lay out the jobs table below it).
#[component]
fn SchedStrip(words: Memo<Option<StripWords>>) -> impl IntoView {
    let w = move |f: fn(&StripWords) -> String| {
        move || words.with(|w| w.as_ref().map(f).unwrap_or_default())
    };
    view! {
        <section class="card" aria-labelledby="sched-h" data-test="sched-health"
            class:stale=move || words.with(|w| w.as_ref().is_some_and(|w| w.stale))>
            <h2 id="sched-h">"Scheduler health "
                <span class="muted">{w(|w| w.as_of.clone())}</span>
            </h2>
            <p>
                <span data-test="sched-main">{w(|w| w.main.clone())}</span>" "
                <span data-test="sched-backfill">{w(|w| w.backfill.clone())}</span>" "
                <span data-test="sched-threads">{w(|w| w.threads.clone())}</span>" "
                <span data-test="sched-rpcs">{w(|w| w.rpcs.clone())}</span>
            </p>
        </section>
    }
}

#[component]
fn JobsBody(state: RwSignal<NodesView>, stale: Memo<bool>) -> impl IntoView {
    let pending: RwSignal<Option<Pending>> = RwSignal::new(None);
    let q = use_query_map();
    let wait_filter = move || q.with(|q| q.get("wait").and_then(|w| WaitKind::parse(&w)));
    let me = move || state.with(|v| v.me.clone());
    // How many pending jobs wait for each reason (over every job), for the filter's options.
    // A memo: a refresh that keeps them rebuilds no option.
    let counts = Memo::new(move |_| {
        state.with(|v| {
            v.wait_counts
                .iter()
                .map(|c| (c.kind, c.jobs))
                .collect::<Vec<_>>()
        })
    });
    let now = Memo::new(move |_| state.with(|v| v.at_ms));
    let why = Memo::new(move |_| cannot_act(&me()));
    // The server kept the jobs waiting for the filter's reason and cut the page.
    // Arranged again only when the rows' fingerprint changes, not at each refresh.
    let rows_hash = Memo::new(move |_| state.with(|v| v.rows_hash));
    let keyed = move || {
        // (Read, not only tracked: a memo never read never runs, and never changes.)
        let _ = rows_hash.get();
        state.with_untracked(|v| {
            v.jobs
                .iter()
                .map(|j| (super::order::fingerprint(j), j.clone()))
                .collect::<Vec<_>>()
        })
    };
    let page_href = Callback::new(move |p: u32| jobs_href(wait_filter(), p));
    // The scheduler's health in words, and whether there is any: the strip is drawn when
    // it appears, its words rewritten when they change.
    let strip = Memo::new(move |_| {
        state.with(|v| {
            v.health
                .as_ref()
                .map(|h| StripWords::of(h, h.stale_at(v.server_now_ms)))
        })
    });
    let shown = Memo::new(move |_| strip.with(Option::is_some));
    view! {
        <div class="page-head" data-test="jobs-page" data-hydrated=hydrated_marker()>
            <h1>"Jobs"</h1>
            <PollStatus state stale/>
        </div>
        {move || shown.get().then(|| view! { <SchedStrip words=strip/> })}
        <form method="get" action="/jobs" class="toolbar" aria-label="Filter pending jobs by what they wait for">
            <label for="j-wait">"Waiting for"</label>
            <select id="j-wait" name="wait" data-test="wait-filter">
                <option value="" selected=move || wait_filter().is_none()>"any (all jobs)"</option>
                {move || counts.get().into_iter().map(|(k, n)| view! {
                    <option value=k.as_str() selected=move || wait_filter() == Some(k)>
                        {format!("{} ({n})", k.label())}
                    </option>
                }).collect_view()}
            </select>
            <button type="submit">"Show"</button>
        </form>
        {move || pending.get().map(|p| view! { <ActionPanel p pending after=refresher(state)/> })}
        <IdleJobs state stale/>
        <Pager state noun="jobs" href=page_href/>
        <table class="grid" class:stale=move || stale.get() data-test="jobs-table">
            <caption class="sr-only">"Pending and running jobs"</caption>
            <thead><tr>
                <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th><th scope="col">"User"</th>
                <th scope="col">"State"</th><th scope="col" class="num">"GPUs"</th><th scope="col">"Nodes"</th>
                <th scope="col" class="num">"Running for"</th><th scope="col" class="num">"Time limit"</th>
                <th scope="col">"Why it waits"</th>
                <th scope="col" class="num">"Requeues"</th>
                <th scope="col">"Actions"</th>
            </tr></thead>
            // Keyed by id and content: a refresh touches only the rows that changed (and
            // each running job's age, a binding of its own).
            <tbody>
                <For each=keyed
                    key=|(f, j)| (j.id, *f)
                    children=move |(_, j): (u64, JobRow)| {
                        let running = j.state == JobState::Running;
                        let id = j.id;
                        let not_running = (!running).then_some("Only running jobs can be requeued");
                        let dis = move || why.get().or(not_running);
                        let wait_kind = j.wait.as_ref().map(|w| w.kind.as_str()).unwrap_or("");
                        let start = j.start_ms;
                        view! {
                            <tr data-test="job-row" data-job=j.id.to_string() data-state=j.state.label() data-wait=wait_kind>
                                <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                <td>{j.name.clone()}</td>
                                <td>{j.user.clone()}</td>
                                <td>{j.state.label()}{j.reason.clone().filter(|r| r != "None" && j.wait.is_none()).map(|r| format!(" ({r})"))}
                                    {j.idle.as_ref().map(|h| view! { " " <strong class="chip warn" data-test="job-idle">{format!("{} of {} GPUs idle", h.gpus, h.of)}</strong> })}</td>
                                <td class="num">{j.gpus}</td>
                                <td>{units::hostlist_short(&j.nodes)}</td>
                                // The age changes every minute: out of the table's flow in a box of
                                // its own size, so its text is laid out alone, not the whole table.
                                <td class="num age-cell"><span class="age">{move || start.map(|s| units::duration_ms(now.get() - s)).unwrap_or_else(|| "—".into())}</span></td>
                                <td class="num">{j.time_limit_ms.map(units::duration_ms).unwrap_or_else(|| "—".into())}</td>
                                <td data-test="job-wait">{j.wait.as_ref().map(|w| view! {
                                    <strong class="chip">{w.kind.label()}</strong>" "
                                    <span>{wait_sentence(w)}</span>
                                    " "<code class="muted" title="Slurm's reason">{w.reason.clone()}</code>
                                })}</td>
                                <td class="num" data-test="job-restarts">{j.restart_count}</td>
                                <td>
                                    <button type="button" data-test="job-requeue"
                                        disabled=move || dis().is_some() title=move || dis().unwrap_or("")
                                        on:click=move |_| pending.set(Some(Pending {
                                            kind: ActionKind::Requeue,
                                            label: format!("job {id}"),
                                            targets: ActionTargets { jobs: vec![id], ..Default::default() },
                                            reason: String::new(),
                                        }))>
                                        "Requeue…"
                                    </button>
                                </td>
                            </tr>
                        }
                    }/>
            </tbody>
        </table>
        <Pager state noun="jobs" href=page_href/>
    }
}

/// Running jobs holding GPUs idle past the hold (`alerts.idle_gpu_minutes`), longest first
/// (the server's first page of them); nothing when none does.
#[component]
fn IdleJobs(state: RwSignal<NodesView>, stale: Memo<bool>) -> impl IntoView {
    let idle = move || state.with(|v| (v.idle.clone(), v.idle_total));
    let now = move || state.with(|v| v.at_ms);
    move || {
        let (rows, all) = idle();
        (!rows.is_empty()).then(|| {
            let total: f64 = rows.iter().filter_map(|j| j.idle.as_ref()).map(|h| h.gpu_hours).sum();
            let t = now();
            let heading = if all as usize > rows.len() {
                format!(
                    "GPUs held idle: {all} jobs; the {} idle longest, {total:.1} GPU-hours so far",
                    rows.len()
                )
            } else {
                format!("GPUs held idle: {} jobs, {total:.1} GPU-hours so far", rows.len())
            };
            view! {
                <section aria-labelledby="idle-h" data-test="idle-jobs">
                    <h2 id="idle-h">{heading}</h2>
                    <p class="muted">"Allocated GPUs with SM activity under the threshold and no memory in use, without a break. Their owners are told through the site's Alertmanager (label owner)."</p>
                    <table class="grid" class:stale=move || stale.get() data-test="idle-table">
                        <caption class="sr-only">"Running jobs holding GPUs idle"</caption>
                        <thead><tr>
                            <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th><th scope="col">"User"</th>
                            <th scope="col" class="num">"Idle GPUs"</th><th scope="col" class="num">"Idle for"</th>
                            <th scope="col" class="num">"GPU-hours idle"</th>
                        </tr></thead>
                        <tbody>
                            {rows.into_iter().filter_map(|j| {
                                let h = j.idle.clone()?;
                                Some(view! {
                                    <tr data-test="idle-row" data-job=j.id.to_string()>
                                        <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                        <td>{j.name.clone()}</td>
                                        <td>{j.user.clone()}</td>
                                        <td class="num">{format!("{} of {}", h.gpus, h.of)}</td>
                                        <td class="num">{units::duration_ms(t - h.since_ms)}</td>
                                        <td class="num" data-test="idle-gpu-hours">{format!("{:.1}", h.gpu_hours)}</td>
                                    </tr>
                                })
                            }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }
        })
    }
}
