//! `/audit` (operators and admins): who did what to which target, when, and the verified
//! result. Filters are a plain GET form, so the URL carries them and the page works
//! without JavaScript; the same rows download as CSV.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::actions::{AuditEntry, AuditFilter};
use crate::units;

#[server(endpoint = "audit_entries", input = server_fn::codec::Json)]
pub async fn audit_entries(filter: AuditFilter) -> Result<Vec<AuditEntry>, ServerFnError> {
    // A page rendered on the server calls this in-process, past the route guard: the rule
    // is checked here too.
    if !crate::backend::me()
        .role
        .is_some_and(crate::actions::Role::can_act)
    {
        return Err(ServerFnError::new(
            "the audit log needs an operator or admin role",
        ));
    }
    let backend = crate::backend::backend()?;
    backend.audit(&filter).await.map_err(ServerFnError::new)
}

use crate::nav::encode_component as enc;

#[component]
pub fn AuditPage() -> impl IntoView {
    let q = use_query_map();
    let filter = move || {
        q.with(|q| {
            let get = |k: &str| q.get(k).filter(|v| !v.is_empty());
            AuditFilter {
                user: get("user"),
                action: get("action"),
                target: get("target"),
                limit: Some(500),
            }
        })
    };
    let rows = Resource::new(filter, audit_entries);
    let csv = move || {
        let f = filter();
        format!(
            "/api/audit?format=csv&limit=10000&user={}&action={}&target={}",
            enc(f.user.as_deref().unwrap_or("")),
            enc(f.action.as_deref().unwrap_or("")),
            enc(f.target.as_deref().unwrap_or(""))
        )
    };
    let val = move |k: &'static str| q.with(|q| q.get(k).unwrap_or_default());
    view! {
        <Title text="Audit"/>
        <div class="page-head"><h1>"Audit log"</h1></div>
        <form method="get" action="/audit" class="toolbar">
            <label for="f-user">"User"</label>
            <input id="f-user" name="user" type="text" value=move || val("user")/>
            <label for="f-action">"Action"</label>
            <select id="f-action" name="action">
                <option value="">"any"</option>
                {["drain", "resume", "requeue", "requeue_hold"].into_iter().map(|a| view! {
                    <option value=a selected=move || val("action") == a>{a}</option>
                }).collect_view()}
            </select>
            <label for="f-target">"Target"</label>
            <input id="f-target" name="target" type="text" value=move || val("target")/>
            <button type="submit">"Filter"</button>
            <a href=csv download="gantry-audit.csv">"Download CSV"</a>
        </form>
        <Suspense fallback=|| view! { <p class="loading">"Loading the audit log…"</p> }>
            {move || Suspend::new(async move {
                match rows.await {
                    Ok(rows) if rows.is_empty() => view! { <p>"No entries match."</p> }.into_any(),
                    Ok(rows) => view! {
                        <table class="grid" data-test="audit-table">
                            <caption class="sr-only">"Audit entries, newest first"</caption>
                            <thead><tr>
                                <th scope="col" class="num">"#"</th><th scope="col">"When (UTC)"</th>
                                <th scope="col">"User"</th><th scope="col">"Action"</th><th scope="col">"Target"</th>
                                <th scope="col">"Reason"</th><th scope="col">"Result"</th>
                            </tr></thead>
                            <tbody>
                                {rows.into_iter().map(|e| view! {
                                    <tr data-test="audit-row" data-status=e.status.clone()>
                                        <td class="num">{e.id}</td>
                                        <td class="num">{units::utc(e.at_ms)}</td>
                                        <td>{format!("{} ({})", e.user, e.role)}</td>
                                        <td>{e.action.clone()}</td>
                                        <td>{e.target.clone()}</td>
                                        <td class="reason">{e.detail.clone()}</td>
                                        <td class=format!("outcome-{}", e.status)>
                                            {if e.status == "started" {
                                                "started, never completed (the server stopped mid-action)".to_string()
                                            } else {
                                                format!("{}: {}", e.status, e.result)
                                            }}
                                        </td>
                                    </tr>
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot read the audit log: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}
