//! `/incidents/:id`: one incident (by its cause's alert id) and its timeline: what fired,
//! who acknowledged it, what policies decided, what was done about it (for operators and
//! admins, from the audit log) and when it closed.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::units;
use crate::views::IncidentDetail;

#[server(endpoint = "incident_detail")]
pub async fn get_incident(id: i64) -> Result<Option<IncidentDetail>, ServerFnError> {
    let backend = crate::backend::backend()?;
    let me = crate::backend::me();
    backend.incident(&me, id).await.map_err(ServerFnError::new)
}

#[component]
pub fn IncidentPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|v| v.parse::<i64>().ok()));
    let data = Resource::new(id, |id| async move {
        match id {
            Some(id) => get_incident(id).await,
            None => Ok(None),
        }
    });
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the incident…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(Some(d)) => view! { <Detail d/> }.into_any(),
                    Ok(None) => view! {
                        <Title text="No such incident"/>
                        <div class="page-head"><h1>"No such incident"</h1></div>
                        <p>"No alert has that id. " <a href="/alerts">"Open incidents"</a></p>
                    }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show the incident: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Detail(d: IncidentDetail) -> impl IntoView {
    let title = format!("Incident {}", d.id);
    let (severity, state) = match &d.open {
        Some(i) => (i.severity.clone(), "open"),
        None => (d.cause.severity.clone(), "closed"),
    };
    view! {
        <Title text=title.clone()/>
        <div class="page-head"><h1>{title}</h1></div>
        <p data-test="incident-state" data-state=state>
            <span class=format!("badge sev-{severity}")>{severity.clone()}</span>" "
            {format!("{state} · {} on {}: {}", d.cause.rule, d.cause.subject, d.cause.summary)}
        </p>
        {d.open.map(|i| view! {
            <p><a href=i.place_link.clone()>{i.place.clone()}</a>": "<strong>{i.action.clone()}</strong>" "
                <a href="/alerts">"act from the alerts page"</a></p>
            {(!i.jobs.is_empty()).then(|| view! {
                <table class="grid" data-test="incident-jobs">
                    <caption>"Running jobs it hits"</caption>
                    <thead><tr>
                        <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th>
                        <th scope="col" class="num">"GPUs"</th><th scope="col" class="num">"Last checkpoint"</th>
                        <th scope="col" class="num">"Work at risk"</th>
                    </tr></thead>
                    <tbody>
                        {i.jobs.into_iter().map(|j| view! {
                            <tr>
                                <th scope="row" class="num"><a href=format!("/jobs/{}", j.id)>{j.id}</a></th>
                                <td>{j.name}</td>
                                <td class="num">{j.gpus}</td>
                                <td class="num">{j.last_checkpoint_ms.map(units::utc).unwrap_or_else(|| "none known".into())}</td>
                                <td class="num">{format!("{:.1} GPU-h", j.at_risk_gpu_hours)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            })}
        })}
        <section aria-labelledby="timeline-h">
            <h2 id="timeline-h">"Timeline"</h2>
            <ol class="incident-timeline" data-test="incident-timeline-list">
                {d.timeline.into_iter().map(|e| view! {
                    <li data-test="timeline-entry">
                        <time class="num">{units::utc(e.at_ms)}</time>" "
                        {e.what}
                        {e.link.map(|l| view! { " " <a href=l>"more"</a> })}
                    </li>
                }).collect_view()}
            </ol>
        </section>
    }
}
