//! `/alerts`: the open incidents first (one per failure, critical first, its alerts folded
//! under it, what to do), then what is firing, each linked to what it concerns, with
//! acknowledge (with a note) and silence for operators; then the recent history. And the
//! header's badge.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::actions::{ActionKind, ActionTargets};
use crate::pages::nodes::{ActionPanel, Pending};
use crate::units;
use crate::views::{AlertItem, AlertsView, Incident};

#[server(endpoint = "alerts_view")]
pub async fn get_alerts_view() -> Result<AlertsView, ServerFnError> {
    let backend = crate::backend::backend()?;
    let alerts = backend.alerts(300).await.map_err(ServerFnError::new)?;
    let incidents = backend.incidents().await.map_err(ServerFnError::new)?;
    Ok(AlertsView {
        me: crate::backend::me(),
        incidents,
        server_now_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
        alerts,
    })
}

/// The open incidents, critical first (for `/`'s "Needs action").
#[server(endpoint = "incidents_view")]
pub async fn get_incidents() -> Result<Vec<Incident>, ServerFnError> {
    crate::backend::backend()?
        .incidents()
        .await
        .map_err(ServerFnError::new)
}

/// Alerts firing and not silenced, and the critical incidents among them, for the header.
#[server(endpoint = "alert_count")]
pub async fn get_alert_count() -> Result<(u32, u32), ServerFnError> {
    let b = crate::backend::backend()?;
    Ok((b.alerts_firing(), b.alerts_critical()))
}

#[server(endpoint = "ack_alert", input = server_fn::codec::Json)]
pub async fn ack_alert(id: i64, note: String) -> Result<(), ServerFnError> {
    let me = crate::backend::me();
    crate::backend::backend()?
        .ack_alert(&me, id, &note)
        .await
        .map_err(ServerFnError::new)
}

#[server(endpoint = "silence_alert", input = server_fn::codec::Json)]
pub async fn silence_alert(id: i64, minutes: u32) -> Result<(), ServerFnError> {
    let me = crate::backend::me();
    crate::backend::backend()?
        .silence_alert(&me, id, minutes)
        .await
        .map_err(ServerFnError::new)
}

#[component]
pub fn AlertsPage() -> impl IntoView {
    let data = Resource::new(|| (), |_| get_alerts_view());
    // The remedy an operator opened from an incident, previewed before it runs; outside
    // the list, which is read again once it has run.
    let pending: RwSignal<Option<Pending>> = RwSignal::new(None);
    let after = Callback::new(move |_| data.refetch());
    view! {
        <Title text="Alerts"/>
        <div class="page-head"><h1>"Alerts"</h1></div>
        {move || pending.get().map(|p| view! { <ActionPanel p pending after/> })}
        <Suspense fallback=|| view! { <p class="loading">"Loading alerts…"</p> }>
            {move || Suspend::new(async move {
                match data.await {
                    Ok(v) => view! { <AlertsBody v data pending/> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{format!("Cannot show alerts: {e}")}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn AlertsBody(
    v: AlertsView,
    data: Resource<Result<AlertsView, ServerFnError>>,
    pending: RwSignal<Option<Pending>>,
) -> impl IntoView {
    let can = v.me.can_act();
    let now = v.server_now_ms;
    let (firing, past): (Vec<AlertItem>, Vec<AlertItem>) =
        v.alerts.into_iter().partition(|a| a.state == "firing");
    let ack = Action::new_local(move |(id, note): &(i64, String)| ack_alert(*id, note.clone()));
    let silence = Action::new_local(move |(id, m): &(i64, u32)| silence_alert(*id, *m));
    Effect::new(move |_| {
        if ack.version().get() > 0 || silence.version().get() > 0 {
            data.refetch();
        }
    });
    let failed = move || {
        ack.value()
            .get()
            .and_then(|r| r.err())
            .or_else(|| silence.value().get().and_then(|r| r.err()))
    };
    let incidents = v.incidents;
    view! {
        <p role="status" aria-live="polite">{move || failed().map(|e| format!("Not done: {e}"))}</p>
        <h2 id="incidents-h">{format!("Incidents ({})", incidents.len())}</h2>
        {if incidents.is_empty() {
            view! { <p data-test="incidents-none">"No open incident."</p> }.into_any()
        } else {
            view! {
                <ol class="incidents" aria-labelledby="incidents-h" data-test="incidents">
                    {incidents.into_iter().map(|i| view! { <IncidentRow i can pending/> }).collect_view()}
                </ol>
            }.into_any()
        }}
        <h2 id="firing-h">{format!("Firing ({})", firing.len())}</h2>
        {if firing.is_empty() {
            view! { <p data-test="alerts-none">"Nothing is firing."</p> }.into_any()
        } else {
            view! {
                <table class="grid" aria-labelledby="firing-h" data-test="alerts-firing">
                    <thead><tr>
                        <th scope="col">"Severity"</th><th scope="col">"What"</th><th scope="col">"Since (UTC)"</th>
                        <th scope="col">"Acknowledged"</th><th scope="col">"Actions"</th>
                    </tr></thead>
                    <tbody>
                        {firing.into_iter().map(|a| {
                            let id = a.id;
                            let note = RwSignal::new(String::new());
                            let silenced = a.silenced_until_ms.filter(|u| *u > now);
                            let silenced_by = a.silenced_by.clone().map(|u| format!(" by {u}")).unwrap_or_default();
                            view! {
                                <tr data-test="alert" data-rule=a.rule.clone() data-subject=a.subject.clone()>
                                    <td><span class=format!("badge sev-{}", a.severity)>{a.severity.clone()}</span></td>
                                    <td><a href=a.link.clone()>{a.summary.clone()}</a>
                                        {silenced.map(|u| view! { <span class="muted">{format!(" · silenced until {}{silenced_by}", units::utc(u))}</span> })}
                                        {a.no_data_since_ms.map(|u| view! {
                                            <span class="alert-no-data" data-test="alert-no-data">{format!(" · no data since {}: held open until its readings return", units::utc(u))}</span>
                                        })}
                                        {(a.flaps > 0).then(|| view! {
                                            <span class="muted" data-test="alert-flaps">{format!(" · came back {} time{} after resolving", a.flaps, if a.flaps == 1 { "" } else { "s" })}</span>
                                        })}
                                    </td>
                                    <td class="num">{units::utc(a.started_ms)}</td>
                                    <td data-test="alert-ack">{a.acked_by.clone().map(|u| format!("{u}: {}", a.ack_note.clone().unwrap_or_default())).unwrap_or_default()}</td>
                                    <td>
                                        <form class="inline" on:submit=move |ev| { ev.prevent_default(); ack.dispatch((id, note.get_untracked())); }>
                                            <label class="sr-only" for=format!("note-{id}")>"Note"</label>
                                            <input id=format!("note-{id}") type="text" placeholder="note" maxlength="500" disabled=!can
                                                prop:value=move || note.get() on:input=move |ev| note.set(event_target_value(&ev))/>
                                            <button type="submit" disabled=!can title=if can { "" } else { "Operators acknowledge" }>"Acknowledge"</button>
                                        </form>
                                        <button type="button" disabled=!can on:click=move |_| { silence.dispatch((id, 60)); }>"Silence 1 h"</button>
                                    </td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
        <h2 id="past-h">"Resolved"</h2>
        <table class="grid compact" aria-labelledby="past-h">
            <thead><tr><th scope="col">"What"</th><th scope="col">"From (UTC)"</th><th scope="col">"To (UTC)"</th></tr></thead>
            <tbody>
                {past.into_iter().map(|a| view! {
                    <tr><td><a href=a.link.clone()>{a.summary.clone()}</a></td><td class="num">{units::utc(a.started_ms)}</td>
                    <td class="num">{a.resolved_ms.map(units::utc).unwrap_or_default()}</td></tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}

/// One incident: its cause, the place, what to do, the jobs at risk, and the alerts it
/// holds folded under it. Acknowledged ones say so and are set back.
/// The action an incident offers, with the reason it starts with: drain the node with bad
/// hardware (or a straggler's), drain a leaking rack, requeue a hung job.
pub(crate) fn remedy(i: &Incident) -> Option<Pending> {
    let reason = remedy_reason(i);
    let rule = i.cause.rule.as_str();
    let node = |n: &str| Pending {
        kind: ActionKind::Drain,
        label: n.to_string(),
        targets: ActionTargets {
            nodes: vec![n.to_string()],
            ..Default::default()
        },
        reason: reason.clone(),
    };
    match rule {
        "xid" | "ecc_double_bit" | "remapped_rows" | "nvswitch_fatal" => match i.nodes.as_slice() {
            [n] => Some(node(n)),
            _ => None,
        },
        // `job:ID:NODE:gpuN`
        "straggler" => i.cause.subject.split(':').nth(2).map(node),
        "coolant_leak" => i.racks.first().map(|r| Pending {
            kind: ActionKind::Drain,
            label: format!("rack {r}"),
            targets: ActionTargets {
                rack: Some(r.clone()),
                ..Default::default()
            },
            reason: reason.clone(),
        }),
        "job_hung" => {
            let id = i.cause.subject.strip_prefix("job:")?.parse().ok()?;
            Some(Pending {
                kind: ActionKind::Requeue,
                label: format!("job {id}"),
                targets: ActionTargets {
                    jobs: vec![id],
                    ..Default::default()
                },
                reason,
            })
        }
        _ => None,
    }
}

/// A remedy's reason, filled in from its incident (what a person may type: no control
/// characters, at most 900).
fn remedy_reason(i: &Incident) -> String {
    format!("incident {}: {}", i.id, i.cause.summary)
        .chars()
        .filter(|c| !c.is_control())
        .take(900)
        .collect()
}

/// A remedy's button: opens its preview (operators; others see it disabled).
#[component]
fn RemedyButton(
    p: Pending,
    can: bool,
    pending: RwSignal<Option<Pending>>,
    test: &'static str,
    title: &'static str,
) -> impl IntoView {
    let words = format!("{} {}…", p.kind.label(), p.label);
    view! {
        <button type="button" data-test=test disabled=!can
            title=if can { title } else { "Operators act" }
            on:click=move |_| pending.set(Some(p.clone()))>
            {words}
        </button>
    }
}

/// The second remedy of a node's bad hardware with jobs on it: requeue them, never to run
/// on that node again (Slurm's `ExcNodeList`), so they restart from their last checkpoint
/// elsewhere now rather than die on it.
pub(crate) fn requeue_remedy(i: &Incident) -> Option<Pending> {
    let blamed = match (i.cause.rule.as_str(), i.nodes.as_slice()) {
        ("xid" | "ecc_double_bit" | "remapped_rows" | "nvswitch_fatal", [n]) => n.clone(),
        _ => return None,
    };
    if i.jobs.is_empty() {
        return None;
    }
    let ids: Vec<u64> = i.jobs.iter().map(|j| j.id).collect();
    let reason = remedy_reason(i);
    Some(Pending {
        kind: ActionKind::Requeue,
        label: format!(
            "job {} excluding {blamed}",
            ids.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        targets: ActionTargets {
            jobs: ids,
            exclude: vec![blamed],
            ..Default::default()
        },
        reason,
    })
}

#[component]
fn IncidentRow(i: Incident, can: bool, pending: RwSignal<Option<Pending>>) -> impl IntoView {
    let held = i.alerts.len();
    let fix = remedy(&i);
    let requeue = requeue_remedy(&i);
    let acked = i.cause.acked_by.clone();
    let is_acked = acked.is_some();
    view! {
        <li class="incident" class:acked=is_acked data-test="incident" data-id=i.id
            data-rule=i.cause.rule.clone() data-severity=i.severity.clone()>
            <p>
                <span class=format!("badge sev-{}", i.severity)>{i.severity.clone()}</span>" "
                <a href=i.place_link.clone()>{i.place.clone()}</a>": "{i.cause.summary.clone()}
                <span class="muted">{format!(" · since {}", units::utc(i.started_ms))}</span>
                {acked.map(|u| view! { <span class="muted">{format!(" · acknowledged by {u}")}</span> })}
                " · "<a href=format!("/incidents/{}", i.id) data-test="incident-timeline">"timeline"</a>
            </p>
            <p class="incident-action" data-test="incident-action">{i.action.clone()}
                {fix.map(|p| view! {
                    " "
                    <RemedyButton p can pending test="incident-remedy"
                        title="Preview it first; the reason is filled in from the incident"/>
                })}
                {requeue.map(|p| view! {
                    " "
                    <RemedyButton p can pending test="incident-requeue"
                        title="Preview it first: the jobs restart elsewhere from their last checkpoint"/>
                })}
            </p>
            {i.remedy.as_ref().map(|d| view! {
                <p class="muted" data-test="incident-policy" data-outcome=d.outcome.clone()>
                    {format!("Policy ({} mode): {}. ", d.mode.as_str(), d.detail)}
                    <a href="/remediation">"Remediation"</a>
                </p>
            })}
            {(!i.jobs.is_empty()).then(|| view! {
                <p class="muted">"Jobs hit: "
                    {i.jobs.iter().map(|j| {
                        let ckpt = j.last_checkpoint_ms
                            .map(|t| format!("last checkpoint {}", units::utc(t)))
                            .unwrap_or_else(|| "no checkpoint known".into());
                        view! {
                            <span class="incident-job">
                                <a href=format!("/jobs/{}", j.id)>{format!("{} ({})", j.id, j.name)}</a>
                                {format!(": {} GPUs, {ckpt}, {:.1} GPU-hours at risk; ", j.gpus, j.at_risk_gpu_hours)}
                            </span>
                        }
                    }).collect_view()}
                </p>
            })}
            {(held > 0).then(|| view! {
                <details>
                    <summary>{format!("{held} related alert{}", if held == 1 { "" } else { "s" })}</summary>
                    <ul>
                        {i.alerts.into_iter().map(|a| view! {
                            <li data-test="incident-alert" data-rule=a.rule.clone()>
                                <span class=format!("badge sev-{}", a.severity)>{a.severity.clone()}</span>" "
                                <a href=a.link.clone()>{a.summary.clone()}</a>
                            </li>
                        }).collect_view()}
                    </ul>
                </details>
            })}
        </li>
    }
}

/// The badge's words: critical incidents first, then every alert firing.
fn badge_text(counts: Option<(u32, u32)>) -> String {
    let alerts = |c: u32| format!("{c} alert{} firing", if c == 1 { "" } else { "s" });
    match counts {
        None => "Alerts".to_string(),
        Some((0, _)) => "No alerts".to_string(),
        Some((c, 0)) => alerts(c),
        Some((c, k)) => format!("{k} critical · {}", alerts(c)),
    }
}

/// Alerts firing now, as the header shows them. A live page's stream carries the count
/// with every tick and sets it here; the badge fetches it itself only when no stream has
/// told it for a while (pages without a live stream).
#[derive(Clone, Copy)]
pub struct AlertCount {
    /// Alerts firing, and open critical incidents.
    count: RwSignal<Option<(u32, u32)>>,
    /// When a live stream last told the count (browser clock, ms).
    heard_ms: StoredValue<f64>,
}

impl AlertCount {
    pub fn new() -> AlertCount {
        AlertCount {
            count: RwSignal::new(None),
            heard_ms: StoredValue::new(f64::NEG_INFINITY),
        }
    }

    /// A live stream says `n` alerts are firing (and how many incidents are critical) at
    /// `now_ms`.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub fn heard(&self, n: (u32, u32), now_ms: f64) {
        if self.count.get_untracked() != Some(n) {
            self.count.set(Some(n));
        }
        self.heard_ms.set_value(now_ms);
    }

    /// The count (tracked), once known.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    pub fn get(&self) -> Option<(u32, u32)> {
        self.count.get()
    }

    /// Whether a live stream told the count within the poll period before `now_ms`.
    #[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
    fn heard_since(&self, now_ms: f64) -> bool {
        now_ms - self.heard_ms.get_value() < POLL.as_millis() as f64
    }
}

impl Default for AlertCount {
    fn default() -> Self {
        AlertCount::new()
    }
}

/// How often the badge re-reads the count when no live stream tells it.
const POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// The header's badge: alerts firing now, from a live page's stream, or re-read every 5 s
/// after hydration on other pages.
#[component]
pub fn AlertBadge() -> impl IntoView {
    let count = Resource::new(|| (), |_| get_alert_count());
    let shared = use_context::<AlertCount>().unwrap_or_default();
    let n = shared.count;
    #[cfg(feature = "hydrate")]
    {
        let poll = set_interval_with_handle(
            move || {
                if shared.heard_since(js_sys::Date::now()) {
                    return;
                }
                leptos::task::spawn_local(async move {
                    if let Ok(c) = get_alert_count().await {
                        n.set(Some(c));
                    }
                });
            },
            POLL,
        )
        .ok();
        on_cleanup(move || {
            if let Some(p) = poll {
                p.clear();
            }
        });
    }
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let first = count.await.ok();
                let now = move || n.get().or(first);
                view! {
                    <a href="/alerts" class="alert-badge" data-test="alert-badge"
                        class:firing=move || now().is_some_and(|(c, _)| c > 0)
                        class:critical=move || now().is_some_and(|(_, k)| k > 0)>
                        {move || badge_text(now())}
                    </a>
                }
            })}
        </Suspense>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bad_hardware_with_jobs_offers_a_requeue_that_excludes_the_node() {
        let incident = |rule: &str, jobs: serde_json::Value| -> crate::views::Incident {
            serde_json::from_value(serde_json::json!({
                "id": 7, "severity": "critical", "started_ms": 0, "acked": false,
                "cause": {"id": 7, "rule": rule, "subject": "node:gpu038:gpu3", "severity": "critical",
                    "summary": "gpu038 GPU 3: XID 79", "link": "", "state": "firing",
                    "started_ms": 0, "resolved_ms": null, "acked_by": null, "acked_ms": null,
                    "ack_note": null, "silenced_until_ms": null},
                "alerts": [], "place": "node gpu038", "place_link": "", "nodes": ["gpu038"],
                "racks": ["B02"], "jobs": jobs, "action": "a"
            }))
            .expect("an incident")
        };
        let two = serde_json::json!([
            {"id": 41, "name": "a", "gpus": 8, "last_checkpoint_ms": null, "at_risk_gpu_hours": 1.0},
            {"id": 42, "name": "b", "gpus": 8, "last_checkpoint_ms": null, "at_risk_gpu_hours": 2.0}
        ]);
        let p = super::requeue_remedy(&incident("xid", two.clone())).expect("a requeue");
        assert_eq!(p.kind, super::ActionKind::Requeue);
        assert_eq!(p.targets.jobs, [41, 42]);
        assert_eq!(p.targets.exclude, ["gpu038"]);
        assert_eq!(p.label, "job 41, 42 excluding gpu038");
        assert_eq!(p.reason, "incident 7: gpu038 GPU 3: XID 79");
        // No jobs, or not the node's hardware: nothing to requeue.
        assert!(super::requeue_remedy(&incident("xid", serde_json::json!([]))).is_none());
        assert!(super::requeue_remedy(&incident("thermal_throttling", two)).is_none());
    }

    #[test]
    fn an_incident_offers_its_remedy_with_the_reason_filled_in() {
        let incident = |rule: &str, subject: &str, nodes: &[&str]| -> crate::views::Incident {
            serde_json::from_value(serde_json::json!({
                "id": 12, "severity": "critical", "started_ms": 0, "acked": false,
                "cause": {"id": 12, "rule": rule, "subject": subject, "severity": "critical",
                    "summary": "gpu038: double-bit ECC errors on GPU 3", "link": "", "state": "firing",
                    "started_ms": 0, "resolved_ms": null, "acked_by": null, "acked_ms": null,
                    "ack_note": null, "silenced_until_ms": null},
                "alerts": [], "place": "p", "place_link": "", "nodes": nodes,
                "racks": ["B02"], "jobs": [], "action": "a"
            }))
            .expect("an incident")
        };
        let p =
            super::remedy(&incident("ecc_double_bit", "node:gpu038", &["gpu038"])).expect("drain");
        assert_eq!(p.kind, super::ActionKind::Drain);
        assert_eq!(p.targets.nodes, ["gpu038"]);
        assert_eq!(
            p.reason,
            "incident 12: gpu038: double-bit ECC errors on GPU 3"
        );
        let p = super::remedy(&incident(
            "straggler",
            "job:7:gpu004:gpu1",
            &["gpu004", "gpu005"],
        ))
        .expect("drain");
        assert_eq!(p.targets.nodes, ["gpu004"]);
        let p = super::remedy(&incident("coolant_leak", "rack:B02", &["gpu001"])).expect("rack");
        assert_eq!(p.targets.rack.as_deref(), Some("B02"));
        let p = super::remedy(&incident("job_hung", "job:1042", &[])).expect("requeue");
        assert_eq!(
            (p.kind, p.targets.jobs.as_slice()),
            (super::ActionKind::Requeue, &[1042][..])
        );
        assert!(super::remedy(&incident("rack_power_high", "rack:B02", &[])).is_none());
    }

    #[test]
    fn the_badge_says_how_many_are_critical_first() {
        assert_eq!(super::badge_text(None), "Alerts");
        assert_eq!(super::badge_text(Some((0, 0))), "No alerts");
        assert_eq!(super::badge_text(Some((1, 0))), "1 alert firing");
        assert_eq!(
            super::badge_text(Some((9, 2))),
            "2 critical · 9 alerts firing"
        );
    }
}
