//! The job history under `/jobs`: every job Gantry has seen, filtered by state, user,
//! account, partition, size and submit time, a page at a time. A plain GET form, so the URL
//! carries the filters and the list works without JavaScript.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::model::Job;
use crate::units;
use crate::views::JobFilter;

const PER_PAGE: u32 = 50;

#[server(endpoint = "job_history", input = server_fn::codec::Json)]
pub async fn get_job_history(filter: JobFilter) -> Result<(Vec<Job>, u64), ServerFnError> {
    crate::backend::backend()?
        .job_history(&filter)
        .await
        .map_err(ServerFnError::new)
}

use crate::nav::encode_component as enc;

#[component]
pub fn JobHistory() -> impl IntoView {
    let q = use_query_map();
    let val = move |k: &'static str| q.with(|q| q.get(k).filter(|v| !v.is_empty()));
    let filter = move || JobFilter {
        state: val("state"),
        user: val("user"),
        account: val("account"),
        partition: val("partition"),
        min_gpus: val("min_gpus").and_then(|v| v.parse().ok()),
        since_ms: None,
        page: val("page").and_then(|v| v.parse().ok()).unwrap_or(0),
        per_page: PER_PAGE,
    };
    let data = Resource::new(filter, get_job_history);
    let link_for = move |page: u32| {
        let f = filter();
        let mut s = format!("/jobs?page={page}");
        for (k, v) in [
            ("state", f.state),
            ("user", f.user),
            ("account", f.account),
            ("partition", f.partition),
        ] {
            if let Some(v) = v {
                s.push_str(&format!("&{k}={}", enc(&v)));
            }
        }
        if let Some(g) = f.min_gpus {
            s.push_str(&format!("&min_gpus={g}"));
        }
        s
    };
    let text = move |k: &'static str| val(k).unwrap_or_default();
    view! {
        <h2 id="history-h">"History"</h2>
        <form method="get" action="/jobs" class="toolbar" aria-label="Filter the job history">
            <label for="h-state">"State"</label>
            <select id="h-state" name="state">
                <option value="">"any"</option>
                {["pending", "running", "requeued", "completed", "failed", "cancelled", "timeout", "node_fail"].into_iter().map(|s| view! {
                    <option value=s selected=move || text("state") == s>{s}</option>
                }).collect_view()}
            </select>
            <label for="h-user">"User"</label><input id="h-user" name="user" type="text" value=move || text("user")/>
            <label for="h-account">"Account"</label><input id="h-account" name="account" type="text" value=move || text("account")/>
            <label for="h-partition">"Partition"</label><input id="h-partition" name="partition" type="text" value=move || text("partition")/>
            <label for="h-gpus">"GPUs at least"</label><input id="h-gpus" name="min_gpus" type="number" min="0" value=move || text("min_gpus")/>
            <button type="submit">"Filter"</button>
        </form>
        <Suspense fallback=|| view! { <p class="loading">"Loading the history…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok((jobs, total)) => {
                        let page = filter().page;
                        let pages = total.div_ceil(u64::from(PER_PAGE)).max(1);
                        view! {
                            <p class="muted" data-test="history-count">{format!("{} job(s); page {} of {pages}", units::count(total), page + 1)}</p>
                            <table class="grid compact" aria-labelledby="history-h" data-test="job-history">
                                <thead><tr>
                                    <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th><th scope="col">"User"</th>
                                    <th scope="col">"Account"</th><th scope="col">"Partition"</th><th scope="col">"State"</th>
                                    <th scope="col" class="num">"GPUs"</th><th scope="col" class="num">"Submitted (UTC)"</th>
                                </tr></thead>
                                <tbody>
                                    {jobs.into_iter().map(|j| view! {
                                        <tr data-test="history-row" data-state=j.state.label()>
                                            <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                            <td>{j.name}</td><td>{j.user}</td><td>{j.account}</td><td>{j.partition}</td>
                                            <td>{j.state.label()}</td><td class="num">{j.gpus}</td><td class="num">{units::utc(j.submit_ms)}</td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                            <nav class="toolbar" aria-label="Pages">
                                {(page > 0).then(|| view! { <a class="chip" href=link_for(page - 1)>"← newer"</a> })}
                                {(u64::from(page) + 1 < pages).then(|| view! { <a class="chip" data-test="history-next" href=link_for(page + 1)>"older →"</a> })}
                            </nav>
                        }.into_any()
                    }
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot read the history: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}
