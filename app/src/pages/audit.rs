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

/// Where an audit row's target has a page: a node's for a drain or resume, a job's for a
/// requeue, an incident's for an alert's acknowledgement or silence, the remediation page
/// for its switches, `/admin` for a user's change. `None`: no page (a target that is not
/// a name Gantry knows, as rows written by older versions may hold).
pub fn target_href(action: &str, target: &str) -> Option<String> {
    let name_ok = |t: &str| {
        !t.is_empty()
            && t.len() <= 128
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match action {
        "drain" | "resume" => name_ok(target).then(|| format!("/nodes/{}", enc(target))),
        "requeue" | "requeue_hold" => target.parse::<u64>().ok().map(|id| format!("/jobs/{id}")),
        "alert_ack" | "alert_silence" | "alert_unsilence" => target
            .strip_prefix("alert ")
            .and_then(|t| t.split(':').next())
            .and_then(|id| id.parse::<i64>().ok())
            .map(|id| format!("/incidents/{id}")),
        a if a.starts_with("remediation_") => Some("/remediation".into()),
        a if a.starts_with("user_") => name_ok(target).then(|| "/admin".into()),
        _ => None,
    }
}

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
                                        <td>{match target_href(&e.action, &e.target) {
                                            Some(href) => view! { <a href=href data-test="audit-target">{e.target.clone()}</a> }.into_any(),
                                            None => e.target.clone().into_any(),
                                        }}</td>
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

#[cfg(test)]
mod tests {
    use super::target_href;

    #[test]
    fn audit_targets_link_to_their_pages() {
        let h = |a, t| target_href(a, t);
        assert_eq!(h("drain", "gpu017").as_deref(), Some("/nodes/gpu017"));
        assert_eq!(
            h("resume", "gb200-r01-c03").as_deref(),
            Some("/nodes/gb200-r01-c03")
        );
        assert_eq!(h("requeue", "1042").as_deref(), Some("/jobs/1042"));
        assert_eq!(h("requeue_hold", "1042").as_deref(), Some("/jobs/1042"));
        assert_eq!(
            h("alert_ack", "alert 77: ecc_dbe gpu042").as_deref(),
            Some("/incidents/77")
        );
        assert_eq!(
            h("remediation_mode", "ecc_dbe").as_deref(),
            Some("/remediation")
        );
        assert_eq!(h("user_role", "alice").as_deref(), Some("/admin"));
        // Nothing else is followed: a target that is no name, or an action without a page.
        assert_eq!(h("drain", "../admin"), None);
        assert_eq!(h("drain", "javascript:alert(1)"), None);
        assert_eq!(h("requeue", "12a"), None);
        assert_eq!(h("alert_ack", "alert x: y"), None);
        assert_eq!(h("sign_in", "alice"), None);
    }
}
