//! `/reliability` (operators, managers, admins): every job interruption of a period with
//! the cause its evidence names, by cause, by group, by GPU model and by node, and the
//! rates behind them. The question is in the URL (a plain GET form: works without
//! JavaScript); every table downloads as CSV.
//!
//! Like `/admin`, the answer needs no browser logic: its HTML is rendered by the server
//! (`body`, server builds only) and the browser takes it as it is, so the bundle carries
//! none of it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use super::reports::{error_words, query_of, ReportForm};
use crate::reports::ReportQuery;

#[server(endpoint = "reliability_view", input = server_fn::codec::Json)]
pub async fn get_reliability(q: ReportQuery) -> Result<String, ServerFnError> {
    if !crate::backend::me()
        .role
        .is_some_and(crate::actions::Role::can_review_reliability)
    {
        return Err(ServerFnError::new(
            "reliability needs an operator, manager or admin role",
        ));
    }
    let r = crate::backend::backend()?
        .reliability(&q)
        .await
        .map_err(ServerFnError::new)?;
    Ok(body::html(r))
}

#[component]
pub fn ReliabilityPage() -> impl IntoView {
    let q = use_query_map();
    let query = move || q.with(query_of);
    let data = Resource::new(query, |q| async move {
        match q {
            Ok(q) => get_reliability(q).await.map_err(error_words),
            Err(m) => Err(m),
        }
    });
    view! {
        <Title text="Reliability"/>
        <div class="page-head"><h1>"Reliability"</h1></div>
        {move || view! { <ReportForm q=query().unwrap_or_default() action="/reliability" label="Reliability question" button="Show"/> }}
        <Suspense fallback=|| view! { <p class="loading">"Attributing interruptions…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(h) => view! { <div inner_html=h></div> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show reliability: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The radar's open alerts as a list, each linking to its job.
#[cfg(feature = "ssr")]
pub fn radar_list(alerts: &[crate::views::AlertItem]) -> impl IntoView {
    view! {
        <ul class="radar-list">
            {alerts.iter().map(|a| view! {
                <li data-rule=a.rule.clone()>
                    <span class=format!("badge sev-{}", a.severity)>{if a.rule == "job_hung" { "Hung" } else { "Straggler" }}</span>
                    " "<a href=a.link.clone()>{a.summary.clone()}</a>
                    {format!(" (since {})", crate::units::utc(a.started_ms))}
                </li>
            }).collect_view()}
        </ul>
    }
}

/// The answer's HTML (server builds only).
#[cfg(feature = "ssr")]
mod body {
    use leptos::prelude::*;

    use super::radar_list;
    use crate::reliability::{
        Badput, Cause, GroupCauses, Ledger, LedgerRow, LemonWeights, Reliability, LEMON_RMA_AT,
        LEMON_RMA_CLEAR, LEMON_WINDOW_DAYS,
    };
    use crate::reports::ReportChart;
    use crate::units;

    /// The page's sections, in order: (heading id, name), for its table of contents.
    pub const SECTIONS: [(&str, &str); 7] = [
        ("ledger-h", "Effective training time"),
        ("causes-h", "Interruptions by cause"),
        ("rates-h", "Rates"),
        ("radar-h", "Stragglers and hangs now"),
        ("lemons-h", "Lemon nodes"),
        ("groups-h", "Where"),
        ("list-h", "Interruptions"),
    ];

    pub fn html(r: Reliability) -> String {
        view! { <Body r/> }.to_html()
    }

    fn hours(h: Option<f64>) -> String {
        match h {
            Some(h) if h.is_finite() => format!("{h:.1} h"),
            _ => units::MISSING.into(),
        }
    }

    /// A download link for one table.
    fn csv_link(qs: &str, table: &'static str, what: &'static str) -> impl IntoView {
        let href = format!("/api/reliability?{qs}&format=csv&table={table}");
        view! { <a class="csv" href=href download="">{format!("CSV of {what}")}</a> }
    }

    /// A "by something" table: the group, its total and one column per cause.
    fn causes_table(
        caption: String,
        head: &'static str,
        rows: Vec<GroupCauses>,
        test: &'static str,
    ) -> impl IntoView {
        let label = caption.clone();
        view! {
            <div class="table-wrap" tabindex="0" role="region" aria-label=label>
                <table class="grid report" data-test=test>
                    <caption>{caption}</caption>
                    <thead><tr>
                        <th scope="col">{head}</th>
                        <th scope="col" class="num">"Total"</th>
                        {Cause::ALL.into_iter().map(|c| view! { <th scope="col" class="num">{c.label()}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {rows.into_iter().map(|g| view! {
                            <tr>
                                <th scope="row">{g.group}</th>
                                <td class="num">{g.total}</td>
                                {g.counts.into_iter().map(|n| view! { <td class="num">{n}</td> }).collect_view()}
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        }
    }

    fn gpu_hours(v: f64) -> String {
        format!("{v:.1}")
    }

    /// Rows of the ledger: ETTR, allocated and each bucket's GPU-hours.
    fn ledger_table(
        caption: String,
        head: &'static str,
        rows: Vec<LedgerRow>,
        link: bool,
        test: &'static str,
    ) -> impl IntoView {
        view! {
            <div class="table-wrap" tabindex="0" role="region" aria-label=caption.clone()>
                <table class="grid report" data-test=test>
                    <caption>{caption.clone()}</caption>
                    <thead><tr>
                        <th scope="col">{head}</th>
                        <th scope="col" class="num">"ETTR"</th>
                        <th scope="col" class="num">"Allocated GPU-h"</th>
                        {Badput::default().buckets().into_iter().map(|(n, _)| view! { <th scope="col" class="num">{n}</th> }).collect_view()}
                    </tr></thead>
                    <tbody>
                        {rows.into_iter().map(|r| {
                            let label = if r.name.is_empty() { r.key.clone() } else { format!("{} {}", r.key, r.name) };
                            let head = if link {
                                view! { <th scope="row"><a href=format!("/jobs/{}", r.key)>{label}</a></th> }.into_any()
                            } else {
                                view! { <th scope="row">{label}</th> }.into_any()
                            };
                            view! {
                                <tr>
                                    {head}
                                    <td class="num">{units::percent(r.badput.ettr())}</td>
                                    <td class="num">{gpu_hours(r.badput.allocated_gh)}</td>
                                    {r.badput.buckets().into_iter().map(|(_, v)| view! { <td class="num">{gpu_hours(v)}</td> }).collect_view()}
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        }
    }

    fn ledger_section(l: Ledger, charts: Vec<ReportChart>, qs: String) -> impl IntoView {
        let c = l.cluster;
        let wall = c.allocated_gh + c.restart_wait_gh;
        // Inline, so their text and axes take the page's colour (dark on screen, light in
        // print); each with its downloads.
        let chart = |name: &'static str, alt: String| {
            let svg_href = format!("/api/reliability/charts/{name}.svg?{qs}");
            let png = format!("/api/reliability/charts/{name}.png?{qs}");
            let drawn = charts
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.svg.clone());
            view! {
                <figure class="chart" data-test=format!("chart-{name}")>
                    {match drawn {
                        Some(svg) => view! { <div role="img" aria-label=alt inner_html=svg></div> }.into_any(),
                        None => view! { <p class="error">"This chart could not be drawn; its table below has every value."</p> }.into_any(),
                    }}
                    <figcaption>
                        <a class="no-print" href=svg_href download="">"SVG"</a>" "
                        <a class="no-print" href=png download="">"PNG"</a>
                    </figcaption>
                </figure>
            }
        };
        let step = l.step.clone();
        let jobs_caption = format!(
            "The {} most allocated of {} jobs (the CSV has all)",
            l.jobs.len(),
            l.jobs_total
        );
        view! {
            <section aria-labelledby="ledger-h" data-test="ledger">
                <h2 id="ledger-h">"Effective training time"</h2>
                <p data-test="ettr">{format!(
                    "ETTR {}: {:.1} productive GPU-hours of {:.1} allocated plus {:.1} waiting to restart.",
                    units::percent(c.ettr()),
                    c.productive_gh,
                    c.allocated_gh,
                    c.restart_wait_gh
                )}</p>
                <p class="definitions" data-test="ettr-goodput">
                    "ETTR and goodput: both start from the GPU-hours jobs held. Goodput (on "<a href="/reports">"Reports"</a>
                    ") is those GPU-hours less what was idle, throttled or lost to failures (the work since the last checkpoint): how much of what was paid for trained. "
                    "ETTR is stricter: it also takes out start-up, blocking checkpoint saves, hung time and time with no reading, and counts the time jobs waited to restart against them, "
                    "so a period's ETTR is at most its goodput share: how much of a run's wall time moved training forward."
                </p>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Where the allocated GPU time went">
                    <table class="grid report" data-test="ledger-buckets">
                        <caption>"Where the allocated GPU time went"</caption>
                        <thead><tr>
                            <th scope="col">"Bucket"</th>
                            <th scope="col" class="num">"GPU-hours"</th>
                            <th scope="col" class="num">"Share"</th>
                        </tr></thead>
                        <tbody>
                            {c.buckets().into_iter().map(|(n, v)| view! {
                                <tr>
                                    <th scope="row">{n}</th>
                                    <td class="num">{gpu_hours(v)}</td>
                                    <td class="num">{units::percent((wall > 0.0).then(|| v / wall))}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                <div class="report-charts">
                    {chart("ettr", format!("ETTR per {step}: the table below gives each value"))}
                    {chart("ledger", format!("GPU time by bucket per {step}, stacked: the table below gives each value"))}
                </div>
                {ledger_table(format!("Per {step}"), "From", l.over_time, false, "ledger-over-time")}
                {csv_link(&qs, "ledger", "the ledger over time")}
                {ledger_table("Per account".into(), "Account", l.accounts, false, "ledger-accounts")}
                {csv_link(&qs, "ledger_accounts", "the ledger per account")}
                {ledger_table(jobs_caption, "Job", l.jobs, true, "ledger-jobs")}
                {csv_link(&qs, "ledger_jobs", "the ledger per job")}
            </section>
        }
    }

    #[component]
    fn Body(r: Reliability) -> impl IntoView {
        let qs = r.query.to_query();
        let so_far = r.to_ms > r.now_ms;
        let when = format!(
            "{} to {} (UTC){}",
            units::date(r.from_ms),
            units::date(r.to_ms - 1),
            if so_far { ", so far" } else { "" }
        );
        let group_label = r.query.group.label();
        let nodes: Vec<GroupCauses> = r.by_node.iter().take(25).cloned().collect();
        let listed = r.interruptions.len().min(100);
        view! {
            <p class="report-when" data-test="reliability-when">
                {format!("{} interruptions, {} of them unexpected (hardware and platform): {when}", r.total, r.unexpected)}
            </p>
            <p class="coverage" data-test="reliability-coverage" class:partial=r.coverage.share().is_some_and(|s| s < 0.99)>
                {r.coverage.words(so_far)}
            </p>
            <nav class="toc no-print" aria-label="On this page" data-test="toc">
                <ul>
                    {SECTIONS.into_iter().map(|(id, name)| view! { <li><a href=format!("#{id}")>{name}</a></li> }).collect_view()}
                </ul>
            </nav>
            {ledger_section(r.ledger.clone(), r.charts.clone(), qs.clone())}
            <section aria-labelledby="causes-h">
                <h2 id="causes-h">"Interruptions by cause"</h2>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Interruptions by cause">
                    <table class="grid report" data-test="by-cause">
                        <thead><tr>
                            <th scope="col">"Cause"</th>
                            <th scope="col" class="num">"Interruptions"</th>
                            <th scope="col" class="num">"Share"</th>
                        </tr></thead>
                        <tbody>
                            {r.by_cause.iter().map(|c| view! {
                                <tr data-cause=c.cause.as_str()>
                                    <th scope="row">{c.cause.label()}</th>
                                    <td class="num">{c.count}</td>
                                    <td class="num">{units::percent(Some(c.share))}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                {csv_link(&qs, "causes", "causes")}
            </section>
            <section aria-labelledby="rates-h">
                <h2 id="rates-h">"Rates"</h2>
                <p data-test="mtbi-1000">{format!(
                    "Mean time between interruptions of a 1,000-GPU job: {} ({} GPU-hours of runs in the period).",
                    hours(r.mtbi_hours_per_1000_gpus),
                    units::thousands(r.run_gpu_hours.max(0.0).round() as u64)
                )}</p>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Rates by job size">
                    <table class="grid report" data-test="by-size">
                        <caption>"By job size"</caption>
                        <thead><tr>
                            <th scope="col">"GPUs"</th>
                            <th scope="col" class="num">"Runs"</th>
                            <th scope="col" class="num">"Run hours"</th>
                            <th scope="col" class="num">"Interruptions"</th>
                            <th scope="col" class="num">"MTBI"</th>
                        </tr></thead>
                        <tbody>
                            {r.by_size.iter().map(|s| view! {
                                <tr>
                                    <th scope="row">{if s.gpus_to == u32::MAX { format!("{}+", s.gpus_from) } else { format!("{}–{}", s.gpus_from, s.gpus_to) }}</th>
                                    <td class="num">{s.runs}</td>
                                    <td class="num">{format!("{:.1}", s.run_hours)}</td>
                                    <td class="num">{s.interruptions}</td>
                                    <td class="num">{hours(s.mtbi_hours)}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                {csv_link(&qs, "sizes", "rates by size")}
                <div class="table-wrap" tabindex="0" role="region" aria-label="Time out of service per node">
                    <table class="grid report" data-test="repairs">
                        <caption>"Time out of service per node (MTTR: mean time to repair)"</caption>
                        <thead><tr>
                            <th scope="col">"Node"</th>
                            <th scope="col" class="num">"Repairs"</th>
                            <th scope="col" class="num">"Out of service"</th>
                            <th scope="col" class="num">"MTTR"</th>
                        </tr></thead>
                        <tbody>
                            {r.repairs.iter().take(25).map(|n| view! {
                                <tr>
                                    <th scope="row"><a href=units::node_href(&n.node)>{n.node.clone()}</a></th>
                                    <td class="num">{n.repairs}</td>
                                    <td class="num">{hours(Some(n.out_of_service_hours))}</td>
                                    <td class="num">{hours(n.mttr_hours)}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                {csv_link(&qs, "repairs", "repairs")}
            </section>
            <section aria-labelledby="radar-h" data-test="radar">
                <h2 id="radar-h">"Stragglers and hangs now"</h2>
                {if r.radar.is_empty() {
                    view! { <p class="muted">"None: no multi-node job has a GPU behind its peers or looks hung."</p> }.into_any()
                } else {
                    radar_list(&r.radar).into_any()
                }}
            </section>
            <section aria-labelledby="lemons-h">
                <h2 id="lemons-h">"Lemon nodes"</h2>
                <p class="muted">{format!(
                    "Score: {} per job taken down, {} per hardware XID, {} per ECC or InfiniBand counter step, {} per outage, {} per day out of service. Marked for RMA or deep diagnostics when the last {} days reach {}, until they fall below {}.",
                    LemonWeights::JOB_TAKEN_DOWN, LemonWeights::HARDWARE_XID, LemonWeights::COUNTER_STEP,
                    LemonWeights::OUTAGE, LemonWeights::DAY_OUT, LEMON_WINDOW_DAYS, LEMON_RMA_AT, LEMON_RMA_CLEAR
                )}</p>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Lemon nodes">
                    <table class="grid report" data-test="lemons">
                        <thead><tr>
                            <th scope="col">"Node"</th>
                            <th scope="col">"Rack"</th>
                            <th scope="col" class="num">"Score"</th>
                            <th scope="col" class="num">{format!("Last {LEMON_WINDOW_DAYS} days")}</th>
                            <th scope="col">"Mark"</th>
                            <th scope="col">"Evidence"</th>
                        </tr></thead>
                        <tbody>
                            {r.lemons.iter().take(25).map(|l| view! {
                                <tr data-node=l.node.clone() data-rma=l.rma.to_string()>
                                    <th scope="row"><a href=units::node_href(&l.node)>{l.node.clone()}</a></th>
                                    <td>{l.rack.clone().unwrap_or_else(|| units::MISSING.into())}</td>
                                    <td class="num">{format!("{:.1}", l.score)}</td>
                                    <td class="num">{format!("{:.1}", l.recent_score)}</td>
                                    <td>{if l.rma {
                                        view! { <span class="badge sev-critical">"RMA / deep diagnostics"</span> }.into_any()
                                    } else {
                                        view! { <span class="muted">"watch"</span> }.into_any()
                                    }}</td>
                                    <td>{l.evidence.clone()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                {csv_link(&qs, "lemons", "lemon scores")}
            </section>
            <section aria-labelledby="groups-h">
                <h2 id="groups-h">"Where"</h2>
                {causes_table(format!("By {}", group_label.to_ascii_lowercase()), group_label, r.by_group.clone(), "by-group")}
                {csv_link(&qs, "groups", "the grouping")}
                {causes_table("By GPU model".into(), "GPU model", r.by_gpu_model.clone(), "by-model")}
                {csv_link(&qs, "models", "GPU models")}
                {causes_table("By node the evidence points at (most first)".into(), "Node", nodes, "by-node")}
                {csv_link(&qs, "nodes", "nodes")}
            </section>
            <section aria-labelledby="list-h">
                <h2 id="list-h">"Interruptions"</h2>
                <p class="muted">{format!("The newest {listed} of {}; the CSV has every one.", r.total)}</p>
                <div class="table-wrap" tabindex="0" role="region" aria-label="Interruptions, newest first">
                    <table class="grid report" data-test="interruptions">
                        <thead><tr>
                            <th scope="col">"Ended (UTC)"</th>
                            <th scope="col">"Job"</th>
                            <th scope="col" class="num">"GPUs"</th>
                            <th scope="col">"State"</th>
                            <th scope="col">"Cause"</th>
                            <th scope="col">"Evidence"</th>
                        </tr></thead>
                        <tbody>
                            {r.interruptions.iter().take(listed).map(|i| view! {
                                <tr data-job=i.job_id.to_string() data-cause=i.cause.as_str()>
                                    <td>{units::utc(i.at_ms)}</td>
                                    <td><a href=format!("/jobs/{}", i.job_id)>{format!("{} {}", i.job_id, i.job_name)}</a></td>
                                    <td class="num">{i.gpus}</td>
                                    <td>{i.state.clone()}</td>
                                    <td>{i.cause.label()}</td>
                                    <td>{i.evidence.clone()}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                {csv_link(&qs, "interruptions", "every interruption")}
            </section>
        }
    }
}
