//! `/reports` (manager or admin): GPU-hours by state, energy, goodput and cost for a period,
//! grouped by account, partition, user, rack or switch domain. The question is in the URL
//! (a plain GET form, so it works without JavaScript and links share a report); the charts
//! are drawn on the server and inlined as SVG, with PNG and SVG downloads; every table
//! downloads as CSV; the page prints in light mode.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::reports::{GroupBy, Period, Report, ReportQuery, ReportRow, UNALLOCATED};
use crate::units;

#[server(endpoint = "report", input = server_fn::codec::Json)]
pub async fn get_report(q: ReportQuery) -> Result<Report, ServerFnError> {
    // The guard already requires a manager or admin for this path; a second look costs
    // nothing and keeps the rule next to the data.
    if !crate::backend::me()
        .role
        .is_some_and(crate::actions::Role::can_report)
    {
        return Err(ServerFnError::new("reports need a manager or admin role"));
    }
    crate::backend::backend()?
        .report(&q)
        .await
        .map_err(ServerFnError::new)
}

/// GPU-hours, whole, with thousands separators.
fn gh(x: f64) -> String {
    if !x.is_finite() {
        return units::MISSING.into();
    }
    units::thousands(x.max(0.0).round() as u64)
}

/// Energy: kWh under 1 MWh, else MWh with one decimal.
fn energy(kwh: f64) -> String {
    if kwh < 1000.0 {
        format!("{} kWh", units::thousands(kwh.max(0.0).round() as u64))
    } else {
        let tenths = (kwh / 100.0).round() as u64;
        format!("{}.{} MWh", units::thousands(tenths / 10), tenths % 10)
    }
}

/// Money in the configured currency: whole units, or cents under 100.
pub fn money(x: f64, currency: &str) -> String {
    if !x.is_finite() {
        return units::MISSING.into();
    }
    if x.abs() < 100.0 {
        format!("{currency} {x:.2}")
    } else {
        format!("{currency} {}", units::thousands(x.round().max(0.0) as u64))
    }
}

fn pct(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        units::percent(Some(part / whole))
    } else {
        units::MISSING.into()
    }
}

#[component]
pub fn ReportsPage() -> impl IntoView {
    let q = use_query_map();
    let query = move || q.with(query_of);
    let data = Resource::new(query, |q| async move {
        match q {
            Ok(q) => get_report(q).await.map_err(error_words),
            Err(m) => Err(m),
        }
    });
    view! {
        <Title text="Reports"/>
        <div class="page-head"><h1>"Reports"</h1></div>
        {move || view! { <ReportForm q=query().unwrap_or_default() action="/reports" label="Report" button="Show report"/> }}
        <Suspense fallback=|| view! { <p class="loading">"Computing the report…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(r) => view! { <ReportBody r/> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show this report: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// A page's question (period, its day or dates, grouping) from its URL.
pub fn query_of(m: &leptos_router::params::ParamsMap) -> Result<ReportQuery, String> {
    let pairs: Vec<(String, String)> = ["period", "group", "at", "from", "to"]
        .into_iter()
        .filter_map(|k| m.get(k).map(|v| (k.to_string(), v)))
        .collect();
    ReportQuery::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// A server function's refusal in the server's words.
pub fn error_words(e: ServerFnError) -> String {
    match e {
        ServerFnError::ServerError(m) => m,
        other => other.to_string(),
    }
}

/// The question, as a GET form to `action`: period, its day or dates, and the grouping.
#[component]
pub fn ReportForm(
    q: ReportQuery,
    action: &'static str,
    label: &'static str,
    button: &'static str,
) -> impl IntoView {
    view! {
        <form method="get" action=action class="toolbar report-form no-print" aria-label=label>
            <label>"Period "
                <select name="period">
                    {Period::ALL.into_iter().map(|p| {
                        let sel = p == q.period;
                        view! { <option value=p.as_str() selected=sel>{p.label()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label>"Day "
                <input type="date" name="at" value=q.at.clone().unwrap_or_default() aria-describedby="report-form-help"/>
            </label>
            <label>"From "
                <input type="date" name="from" value=q.from.clone().unwrap_or_default()/>
            </label>
            <label>"To "
                <input type="date" name="to" value=q.to.clone().unwrap_or_default()/>
            </label>
            <label>"Group by "
                <select name="group">
                    {GroupBy::ALL.into_iter().map(|g| {
                        let sel = g == q.group;
                        view! { <option value=g.as_str() selected=sel>{g.label()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <button type="submit">{button}</button>
            <p id="report-form-help" class="muted help">
                "Day: the day itself, the week that ends with it, or its month (today when empty). From and To: a custom period, both days included. All days are UTC."
            </p>
        </form>
    }
}

#[component]
fn ReportBody(r: Report) -> impl IntoView {
    let cur = r.rates.currency.clone();
    let qs = r.query.to_query();
    let t = &r.total;
    let so_far = r.to_ms > r.now_ms;
    let when = format!(
        "{} to {} (UTC){}",
        units::date(r.from_ms),
        units::date(r.to_ms - 1),
        if so_far { ", so far" } else { "" }
    );
    let rates = &r.rates;
    let rates_text = format!(
        "GPU {} amortized over {} years; power {}/kWh × PUE {}; rack overhead {} a month; cloud {} per GPU-hour; allocated GPUs under {} SM activity count as idle.",
        money(rates.gpu_capex, &cur),
        rates.amortization_years,
        money(rates.power_price_per_kwh, &cur),
        rates.pue,
        money(rates.rack_overhead_per_month, &cur),
        money(rates.cloud_gpu_hour, &cur),
        units::percent(Some(rates.idle_below_sm)),
    );
    let group = r.query.group;
    let rows = r.rows.clone();
    let unalloc = r.unallocated.clone();
    let total = r.total.clone();
    let cur2 = cur.clone();
    view! {
        <p class="report-when" data-test="report-when">
            {format!("{}, by {}: {when}", r.query.period.label(), group.label().to_ascii_lowercase())}
        </p>
        <p class="coverage" data-test="report-coverage" class:partial=r.coverage.share().is_some_and(|s| s < 0.99)>
            {r.coverage.words(so_far)}
        </p>
        <section class="report-cards" aria-label="Totals">
            <div class="card"><h2>"GPU-hours"</h2>
                <p class="big" data-test="total-capacity">{gh(t.usage.capacity_gh)}</p>
                <p class="muted">{format!("{} allocated ({})", gh(t.usage.allocated_gh), pct(t.usage.allocated_gh, t.usage.capacity_gh))}</p>
                {before(&r, |u| u.usage.allocated_gh, t.usage.allocated_gh, |v| format!("{} allocated", gh(v)))}
            </div>
            <div class="card"><h2>"Goodput"</h2>
                <p class="big" data-test="total-goodput">{gh(t.usage.goodput_gh)}</p>
                <p class="muted">{format!("{} of allocated", pct(t.usage.goodput_gh, t.usage.allocated_gh))}</p>
                {before(&r, |u| u.usage.goodput_gh, t.usage.goodput_gh, gh)}
                <p class="muted" data-test="total-held-idle">{format!("{} GPU-hours held idle past the alert's hold (jobs with GPUs unused)", gh(t.usage.held_idle_gh))}</p>
            </div>
            <div class="card"><h2>"Energy"</h2>
                <p class="big" data-test="total-energy">{energy(t.usage.energy_kwh)}</p>
                <p class="muted" data-test="total-gpu-energy">{format!(
                    "GPUs {}{}; the rest is the nodes' own{}",
                    energy(t.usage.gpu_energy_kwh),
                    if t.usage.energy_estimated_kwh > 0.0 { format!(" ({} estimated from power)", energy(t.usage.energy_estimated_kwh)) } else { String::new() },
                    t.cost.co2_kg.map(|c| if c < 1000.0 { format!("; {c:.0} kg CO2 with cooling") } else { format!("; {:.1} t CO2 with cooling", c / 1000.0) }).unwrap_or_default()
                )}</p>
                {before(&r, |u| u.usage.energy_kwh, t.usage.energy_kwh, energy)}
            </div>
            <div class="card"><h2>"Cost"</h2>
                <p class="big" data-test="total-cost">{money(t.cost.total, &cur)}</p>
                <p class="muted">{format!(
                    "{} per goodput GPU-hour; the same GPU-hours rented: {}",
                    t.cost.per_goodput_gh.map(|c| money(c, &cur)).unwrap_or_else(|| units::MISSING.into()),
                    money(t.cost.cloud_same_hours, &cur)
                )}</p>
                <p class="muted" data-test="cost-sides">{format!(
                    "Owned: all {} GPU-hours, allocated or not, with power and racks; rented: the {} jobs held.",
                    gh(t.usage.capacity_gh), gh(t.usage.allocated_gh)
                )}</p>
                {before(&r, |u| u.cost.total, t.cost.total, |v| money(v, &cur))}
            </div>
        </section>
        <p class="muted rates" data-test="rates">{format!("Rates ({cur}): {rates_text}")}</p>
        <section class="report-charts" aria-label="Charts">
            {r.charts.iter().map(|c| {
                let svg_href = format!("/api/reports/charts/{}.svg?{qs}", c.name);
                let png_href = format!("/api/reports/charts/{}.png?{qs}", c.name);
                view! {
                    <figure class="chart" data-test=format!("chart-{}", c.name)>
                        <div inner_html=c.svg.clone()></div>
                        <figcaption>{c.title.clone()}" "
                            <a class="no-print" href=svg_href download="">"SVG"</a>" "
                            <a class="no-print" href=png_href download="">"PNG"</a>
                        </figcaption>
                    </figure>
                }
            }).collect_view()}
        </section>
        <section aria-labelledby="report-table">
            <div class="page-head">
                <h2 id="report-table">{format!("By {}", group.label().to_ascii_lowercase())}</h2>
                <a class="chip no-print" href=format!("/api/reports?{qs}&format=csv") download="">"Download CSV"</a>
            </div>
            // It scrolls sideways on a narrow screen: keyboard users reach it too.
            <div class="table-wrap" tabindex="0" role="region" aria-labelledby="report-table">
            <table class="grid report" data-test="report-table">
                <caption class="sr-only">{format!("GPU-hours, energy and cost by {}, {when}", group.label().to_ascii_lowercase())}</caption>
                <thead><tr>
                    <th scope="col">{group.label()}</th>
                    <th scope="col" class="num">"GPU-h"</th>
                    <th scope="col" class="num">"Allocated"</th>
                    <th scope="col" class="num">"Busy"</th>
                    <th scope="col" class="num">"Idle"</th>
                    <th scope="col" class="num">"Drained / down"</th>
                    <th scope="col" class="num">"Lost: throttling"</th>
                    <th scope="col" class="num">"Lost: failures"</th>
                    <th scope="col" class="num">"Goodput"</th>
                    <th scope="col" class="num">"Energy"</th>
                    <th scope="col" class="num">{format!("Cost ({cur})")}</th>
                    <th scope="col" class="num">"of it wasted"</th>
                    <th scope="col" class="num">"per goodput GPU-h"</th>
                    <th scope="col" class="num">"Cloud, same GPU-h"</th>
                </tr></thead>
                <tbody>
                    {rows.into_iter().map(|row| view! { <Row row cur=cur2.clone()/> }).collect_view()}
                    {unalloc.map(|row| view! { <Row row cur=cur2.clone()/> })}
                </tbody>
                <tfoot>
                    <Row row=ReportRow { key: "Total".into(), ..total } cur=cur2.clone()/>
                </tfoot>
            </table>
            </div>
            {(group == GroupBy::Domain).then(|| view! {
                <p class="muted">"A node belongs to several switch domains (NVLink domain, leaf, block), so these rows overlap and do not add up to the total."</p>
            })}
        </section>
        <details class="definitions">
            <summary>"How these numbers are made"</summary>
            <ul>
                <li>"GPU-h: every GPU's hours for racks and domains; for accounts, partitions and users, the hours their jobs held; "{UNALLOCATED}" holds the rest (free, drained, down)."</li>
                <li>"Idle: allocated GPUs whose SM activity was measured under the threshold. Throttling: each busy throttled GPU's clock deficit over the time. Failures: a failed, timed-out or requeued job loses its GPUs times the time since its last complete checkpoint, counted in the hour it failed."</li>
                <li>"Goodput = allocated − idle − throttling − failures. ETTR on "<a href="/reliability">"Reliability"</a>" is stricter: it also takes out start-up, checkpoint saves and hung time, and counts restart waits against them."</li>
                <li>"Owned against rented: the owned cost covers every GPU of the cluster for all the time with data, allocated or not (capital amortized, power with cooling, rack overhead); the rented figure is only the GPU-hours jobs held, at the cloud's rate, which includes its power. The same time before compares the period so far with as much of the period before."</li>
                <li>"Energy: node power (BMC, else the sum of its GPUs). Cost = capital amortized per GPU-hour + energy × price × PUE + rack overhead shared by the rack's GPUs. Wasted: idle, throttling and failures at the group's cost per GPU-hour."</li>
                <li>{format!("Computed from hourly rollups in {:.0} ms. To save as PDF, print this page: it prints in light mode without the controls.", r.server_ms)}</li>
            </ul>
        </details>
    }
}

/// A card's line comparing with the same stretch of the period before: its value and the
/// change, or that the period before has no data.
fn before(
    r: &Report,
    of: fn(&ReportRow) -> f64,
    now: f64,
    show: impl Fn(f64) -> String,
) -> AnyView {
    let (words, title) = match &r.previous {
        Some(p) if of(p) > 0.0 => {
            let then = of(p);
            let change = (now - then) / then;
            (
                format!(
                    "{} ({}{})",
                    show(then),
                    if change >= 0.0 { "+" } else { "−" },
                    units::percent(Some(change.abs()))
                ),
                p.key.clone(),
            )
        }
        Some(p) => ("none".into(), p.key.clone()),
        None => ("no data".into(), String::new()),
    };
    view! { <p class="muted before" data-test="before" title=title>{format!("The same time before: {words}")}</p> }
        .into_any()
}

#[component]
fn Row(row: ReportRow, cur: String) -> impl IntoView {
    let u = row.usage;
    let c = row.cost;
    let wasted = c.idle + c.throttle + c.failures;
    view! {
        <tr data-key=row.key.clone()>
            <th scope="row">{row.key.clone()}</th>
            <td class="num">{gh(u.capacity_gh)}</td>
            <td class="num" data-test="allocated">{gh(u.allocated_gh)}</td>
            <td class="num">{gh(u.busy_gh)}</td>
            <td class="num">{gh(u.idle_gh)}</td>
            <td class="num">{gh(u.drained_gh + u.down_gh)}</td>
            <td class="num">{gh(u.throttle_lost_gh)}</td>
            <td class="num">{gh(u.failure_lost_gh)}</td>
            <td class="num" data-test="goodput">{gh(u.goodput_gh)}</td>
            <td class="num">{energy(u.energy_kwh)}</td>
            <td class="num" data-test="cost">{money(c.total, &cur)}</td>
            <td class="num">{money(wasted, &cur)}</td>
            <td class="num">{c.per_goodput_gh.map(|v| money(v, &cur)).unwrap_or_else(|| units::MISSING.into())}</td>
            <td class="num">{money(c.cloud_same_hours, &cur)}</td>
        </tr>
    }
}
