//! `/remediation` (operators and admins): what the policies did, would do and recommend,
//! the rules and their modes, the limits, open breakers and the kill switch. Admins switch
//! the kill switch, change a rule's mode and reset a breaker here (each audited, in force
//! at once without a restart).

use leptos::prelude::*;
use leptos_meta::Title;

use crate::remediation::{Mode, RemediationChange, RemediationView, RemedyDecision};
use crate::units;

#[server(endpoint = "remediation_view")]
pub async fn get_remediation() -> Result<(RemediationView, bool), ServerFnError> {
    // A page rendered on the server calls this in-process, past the route guard: the rule
    // is checked here too.
    let me = crate::backend::me();
    if !me.role.is_some_and(crate::actions::Role::can_act) {
        return Err(ServerFnError::new(
            "remediation needs an operator or admin role",
        ));
    }
    let backend = crate::backend::backend()?;
    let v = backend.remediation().await.map_err(ServerFnError::new)?;
    Ok((v, me.role == Some(crate::actions::Role::Admin)))
}

#[server(endpoint = "admin/remediation_change", input = server_fn::codec::Json)]
pub async fn change_remediation(
    change: RemediationChange,
    note: String,
) -> Result<(), ServerFnError> {
    let me = crate::backend::me();
    let backend = crate::backend::backend()?;
    backend
        .remediation_change(&me, &change, &note)
        .await
        .map_err(ServerFnError::new)
}

#[component]
pub fn RemediationPage() -> impl IntoView {
    let change = ServerAction::<ChangeRemediation>::new();
    let data = Resource::new(move || change.version().get(), |_| get_remediation());
    view! {
        <Title text="Remediation"/>
        <div class="page-head"><h1>"Remediation"</h1></div>
        <p class="muted">
            "Policies act on incidents: observe records what a rule would do, recommend offers it on the incident, execute drains the node as "
            <code>"gantry"</code>" (its reasons start "<code>"gantry:"</code>"), within the limits below. Gantry never resumes a node it did not drain."
        </p>
        {move || change.value().get().and_then(|r| r.err()).map(|e| view! {
            <p class="error" role="alert">{format!("Not changed: {e}")}</p>
        })}
        <Suspense fallback=|| view! { <p class="loading">"Loading the policies…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok((v, admin)) => view! { <Body v admin change/> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show the policies: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn Body(v: RemediationView, admin: bool, change: ServerAction<ChangeRemediation>) -> impl IntoView {
    let send = move |c: RemediationChange| {
        change.dispatch(ChangeRemediation {
            change: c,
            note: String::new(),
        });
    };
    let kill_on = v.kill_switch.is_some();
    let l = v.limits.clone();
    view! {
        <section aria-labelledby="kill-h" class="card">
            <h2 id="kill-h">"Kill switch"</h2>
            {match &v.kill_switch {
                Some(k) => view! {
                    <p class="status-critical" data-test="kill-switch" data-on="true">
                        {format!("On since {} (by {}{}): nothing is executed; observe and recommend go on.",
                            units::utc(k.since_ms), k.by,
                            if k.note.is_empty() { String::new() } else { format!(": {}", k.note) })}
                    </p>
                }.into_any(),
                None => view! {
                    <p data-test="kill-switch" data-on="false">"Off: rules in execute mode may act, within the limits."</p>
                }.into_any(),
            }}
            {admin.then(|| view! {
                <button type="button" data-test="kill-toggle"
                    on:click=move |_| send(RemediationChange::KillSwitch { on: !kill_on })>
                    {if kill_on { "Switch off (allow executions)" } else { "Switch on (stop executions)" }}
                </button>
            })}
        </section>
        <section aria-labelledby="rules-h">
            <h2 id="rules-h">"Rules"</h2>
            <table class="grid" data-test="remediation-rules">
                <thead><tr>
                    <th scope="col">"Incident cause"</th><th scope="col">"Action"</th>
                    <th scope="col">"Mode"</th><th scope="col">"Configured"</th>
                </tr></thead>
                <tbody>
                    {v.rules.into_iter().map(|r| {
                        let cause = r.cause.clone();
                        let id = format!("mode-{}", r.cause);
                        view! {
                            <tr data-test="remediation-rule" data-cause=r.cause.clone()>
                                <th scope="row">{r.cause.clone()}</th>
                                <td>{r.action.clone()}</td>
                                <td>
                                    {if admin {
                                        view! {
                                            <label class="sr-only" for=id.clone()>{format!("Mode of {}", r.cause)}</label>
                                            <select id=id on:change=move |ev| {
                                                if let Some(mode) = Mode::parse(&event_target_value(&ev)) {
                                                    send(RemediationChange::Mode { cause: cause.clone(), mode });
                                                }
                                            }>
                                                {Mode::ALL.into_iter().map(|m| view! {
                                                    <option value=m.as_str() selected=m == r.mode>{m.as_str()}</option>
                                                }).collect_view()}
                                            </select>
                                        }.into_any()
                                    } else {
                                        view! { <span>{r.mode.as_str()}</span> }.into_any()
                                    }}
                                </td>
                                <td>{r.configured.as_str()}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
        <section aria-labelledby="limits-h">
            <h2 id="limits-h">"Limits"</h2>
            <ul data-test="remediation-limits">
                <li>{format!("Per node and cause, one action every {} s.", l.cooldown_seconds)}</li>
                <li>{format!("At most {} executions an hour ({} in the last hour).", l.max_actions_per_hour, v.executed_last_hour)}</li>
                <li>{format!("A breaker trips when more than {:.0}% of a rack's or switch domain's nodes, or {:.0}% of the fleet's, need action within {} min; it stays open until a person resets it.",
                    l.breaker_domain_share * 100.0, l.breaker_fleet_share * 100.0, l.breaker_window_minutes)}</li>
            </ul>
        </section>
        <section aria-labelledby="breakers-h">
            <h2 id="breakers-h">"Open breakers"</h2>
            {if v.breakers.is_empty() {
                view! { <p data-test="no-breakers">"None."</p> }.into_any()
            } else {
                view! {
                    <table class="grid" data-test="remediation-breakers">
                        <thead><tr>
                            <th scope="col">"Domain"</th><th scope="col">"Tripped (UTC)"</th>
                            <th scope="col">"Why"</th>{admin.then(|| view! { <th scope="col">"Reset"</th> })}
                        </tr></thead>
                        <tbody>
                            {v.breakers.into_iter().map(|b| {
                                let domain = b.domain.clone();
                                view! {
                                    <tr data-test="remediation-breaker" data-domain=b.domain.clone()>
                                        <th scope="row">{b.domain.clone()}</th>
                                        <td class="num">{units::utc(b.tripped_ms)}</td>
                                        <td>{b.detail.clone()}</td>
                                        {admin.then(|| view! {
                                            <td><button type="button"
                                                on:click=move |_| send(RemediationChange::ResetBreaker { domain: domain.clone() })>
                                                {format!("Reset {}", b.domain)}
                                            </button></td>
                                        })}
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
        <section aria-labelledby="decisions-h">
            <h2 id="decisions-h">"Decisions"</h2>
            {if v.decisions.is_empty() {
                view! { <p>"No policy has decided anything yet."</p> }.into_any()
            } else {
                view! { <Decisions rows=v.decisions/> }.into_any()
            }}
        </section>
    }
}

#[component]
fn Decisions(rows: Vec<RemedyDecision>) -> impl IntoView {
    view! {
        <table class="grid" data-test="remediation-decisions">
            <caption class="sr-only">"Decisions, newest first"</caption>
            <thead><tr>
                <th scope="col">"When (UTC)"</th><th scope="col" class="num">"Incident"</th>
                <th scope="col">"Node"</th><th scope="col">"Cause"</th><th scope="col">"Mode"</th>
                <th scope="col">"Outcome"</th><th scope="col">"What"</th>
            </tr></thead>
            <tbody>
                {rows.into_iter().map(|d| view! {
                    <tr data-test="remediation-decision" data-outcome=d.outcome.clone()>
                        <td class="num">{units::utc(d.at_ms)}</td>
                        <td class="num">{d.incident}</td>
                        <td><a href=units::node_href(&d.node)>{d.node.clone()}</a></td>
                        <td>{d.cause.clone()}</td>
                        <td>{d.mode.as_str()}</td>
                        <td>{d.outcome.clone()}</td>
                        <td>
                            {d.detail.clone()}
                            {d.action_id.map(|_| view! {
                                " "<a href=format!("/audit?target={}", crate::nav::encode_component(&d.node))>"audit"</a>
                            })}
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
