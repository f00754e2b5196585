//! `/nodes` and `/jobs`: the scheduler's nodes and jobs as of its last poll, with drain,
//! resume and requeue for those allowed. Every action opens a preview first (jobs, GPUs,
//! last checkpoint, work at risk; a reason for a drain); the confirm button names the
//! action and its target; the verified result links to its audit entry.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::actions::{ActionKind, ActionStatus, ActionTargets, Me, Preview};
use crate::model::NodeState;
use crate::units;
use crate::views::{ListQuery, NodesView};

mod jobs;
mod order;
pub(crate) use jobs::wait_sentence;
pub use jobs::JobsPage;
use order::{fingerprint, nodes_href, Sort};

/// A page of the nodes or of the jobs as of the last scheduler poll ([`ListQuery`]), and
/// who is asking. `have`: the fingerprint of the rows the asker holds, which are then left
/// out if they are still the same (`NodesView::unchanged`).
#[server(endpoint = "nodes_view", input = server_fn::codec::Json)]
pub async fn get_nodes_view(q: ListQuery, have: Option<u64>) -> Result<NodesView, ServerFnError> {
    let backend = crate::backend::backend()?;
    let v = backend
        .nodes_view()
        .ok_or_else(|| ServerFnError::new("no data yet: the scheduler has not been polled"))?;
    let mut v = order::leave_out_held(order::select(v, q), have);
    v.me = crate::backend::me();
    Ok(v)
}

/// What an action would do (operators only: the route guard refuses others).
#[server(endpoint = "preview_action", input = server_fn::codec::Json)]
pub async fn preview_action(
    kind: ActionKind,
    targets: ActionTargets,
) -> Result<Preview, ServerFnError> {
    let backend = crate::backend::backend()?;
    backend
        .preview(kind, &targets)
        .await
        .map_err(ServerFnError::new)
}

/// Records an action and starts it on the server (audited, called, verified there,
/// whatever becomes of this page); answers with its status at once.
#[server(endpoint = "run_action", input = server_fn::codec::Json)]
pub async fn run_action(
    kind: ActionKind,
    targets: ActionTargets,
    reason: Option<String>,
) -> Result<ActionStatus, ServerFnError> {
    let backend = crate::backend::backend()?;
    let me = crate::backend::me();
    backend
        .act(&me, kind, &targets, reason.as_deref())
        .await
        .map_err(ServerFnError::new)
}

/// Action `id` as far as it has run; waits up to 10 s on the server for it to move on
/// from `seen` ended targets. Operators only (the route guard refuses others).
#[server(endpoint = "action_status", input = server_fn::codec::Json)]
pub async fn get_action_status(
    id: i64,
    seen: usize,
) -> Result<Option<ActionStatus>, ServerFnError> {
    let backend = crate::backend::backend()?;
    backend
        .action_status(id, seen, 10_000)
        .await
        .map_err(ServerFnError::new)
}

/// The action being previewed: what, on which targets, and how it reads in a button.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pending {
    pub kind: ActionKind,
    pub targets: ActionTargets,
    pub label: String,
    /// The reason the form starts with (an incident's words); the operator may change it.
    pub reason: String,
}

/// After an action: re-read the nodes view.
fn refresher(state: RwSignal<NodesView>) -> Callback<()> {
    Callback::new(move |_| {
        #[cfg(feature = "hydrate")]
        client::refetch(state, state.with_untracked(|v| v.query.clone()));
        #[cfg(not(feature = "hydrate"))]
        let _ = state;
    })
}

pub(crate) fn state_class(s: NodeState) -> &'static str {
    match s {
        NodeState::Idle => "state-idle",
        NodeState::Allocated | NodeState::Mixed => "state-allocated",
        NodeState::Draining => "state-draining",
        NodeState::Drained => "state-drained",
        NodeState::Down | NodeState::NotResponding => "state-down",
        _ => "state-other",
    }
}

/// How old the last poll may be before the page says it is stale: two poll intervals, and
/// at short intervals no less than one plus 2 s, for a refresh ([`refresh_every`]) and the
/// fetch to land without the page flickering stale on a healthy cluster.
pub fn stale_after(interval_ms: i64) -> i64 {
    (2 * interval_ms).max(interval_ms + 2000)
}

/// How often the page refetches after hydration: every half poll interval, at least 1 s
/// apart (a faster refetch shows nothing new and keeps the browser's network busy) and at
/// most 5 s. (The server build renders the page and never refetches.)
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
pub fn refresh_every(interval_ms: i64) -> i64 {
    (interval_ms / 2).clamp(1_000, 5_000)
}

/// Shared by both pages: loads the page of the list the URL asks for (`query`), refreshes
/// it every [`refresh_every`] after hydration and at once when the URL changes, and marks it
/// stale when the last poll is older than [`stale_after`].
#[component]
fn WithView(
    query: Memo<ListQuery>,
    children: fn(RwSignal<NodesView>, Memo<bool>) -> AnyView,
) -> impl IntoView {
    // Loaded once; then the client follows the URL without remounting the page (the
    // filter's input keeps its focus as it is typed).
    let data = Resource::new(|| (), move |_| get_nodes_view(query.get_untracked(), None));
    view! {
        <Suspense fallback=|| view! { <p class="loading">"Loading the scheduler's state…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => {
                        // Both on one clock: the server's here, the browser's after hydration.
                        let now = RwSignal::new(v.server_now_ms);
                        let polled_at = RwSignal::new(v.polled_ms);
                        let interval = v.interval_ms.max(500);
                        #[cfg(feature = "hydrate")]
                        let age = v.server_now_ms - v.polled_ms;
                        let state = RwSignal::new(v);
                        let stale =
                            Memo::new(move |_| now.get() - polled_at.get() > stale_after(interval));
                        #[cfg(feature = "hydrate")]
                        client::refresh(state, query, now, polled_at, age, interval);
                        children(state, stale)
                    }
                    Err(e) => view! {
                        <p class="error" role="alert">{format!("Cannot show the scheduler's state: {e}")}</p>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn PollStatus(state: RwSignal<NodesView>, stale: Memo<bool>) -> impl IntoView {
    let text = move || {
        let at = state.with(|v| v.at_ms);
        if stale.get() {
            format!("Stale: scheduler state of {}", units::utc(at))
        } else {
            format!("Scheduler state of {}", units::utc(at))
        }
    };
    view! {
        <p class=move || if stale.get() { "live-status stale" } else { "live-status live" }
            data-test="poll-status" role="status" aria-live="polite">
            <span class="dot" aria-hidden="true"></span>{text}
        </p>
    }
}

/// "true" once the page is interactive (effects run only in the browser), for tests and
/// for styling; "false" in the server-rendered HTML.
fn hydrated_marker() -> impl Fn() -> &'static str + Copy {
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    move || if hydrated.get() { "true" } else { "false" }
}

/// Why the action buttons are disabled, or `None` when they are not.
pub(crate) fn cannot_act(me: &Me) -> Option<&'static str> {
    match me.role {
        None => Some("Sign in as an operator to act"),
        Some(r) if !r.can_act() => Some("Your role cannot drain, resume or requeue"),
        Some(_) => None,
    }
}

#[component]
pub fn NodesPage() -> impl IntoView {
    let q = use_query_map();
    let query = Memo::new(move |_| {
        q.with(|q| ListQuery {
            jobs: false,
            filter: q.get("filter").unwrap_or_default(),
            sort: q.get("sort").unwrap_or_default(),
            wait: String::new(),
            page: page_in(q),
        })
    });
    view! {
        <Title text="Nodes"/>
        <WithView query children=|state, stale| view! { <NodesBody state stale/> }.into_any()/>
    }
}

/// The page the URL asks for (`?page=`), 1 when it names none.
fn page_in(q: &leptos_router::params::ParamsMap) -> u32 {
    q.get("page").and_then(|p| p.parse().ok()).unwrap_or(1)
}

/// Where the rows shown stand in their list ("Rows 201–400 of 2,048 nodes"), and links to
/// the first, previous, next and last pages (plain text where there is none).
#[component]
fn Pager(
    state: RwSignal<NodesView>,
    /// What the rows are, plural ("nodes").
    noun: &'static str,
    /// The URL of a page of the same list.
    href: Callback<u32, String>,
) -> impl IntoView {
    let at = Memo::new(move |_| state.with(|v| v.page));
    let text = move || {
        let p = at.get();
        let n = |x: u32| units::thousands(u64::from(x));
        match (p.shown, p.total == p.all) {
            (0, true) => format!("No {noun}"),
            (0, false) => format!("No {noun} match, of {}", n(p.all)),
            (_, true) => format!(
                "Rows {}–{} of {} {noun}",
                n(p.first + 1),
                n(p.first + p.shown),
                n(p.all)
            ),
            (_, false) => format!(
                "Rows {}–{} of the {} {noun} that match, of {}",
                n(p.first + 1),
                n(p.first + p.shown),
                n(p.total),
                n(p.all)
            ),
        }
    };
    let link = move |label: &'static str, rel: &'static str, to: fn(u32, u32) -> Option<u32>| {
        move || {
            let p = at.get();
            match to(p.page, p.pages).filter(|&t| t != p.page) {
                Some(t) => view! { <a href=href.run(t) rel=rel data-test="pager-link" data-rel=label>{label}</a> }.into_any(),
                None => view! { <span class="muted" aria-disabled="true">{label}</span> }.into_any(),
            }
        }
    };
    view! {
        <nav class="pager" aria-label=format!("Pages of {noun}") data-test="pager">
            <span data-test="pager-rows">{text}</span>
            {move || (at.get().pages > 1).then(|| view! {
                {link("First", "first", |_, _| Some(1))}
                {link("Previous", "prev", |p, _| p.checked_sub(1).filter(|&p| p >= 1))}
                <span>{move || format!("Page {} of {}", at.get().page, at.get().pages)}</span>
                {link("Next", "next", |p, n| Some(p + 1).filter(|&p| p <= n))}
                {link("Last", "last", |_, n| Some(n))}
            })}
        </nav>
    }
}

#[component]
fn NodesBody(state: RwSignal<NodesView>, stale: Memo<bool>) -> impl IntoView {
    let pending: RwSignal<Option<Pending>> = RwSignal::new(None);
    // The filter and the order live in the URL: a link or a reload shows the same rows.
    let q = use_query_map();
    let filter = move || q.with(|q| q.get("filter").unwrap_or_default());
    let sort = move || q.with(|q| Sort::parse(q.get("sort").as_deref()));
    let navigate = leptos_router::hooks::use_navigate();
    // Who is asking, the racks and why the buttons are disabled: memos, so a refresh that
    // keeps them wakes no row, option or button.
    let me = Memo::new(move |_| state.with(|v| v.me.clone()));
    let why = Memo::new(move |_| cannot_act(&me.get()));
    // The server filtered, ordered and cut the page (`order::select`); the rows are
    // arranged again only when their fingerprint changes, not at each refresh.
    let rows_hash = Memo::new(move |_| state.with(|v| v.rows_hash));
    let keyed = move || {
        // (Read, not only tracked: a memo never read never runs, and never changes.)
        let _ = rows_hash.get();
        state.with_untracked(|v| {
            v.nodes
                .iter()
                .map(|n| (fingerprint(n), n.clone()))
                .collect::<Vec<_>>()
        })
    };
    let header = move |label: &'static str, by: Sort, class: &'static str| {
        view! {
            <th scope="col" class=class
                aria-sort=move || if sort() == by { "ascending" } else { "none" }>
                <a href=move || nodes_href(&filter(), by, 1) data-test="sort-nodes" data-sort=by.word()>{label}</a>
            </th>
        }
    };
    let page_href = Callback::new(move |p: u32| nodes_href(&filter(), sort(), p));
    let racks = Memo::new(move |_| state.with(|v| v.racks.clone()));
    let rack_pick = RwSignal::new(String::new());
    view! {
        <div class="page-head" data-test="nodes-page" data-hydrated=hydrated_marker()>
            <h1>"Nodes"</h1>
            <PollStatus state stale/>
        </div>
        <form class="toolbar" method="get" action="/nodes">
            <label for="node-filter">"Filter"</label>
            <input id="node-filter" name="filter" type="search" placeholder="name, state or rack"
                prop:value=filter
                on:input=move |ev| {
                    let href = nodes_href(&event_target_value(&ev), sort(), 1);
                    navigate(&href, leptos_router::NavigateOptions { replace: true, scroll: false, ..Default::default() });
                }/>
            <input type="hidden" name="sort" value=move || sort().word()/>
            <a href=move || nodes_href(&filter(), Sort::Problems, 1) data-test="problems-first"
                aria-current=move || (sort() == Sort::Problems).then_some("true")>"Problems first"</a>
            <noscript><button type="submit">"Filter"</button></noscript>
        </form>
        <div class="toolbar">
            <label for="rack-pick">"Rack"</label>
            <select id="rack-pick" on:change=move |ev| rack_pick.set(event_target_value(&ev))>
                <option value="">"choose…"</option>
                {move || racks.get().into_iter().map(|r| view! { <option value=r.clone()>{r.clone()}</option> }).collect_view()}
            </select>
            {move || {
                let why = why.get();
                view! {
                    <button type="button" data-test="drain-rack"
                        disabled=move || why.is_some() || rack_pick.get().is_empty()
                        title=why.unwrap_or("Drain every node of the rack, with a preview first")
                        on:click=move |_| {
                            let rack = rack_pick.get_untracked();
                            pending.set(Some(Pending {
                                kind: ActionKind::Drain,
                                label: format!("rack {rack}"),
                                targets: ActionTargets { rack: Some(rack), ..Default::default() },
                                reason: String::new(),
                            }));
                        }>
                        "Drain rack…"
                    </button>
                }
            }}
        </div>
        {move || pending.get().map(|p| view! { <ActionPanel p pending after=refresher(state)/> })}
        <Pager state noun="nodes" href=page_href/>
        <table class="grid" class:stale=move || stale.get() data-test="nodes-table">
            <caption class="sr-only">"Nodes, their scheduler state and jobs"</caption>
            <thead><tr>
                {header("Node", Sort::Name, "")}{header("Rack", Sort::Rack, "")}{header("State", Sort::State, "")}
                <th scope="col">"Reason"</th>{header("GPUs used", Sort::Gpus, "num")}
                {header("Incidents", Sort::Problems, "")}
                <th scope="col">"Jobs"</th><th scope="col">"Actions"</th>
            </tr></thead>
            // Keyed by name and content: a refresh touches only the rows that changed.
            <tbody>
                <For each=keyed
                    key=|(f, n)| (n.name.clone(), *f)
                    children=move |(_, n)| {
                        let drained = matches!(n.state, NodeState::Drained | NodeState::Draining | NodeState::Down);
                        let (kind, verb) = if drained { (ActionKind::Resume, "Resume") } else { (ActionKind::Drain, "Drain") };
                        let name = n.name.clone();
                        let gpus = match (n.gpus_used, n.gpus_total) {
                            (Some(u), Some(t)) => format!("{u} / {t}"),
                            (None, Some(t)) => format!("? / {t}"),
                            _ => "—".into(),
                        };
                        view! {
                            <tr data-test="node-row" data-node=n.name.clone() data-state=n.state.label()>
                                <th scope="row"><a href=units::node_href(&n.name)>{n.name.clone()}</a></th>
                                <td>{n.rack.clone()}</td>
                                <td><span class=format!("badge {}", state_class(n.state)) title=n.raw_state.clone()>{n.state.label()}</span></td>
                                <td class="reason" data-test="node-reason">{n.reason.clone().unwrap_or_default()}</td>
                                <td class="num">{gpus}</td>
                                <td data-test="node-incidents">{n.worst_incident.clone().map(|w| view! {
                                    <a class=format!("badge sev-{w}") href="/alerts">{format!("{} {w}", n.incidents)}</a>
                                })}</td>
                                <td>{n.jobs.iter().map(|j| view! { <a href=format!("/jobs/{j}")>{j.to_string()}</a>" " }).collect_view()}</td>
                                <td>
                                    <button type="button" data-test="node-action"
                                        disabled=move || why.get().is_some() title=move || why.get().unwrap_or("")
                                        on:click=move |_| pending.set(Some(Pending {
                                            kind,
                                            label: name.clone(),
                                            targets: ActionTargets { nodes: vec![name.clone()], ..Default::default() },
                                            reason: String::new(),
                                        }))>
                                        {format!("{verb}…")}
                                    </button>
                                </td>
                            </tr>
                        }
                    }/>
            </tbody>
        </table>
        <Pager state noun="nodes" href=page_href/>
    }
}

/// Preview, reason, confirm, result. Rendered only in the browser (it opens on a click).
#[component]
pub(crate) fn ActionPanel(
    p: Pending,
    pending: RwSignal<Option<Pending>>,
    /// Runs once the result is in (to re-read what the page shows).
    after: Callback<()>,
) -> impl IntoView {
    let Pending {
        kind,
        targets,
        label,
        reason,
    } = p;
    let t2 = targets.clone();
    let preview = LocalResource::new(move || preview_action(kind, t2.clone()));
    let reason = RwSignal::new(reason);
    let t3 = targets.clone();
    let run = Action::new_local(move |r: &Option<String>| run_action(kind, t3.clone(), r.clone()));
    let result = run.value();
    let busy = run.pending();
    // The action as it runs on the server, followed until its end.
    let progress = RwSignal::new(None::<ActionStatus>);
    let lost = RwSignal::new(None::<String>);
    Effect::new(move |_| {
        if let Some(Ok(s)) = result.get() {
            progress.set(Some(s));
            #[cfg(feature = "hydrate")]
            client::follow(progress, lost, after, 0);
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = after;
    let started = move || busy.get() || result.with(|r| r.is_some());
    let close = move || pending.set(None);
    // Every action but a resume says why: a drain's reason goes to Slurm, a requeue's to the
    // audit log.
    let needs_reason = kind != ActionKind::Resume;
    let reason_label = if kind == ActionKind::Drain {
        "Reason (required; stored in Slurm with your name)"
    } else {
        "Reason (required; kept in the audit log with your name)"
    };
    let confirm_text = format!("{} {label}", kind.label());
    let heading = format!("{} {label}: preview", kind.label());
    let panel = NodeRef::<leptos::html::Section>::new();
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let Some(el) = panel.get() {
            let _ = el.focus();
        }
    });
    view! {
        <section class="action-panel" role="dialog" aria-modal="false" aria-labelledby="action-h"
            tabindex="-1" node_ref=panel data-test="action-panel"
            on:keydown=move |ev| if ev.key() == "Escape" { close() }>
            <h2 id="action-h">{heading}</h2>
            <Suspense fallback=|| view! { <p>"Asking the scheduler what this affects…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(pv) => view! { <PreviewView pv/> }.into_any(),
                        Err(e) => view! { <p class="error" role="alert">{format!("No preview: {e}")}</p> }.into_any(),
                    }
                })}
            </Suspense>
            <form class="action-form" on:submit=move |ev| {
                ev.prevent_default();
                let r = reason.get_untracked();
                if needs_reason && r.trim().is_empty() {
                    return;
                }
                run.dispatch(needs_reason.then_some(r));
            }>
                {needs_reason.then(|| view! {
                    <label for="action-reason">{reason_label}</label>
                    <input id="action-reason" data-test="action-reason" type="text" required maxlength="900"
                        prop:value=move || reason.get()
                        on:input=move |ev| reason.set(event_target_value(&ev))/>
                })}
                <div class="buttons">
                    <button type="submit" class="danger" data-test="action-confirm"
                        disabled=started>
                        {confirm_text}
                    </button>
                    <button type="button" data-test="action-cancel" on:click=move |_| close()>
                        {move || if started() { "Close" } else { "Cancel" }}
                    </button>
                </div>
            </form>
            <div role="status" aria-live="polite" data-test="action-result">
                {move || busy.get().then(|| view! { <p>"Recording the action…"</p> })}
                {move || match result.get() {
                    Some(Err(e)) => Some(view! { <p class="error" role="alert">{format!("Not done: {e}")}</p> }),
                    _ => None,
                }}
                {move || progress.get().map(|s| view! { <ActionProgress s/> })}
                {move || lost.get().map(|m| view! { <p class="error" role="alert">{m}</p> })}
            </div>
        </section>
    }
}

/// Each target of an action as far as it has run, and the action's state in words.
#[component]
fn ActionProgress(s: ActionStatus) -> impl IntoView {
    let ended = s.ended();
    let state = match s.state.as_str() {
        "queued" => "Recorded; waiting for the action before it to end.".to_string(),
        "running" => format!(
            "Running on the server: {ended} of {} done. Closing this page does not stop it.",
            s.outcomes.len()
        ),
        "stopped" => format!("Stopped: {}", s.note),
        _ => format!(
            "Done: {ended} of {} verified against the scheduler.",
            s.outcomes.len()
        ),
    };
    view! {
        <p data-test="action-state" data-state=s.state.clone()>{state}</p>
        <ul class="outcomes">
            {s.outcomes.into_iter().map(|o| {
                let words = match o.status.as_str() {
                    "pending" => "waiting".to_string(),
                    "calling" => "calling the scheduler, then reading it back…".to_string(),
                    _ => format!("{} — {}", o.status, o.message),
                };
                view! {
                    <li class=format!("outcome outcome-{}", o.status) data-test="action-outcome" data-status=o.status.clone()>
                        <strong>{o.target.clone()}</strong>": "{words}" "
                        <a href=format!("/audit?target={}", units::url_component(&o.target))>{format!("audit #{}", o.audit_id)}</a>
                    </li>
                }
            }).collect_view()}
        </ul>
    }
}

#[component]
fn PreviewView(pv: Preview) -> impl IntoView {
    let risk = pv
        .work_at_risk_gpu_hours
        .map(|h| format!("{} GPU-hours", units::thousands(h.round() as u64)))
        .unwrap_or_else(|| "unknown".into());
    let jobs = pv.jobs.clone();
    view! {
        <p data-test="preview-summary">{pv.summary.clone()}</p>
        {(!pv.already.is_empty()).then(|| view! {
            <p class="muted">{format!("Already done, nothing to call: {}", pv.already.join(", "))}</p>
        })}
        {(!jobs.is_empty()).then(|| view! {
            <table class="grid compact" data-test="preview-jobs">
                <caption>{format!("Affected jobs: {} on {} GPUs; work at risk {}", pv.jobs.len(), pv.gpus_affected, risk)}</caption>
                <thead><tr>
                    <th scope="col" class="num">"Job"</th><th scope="col">"Name"</th><th scope="col">"User"</th>
                    <th scope="col" class="num">"GPUs"</th><th scope="col" class="num">"Last checkpoint"</th>
                    <th scope="col" class="num">"Work at risk"</th>
                </tr></thead>
                <tbody>
                    {jobs.into_iter().map(|j| view! {
                        <tr>
                            <th scope="row" class="num">{j.id}</th>
                            <td>{j.name}</td>
                            <td>{j.user}</td>
                            <td class="num">{j.gpus}</td>
                            <td class="num">{j.last_checkpoint_age_ms.map(|a| format!("{} ago", units::duration_ms(a))).unwrap_or_else(|| "none known".into())}</td>
                            <td class="num">{j.work_at_risk_gpu_hours.map(|h| format!("{h:.1} GPU-h")).unwrap_or_else(|| "unknown".into())}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        })}
    }
}

#[cfg(feature = "hydrate")]
mod client {
    use super::*;
    use crate::model::UnixMs;
    use std::time::Duration;

    fn local_now() -> UnixMs {
        js_sys::Date::now() as UnixMs
    }

    /// Re-reads the page of the list the URL asks for every poll interval and as soon as the
    /// URL changes, and ticks the clock that ages it.
    pub fn refresh(
        state: RwSignal<NodesView>,
        query: Memo<ListQuery>,
        now: RwSignal<UnixMs>,
        polled_at: RwSignal<UnixMs>,
        age_ms: i64,
        interval_ms: i64,
    ) {
        polled_at.set(local_now() - age_ms.max(0));
        now.set(local_now());
        let clock =
            set_interval_with_handle(move || now.set(local_now()), Duration::from_millis(1000))
                .ok();
        let poll = set_interval_with_handle(
            move || {
                if let Some(q) = query.try_get_untracked() {
                    fetch(state, q, Some((query, polled_at)));
                }
            },
            Duration::from_millis(super::refresh_every(interval_ms) as u64),
        )
        .ok();
        // A filter typed, an order or a page chosen: its rows now, not at the next poll.
        Effect::new(move |seen: Option<()>| {
            let q = query.get();
            if seen.is_some() {
                fetch(state, q, Some((query, polled_at)));
            }
        });
        on_cleanup(move || {
            if let Some(c) = clock {
                c.clear();
            }
            if let Some(p) = poll {
                p.clear();
            }
        });
    }

    /// Reads `q`'s page into `state`. With the URL's query: an answer to a URL the page has
    /// since left is dropped (a slow answer must not undo a newer one), and the poll's age
    /// set.
    fn fetch(
        state: RwSignal<NodesView>,
        q: ListQuery,
        follow: Option<(Memo<ListQuery>, RwSignal<UnixMs>)>,
    ) {
        // The rows held for this query: the server leaves them out if they are the same.
        let have = state
            .try_with_untracked(|s| (s.query == q).then_some(s.rows_hash))
            .flatten();
        leptos::task::spawn_local(async move {
            let Ok(v) = get_nodes_view(q, have).await else {
                return;
            };
            if let Some((query, polled_at)) = follow {
                if query.try_with_untracked(|q| *q != v.query).unwrap_or(true) {
                    return;
                }
                polled_at.try_set(local_now() - (v.server_now_ms - v.polled_ms).max(0));
            }
            let Some(Some(v)) = state.try_with_untracked(|held| super::order::refreshed(held, v))
            else {
                return;
            };
            state.try_set(v);
        });
    }

    /// Follows an action until its end (each read waits on the server for a change), then
    /// runs `after`; gives up after five failed reads in a row, saying so.
    pub fn follow(
        progress: RwSignal<Option<ActionStatus>>,
        lost: RwSignal<Option<String>>,
        after: Callback<()>,
        failures: u32,
    ) {
        leptos::task::spawn_local(async move {
            // The panel may have closed meanwhile: then its signals are gone.
            let Some(Some(cur)) = progress.try_get_untracked() else {
                return;
            };
            if cur.finished() {
                after.run(());
                return;
            }
            let seen = cur.ended();
            match get_action_status(cur.id, seen).await {
                Ok(Some(s)) => {
                    if progress.try_set(Some(s)).is_none() {
                        follow(progress, lost, after, 0);
                    }
                }
                Ok(None) => {
                    lost.try_set(Some(
                        "The server no longer knows this action: see the audit log.".into(),
                    ));
                }
                Err(e) if failures >= 4 => {
                    lost.try_set(Some(format!(
                        "Lost track of it ({e}); it goes on running on the server: see the audit log."
                    )));
                }
                Err(_) => {
                    set_timeout(
                        move || follow(progress, lost, after, failures + 1),
                        Duration::from_secs(2),
                    );
                }
            }
        });
    }

    /// Re-reads the view now (after an action).
    pub fn refetch(state: RwSignal<NodesView>, q: ListQuery) {
        fetch(state, q, None);
    }
}

#[cfg(test)]
mod staleness {
    use super::{refresh_every, stale_after};

    #[test]
    fn stale_after_two_intervals_and_never_within_a_refresh() {
        // Slurm's default poll (5 s): two intervals.
        assert_eq!(stale_after(5_000), 10_000);
        assert_eq!(stale_after(60_000), 120_000);
        // Short intervals: a refresh (every half interval, at least 1 s apart) and its
        // fetch must fit before the mark.
        assert_eq!(stale_after(1_000), 3_000);
        assert_eq!(stale_after(500), 2_500);
        assert_eq!(refresh_every(1_000), 1_000);
        for interval in [500, 1_000, 2_000, 5_000, 30_000] {
            let refresh = refresh_every(interval);
            assert!(
                interval + refresh + 500 < stale_after(interval),
                "{interval}"
            );
        }
    }
}
