//! `/admin` (admins only): users with their role and state, and every valid session.
//! Each change is a plain form posted to the admin API, which answers a browser's form
//! with a redirect back here naming what was done, so the page works the same with and
//! without JavaScript. A role change, disable or delete ends that user's sessions.
//!
//! The page needs no browser logic, so its tables are HTML the server writes (`tables`,
//! server builds only) and the browser takes as they are: the bundle carries none of it.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The users' and sessions' tables, as HTML.
#[server(endpoint = "admin_users")]
pub async fn admin_users() -> Result<String, ServerFnError> {
    // A page rendered on the server calls this in-process, past the route guard: the rule
    // is checked here too.
    if crate::backend::me().role != Some(crate::actions::Role::Admin) {
        return Err(ServerFnError::new("users and sessions need an admin role"));
    }
    let backend = crate::backend::backend()?;
    let v = backend.admin_view().await.map_err(ServerFnError::new)?;
    Ok(tables(&v))
}

#[cfg(feature = "ssr")]
fn tables(v: &crate::actions::AdminView) -> String {
    use crate::actions::Role;
    use crate::units::{utc, xml_escape as esc};
    use std::fmt::Write;
    const ROLES: [Role; 4] = [Role::Viewer, Role::Operator, Role::Manager, Role::Admin];
    let mut h = String::with_capacity(4096);
    h.push_str(
        "<section aria-labelledby=\"users-h\"><h2 id=\"users-h\">Users</h2>\
         <table class=\"grid\" data-test=\"admin-users\"><thead><tr>\
         <th scope=\"col\">User</th><th scope=\"col\">Role</th><th scope=\"col\">State</th>\
         <th scope=\"col\">Created</th><th scope=\"col\" class=\"num\">Sessions</th>\
         <th scope=\"col\">Change</th></tr></thead><tbody>",
    );
    for u in &v.users {
        // User names are letters, digits, `.`, `_` and `-`; escaped all the same.
        let n = esc(&u.name);
        let base = format!("/api/admin/users/{n}");
        let (toggle, verb) = if u.disabled {
            ("enable", "Enable")
        } else {
            ("disable", "Disable")
        };
        let _ = write!(
            h,
            "<tr data-test=\"admin-user\" data-user=\"{n}\"><th scope=\"row\">{n}</th>\
             <td>{role}</td><td>{state}</td><td>{created}</td><td class=\"num\">{sessions}</td>\
             <td class=\"actions\"><form method=\"post\" action=\"{base}/role\" class=\"inline\">\
             <label for=\"role-{n}\" class=\"sr-only\">Role of {n}</label><select id=\"role-{n}\" name=\"role\">",
            role = match u.origin.as_str() {
                "ldap" => format!("{} (from LDAP)", u.role.as_str()),
                "oidc" => format!("{} (from sign-on)", u.role.as_str()),
                _ => u.role.as_str().to_string(),
            },
            state = if u.disabled { "disabled" } else { "enabled" },
            created = esc(&utc(u.created_ms)),
            sessions = u.sessions,
        );
        for r in ROLES {
            let sel = if r == u.role { " selected" } else { "" };
            let _ = write!(h, "<option value=\"{0}\"{sel}>{0}</option>", r.as_str());
        }
        let _ = write!(
            h,
            "</select><button type=\"submit\">Set role of {n}</button></form>\
             <form method=\"post\" action=\"{base}/{toggle}\" class=\"inline\">\
             <button type=\"submit\">{verb} {n}</button></form>\
             <form method=\"post\" action=\"{base}/delete\" class=\"inline\">\
             <input type=\"checkbox\" name=\"confirm\" value=\"yes\" required id=\"del-{n}\">\
             <label for=\"del-{n}\">I mean to delete {n}</label>\
             <button type=\"submit\" class=\"danger\">Delete {n}</button></form></td></tr>"
        );
    }
    h.push_str(
        "</tbody></table></section><section aria-labelledby=\"sessions-h\">\
         <h2 id=\"sessions-h\">Sessions</h2><p class=\"muted\">Valid now. A session ends when \
         idle, at its lifetime, or when revoked here.</p>\
         <table class=\"grid\" data-test=\"admin-sessions\"><thead><tr>\
         <th scope=\"col\">User</th><th scope=\"col\">Signed in</th><th scope=\"col\">Last seen</th>\
         <th scope=\"col\">Ends</th><th scope=\"col\">Revoke</th></tr></thead><tbody>",
    );
    for s in &v.sessions {
        let n = esc(&s.user);
        let _ = write!(
            h,
            "<tr data-test=\"admin-session\"><th scope=\"row\">{n}</th><td>{}</td><td>{}</td>\
             <td>{}</td><td><form method=\"post\" action=\"/api/admin/sessions/{}/revoke\" \
             class=\"inline\"><button type=\"submit\">Revoke {n}'s session</button></form></td></tr>",
            esc(&utc(s.created_ms)),
            esc(&utc(s.last_seen_ms)),
            esc(&utc(s.expires_ms.min(s.idle_expires_ms))),
            esc(&s.id),
        );
    }
    h.push_str("</tbody></table></section>");
    h
}

#[component]
pub fn AdminPage() -> impl IntoView {
    let q = use_query_map();
    let html = Resource::new(|| (), |_| admin_users());
    let done = move || q.with(|q| q.get("done"));
    let failed = move || q.with(|q| q.get("error"));
    view! {
        <Title text="Users and sessions"/>
        <div class="page-head"><h1>"Users and sessions"</h1></div>
        {move || done().map(|d| view! { <p class="notice" role="status" data-test="admin-done">{d}</p> })}
        {move || failed().map(|e| view! { <p class="error" role="alert" data-test="admin-error">{e}</p> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                match html.await {
                    Ok(h) => view! { <div inner_html=h></div> }.into_any(),
                    Err(_) => view! { <p class="error" role="alert">"Users cannot be read now."</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::actions::{AdminView, Role, SessionInfo, UserInfo};

    #[test]
    fn the_tables_name_every_user_and_session_and_escape_what_they_print() {
        let v = AdminView {
            users: vec![UserInfo {
                name: "a<b".into(),
                role: Role::Operator,
                disabled: true,
                disabled_ms: None,
                created_ms: 0,
                sessions: 2,
                origin: "local".into(),
            }],
            sessions: vec![SessionInfo {
                id: "0123abcd".into(),
                user: "a<b".into(),
                created_ms: 0,
                last_seen_ms: 60_000,
                expires_ms: 3_600_000,
                idle_expires_ms: 120_000,
            }],
        };
        let h = tables(&v);
        assert!(!h.contains("a<b"), "{h}");
        assert!(h.contains("data-user=\"a&lt;b\""), "{h}");
        assert!(h.contains("<option value=\"operator\" selected>"), "{h}");
        assert!(
            h.contains("Enable a&lt;b"),
            "a disabled user is offered enabling: {h}"
        );
        assert!(h.contains("/api/admin/sessions/0123abcd/revoke"), "{h}");
        // The session ends at the earlier of its idle end and its lifetime.
        assert!(h.contains(&crate::units::utc(120_000)), "{h}");
    }
}
