//! `/admin` (admins only): users with their role and state, and every valid session.
//! Each change is a plain form posted to the admin API, which answers a browser's form
//! with a redirect back here naming what was done, so the page works the same with and
//! without JavaScript. A role change, disable or delete ends that user's sessions.
//!

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::actions::{AdminView, Role, SessionInfo, UserInfo};
use crate::units::utc;

/// Every user and every valid session.
#[server(endpoint = "admin_users")]
pub async fn admin_users() -> Result<AdminView, ServerFnError> {
    // A page rendered on the server calls this in-process, past the route guard: the rule
    // is checked here too.
    if crate::backend::me().role != Some(Role::Admin) {
        return Err(ServerFnError::new("users and sessions need an admin role"));
    }
    let backend = crate::backend::backend()?;
    backend.admin_view().await.map_err(ServerFnError::new)
}

const ROLES: [Role; 4] = [Role::Viewer, Role::Operator, Role::Manager, Role::Admin];

/// The users' and the sessions' tables.
#[component]
fn Tables(v: AdminView) -> impl IntoView {
    let AdminView { users, sessions } = v;
    view! {
        <section aria-labelledby="users-h">
            <h2 id="users-h">"Users"</h2>
            <table class="grid" data-test="admin-users">
                <thead><tr>
                    <th scope="col">"User"</th><th scope="col">"Role"</th><th scope="col">"State"</th>
                    <th scope="col">"Created"</th><th scope="col" class="num">"Sessions"</th>
                    <th scope="col">"Change"</th>
                </tr></thead>
                <tbody>{users.into_iter().map(|u| view! { <UserRow u/> }).collect_view()}</tbody>
            </table>
        </section>
        <section aria-labelledby="sessions-h">
            <h2 id="sessions-h">"Sessions"</h2>
            <p class="muted">"Valid now. A session ends when idle, at its lifetime, or when revoked here."</p>
            <table class="grid" data-test="admin-sessions">
                <thead><tr>
                    <th scope="col">"User"</th><th scope="col">"Signed in"</th><th scope="col">"Last seen"</th>
                    <th scope="col">"Ends"</th><th scope="col">"Revoke"</th>
                </tr></thead>
                <tbody>{sessions.into_iter().map(|s| view! { <SessionRow s/> }).collect_view()}</tbody>
            </table>
        </section>
    }
}

/// A user's row: its role, state and sessions, and a form per change.
#[component]
fn UserRow(u: UserInfo) -> impl IntoView {
    // User names are letters, digits, `.`, `_` and `-`; the renderer escapes them all the same.
    let n = u.name;
    let base = format!("/api/admin/users/{n}");
    let (toggle, verb) = if u.disabled {
        ("enable", "Enable")
    } else {
        ("disable", "Disable")
    };
    let role = match u.origin.as_str() {
        "ldap" => format!("{} (from LDAP)", u.role.as_str()),
        "oidc" => format!("{} (from sign-on)", u.role.as_str()),
        _ => u.role.as_str().to_string(),
    };
    let current = u.role;
    view! {
        <tr data-test="admin-user" data-user=n.clone()>
            <th scope="row">{n.clone()}</th>
            <td>{role}</td>
            <td>{if u.disabled { "disabled" } else { "enabled" }}</td>
            <td>{utc(u.created_ms)}</td>
            <td class="num">{u.sessions}</td>
            <td class="actions">
                <form method="post" action=format!("{base}/role") class="inline">
                    <label for=format!("role-{n}") class="sr-only">{format!("Role of {n}")}</label>
                    <select id=format!("role-{n}") name="role">
                        {ROLES.into_iter().map(|r| view! {
                            <option value=r.as_str() selected=r == current>{r.as_str()}</option>
                        }).collect_view()}
                    </select>
                    <button type="submit">{format!("Set role of {n}")}</button>
                </form>
                <form method="post" action=format!("{base}/{toggle}") class="inline">
                    <button type="submit">{format!("{verb} {n}")}</button>
                </form>
                <form method="post" action=format!("{base}/delete") class="inline">
                    <input type="checkbox" name="confirm" value="yes" required id=format!("del-{n}")/>
                    <label for=format!("del-{n}")>{format!("I mean to delete {n}")}</label>
                    <button type="submit" class="danger">{format!("Delete {n}")}</button>
                </form>
            </td>
        </tr>
    }
}

/// A session's row: when it began, was last seen and ends, and a form to revoke it.
#[component]
fn SessionRow(s: SessionInfo) -> impl IntoView {
    view! {
        <tr data-test="admin-session">
            <th scope="row">{s.user.clone()}</th>
            <td>{utc(s.created_ms)}</td>
            <td>{utc(s.last_seen_ms)}</td>
            <td>{utc(s.expires_ms.min(s.idle_expires_ms))}</td>
            <td>
                <form method="post" action=format!("/api/admin/sessions/{}/revoke", s.id) class="inline">
                    <button type="submit">{format!("Revoke {}'s session", s.user)}</button>
                </form>
            </td>
        </tr>
    }
}

#[component]
pub fn AdminPage() -> impl IntoView {
    let q = use_query_map();
    let data = Resource::new(|| (), |_| admin_users());
    let done = move || q.with(|q| q.get("done"));
    let failed = move || q.with(|q| q.get("error"));
    view! {
        <Title text="Users and sessions"/>
        <div class="page-head"><h1>"Users and sessions"</h1></div>
        {move || done().map(|d| view! { <p class="notice" role="status" data-test="admin-done">{d}</p> })}
        {move || failed().map(|e| view! { <p class="error" role="alert" data-test="admin-error">{e}</p> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <div><Tables v/></div> }.into_any(),
                    Err(_) => view! { <p class="error" role="alert">"Users cannot be read now."</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

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
        let h = Owner::new().with(|| view! { <Tables v/> }.to_html());
        assert!(!h.contains("a<b"), "{h}");
        assert!(h.contains("data-user=\"a&lt;b\""), "{h}");
        assert!(h.contains("<option value=\"operator\" selected"), "{h}");
        assert!(
            h.contains("Enable a&lt;b"),
            "a disabled user is offered enabling: {h}"
        );
        assert!(h.contains("/api/admin/sessions/0123abcd/revoke"), "{h}");
        // The session ends at the earlier of its idle end and its lifetime.
        assert!(h.contains(&crate::units::utc(120_000)), "{h}");
    }
}
