//! `/admin` (admins only): users with their role and state, and every valid session.
//! Each change is a plain form posted to the admin API, which answers a browser's form
//! with a redirect back here naming what was done, so the page works the same with and
//! without JavaScript. A role change, disable or delete ends that user's sessions.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::actions::{AdminView, Role};
use crate::units;

#[server(endpoint = "admin_users")]
pub async fn admin_users() -> Result<AdminView, ServerFnError> {
    let backend = crate::backend::backend()?;
    backend.admin_view().await.map_err(ServerFnError::new)
}

const ROLES: [Role; 4] = [Role::Viewer, Role::Operator, Role::Manager, Role::Admin];

#[component]
pub fn AdminPage() -> impl IntoView {
    let q = use_query_map();
    let view_data = Resource::new(|| (), |_| admin_users());
    let done = move || q.with(|q| q.get("done"));
    let failed = move || q.with(|q| q.get("error"));
    view! {
        <Title text="Users and sessions"/>
        <div class="page-head"><h1>"Users and sessions"</h1></div>
        {move || done().map(|d| view! { <p class="notice" role="status" data-test="admin-done">{d}</p> })}
        {move || failed().map(|e| view! { <p class="error" role="alert" data-test="admin-error">{e}</p> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                match view_data.await {
                    Err(_) => view! { <p class="error" role="alert">"Users cannot be read now."</p> }.into_any(),
                    Ok(v) => view! {
                        <section aria-labelledby="users-h">
                            <h2 id="users-h">"Users"</h2>
                            <table class="grid" data-test="admin-users">
                                <thead><tr>
                                    <th scope="col">"User"</th>
                                    <th scope="col">"Role"</th>
                                    <th scope="col">"State"</th>
                                    <th scope="col">"Created"</th>
                                    <th scope="col" class="num">"Sessions"</th>
                                    <th scope="col">"Change"</th>
                                </tr></thead>
                                <tbody>
                                    {v.users.into_iter().map(|u| {
                                        let base = format!("/api/admin/users/{}", u.name);
                                        let role_id = format!("role-{}", u.name);
                                        let (toggle, toggle_label) = if u.disabled {
                                            ("enable", format!("Enable {}", u.name))
                                        } else {
                                            ("disable", format!("Disable {}", u.name))
                                        };
                                        view! {
                                            <tr data-test="admin-user" data-user=u.name.clone()>
                                                <th scope="row">{u.name.clone()}</th>
                                                <td>{u.role.as_str()}</td>
                                                <td>{if u.disabled { "disabled" } else { "enabled" }}</td>
                                                <td>{units::utc(u.created_ms)}</td>
                                                <td class="num">{u.sessions}</td>
                                                <td class="actions">
                                                    <form method="post" action=format!("{base}/role") class="inline">
                                                        <label for=role_id.clone() class="sr-only">{format!("Role of {}", u.name)}</label>
                                                        <select id=role_id name="role">
                                                            {ROLES.into_iter().map(|r| view! {
                                                                <option value=r.as_str() selected=r == u.role>{r.as_str()}</option>
                                                            }).collect_view()}
                                                        </select>
                                                        <button type="submit">{format!("Set role of {}", u.name)}</button>
                                                    </form>
                                                    <form method="post" action=format!("{base}/{toggle}") class="inline">
                                                        <button type="submit">{toggle_label}</button>
                                                    </form>
                                                    <form method="post" action=format!("{base}/delete") class="inline">
                                                        <input type="checkbox" name="confirm" value="yes" required id=format!("del-{}", u.name)/>
                                                        <label for=format!("del-{}", u.name)>{format!("I mean to delete {}", u.name)}</label>
                                                        <button type="submit" class="danger">{format!("Delete {}", u.name)}</button>
                                                    </form>
                                                </td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                        <section aria-labelledby="sessions-h">
                            <h2 id="sessions-h">"Sessions"</h2>
                            <p class="muted">"Valid now. A session ends when idle, at its lifetime, or when revoked here."</p>
                            <table class="grid" data-test="admin-sessions">
                                <thead><tr>
                                    <th scope="col">"User"</th>
                                    <th scope="col">"Signed in"</th>
                                    <th scope="col">"Last seen"</th>
                                    <th scope="col">"Ends"</th>
                                    <th scope="col">"Revoke"</th>
                                </tr></thead>
                                <tbody>
                                    {v.sessions.into_iter().map(|s| {
                                        let ends = s.expires_ms.min(s.idle_expires_ms);
                                        view! {
                                            <tr data-test="admin-session">
                                                <th scope="row">{s.user.clone()}</th>
                                                <td>{units::utc(s.created_ms)}</td>
                                                <td>{units::utc(s.last_seen_ms)}</td>
                                                <td>{units::utc(ends)}</td>
                                                <td>
                                                    <form method="post" action=format!("/api/admin/sessions/{}/revoke", s.id) class="inline">
                                                        <button type="submit">{format!("Revoke {}'s session", s.user)}</button>
                                                    </form>
                                                </td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}
