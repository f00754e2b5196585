//! Incidents into the site's own Alertmanager (`alerts.alertmanager_url`), through its v2
//! API (`POST /api/v2/alerts`), so that its routes, silences and inhibition apply: one
//! Alertmanager alert per open incident, not one per Gantry alert.
//!
//! Alertmanager resolves an alert nobody re-sends once its `endsAt` passes, as it expects
//! of Prometheus: each open incident is sent when it opens or its labels change (a new
//! severity or cause is a new label set: the old one is sent resolved) and again every
//! [`RESEND`], valid for [`VALID_FOR`]; one that closed is sent once more with `endsAt` now.
//! Labels: `alertname` and `cause` (the cause's rule), `incident` (its id), `severity`,
//! `cluster`, and `node` or `rack` where the incident has one. After a restart every open
//! incident is sent afresh; one that closed meanwhile ends at its last `endsAt`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use app::model::UnixMs;
use app::views::Incident;

use super::webhook::rfc3339;

/// How often an open incident is sent again.
pub const RESEND: Duration = Duration::from_secs(60);
/// How long past a sending an incident stays firing in Alertmanager without the next.
pub const VALID_FOR: Duration = Duration::from_secs(4 * 60);

/// The open incidents as the alert task last saw them.
#[derive(Clone, Debug, Default)]
pub struct Open {
    pub cluster: String,
    pub incidents: Vec<Incident>,
}

type Labels = BTreeMap<&'static str, String>;

fn labels(cluster: &str, i: &Incident) -> Labels {
    let mut l = Labels::new();
    l.insert("alertname", i.cause.rule.clone());
    l.insert("cause", i.cause.rule.clone());
    l.insert("incident", i.id.to_string());
    l.insert("severity", i.severity.clone());
    if !cluster.is_empty() {
        l.insert("cluster", cluster.to_string());
    }
    if let [node] = i.nodes.as_slice() {
        l.insert("node", node.clone());
    }
    if let Some(rack) = i.racks.first() {
        l.insert("rack", rack.clone());
    }
    // A job's own incident (idle GPUs, a hang, slow collectives): its owner, so the
    // site's routing can send it to them (`owner=~".+"` to a per-user receiver).
    if let (true, [j]) = (i.cause.subject.starts_with("job:"), i.jobs.as_slice()) {
        l.insert("job", j.id.to_string());
        if !j.user.is_empty() {
            l.insert("owner", j.user.clone());
        }
        if !j.account.is_empty() {
            l.insert("account", j.account.clone());
        }
    }
    l
}

fn alert(
    l: &Labels,
    i: Option<&Incident>,
    starts_ms: UnixMs,
    ends_ms: UnixMs,
) -> serde_json::Value {
    let mut a = serde_json::json!({
        "labels": l,
        "startsAt": rfc3339(starts_ms),
        "endsAt": rfc3339(ends_ms),
    });
    if let Some(i) = i {
        a["annotations"] = serde_json::json!({
            "summary": format!("{}: {}", i.place, i.cause.summary),
            "action": i.action,
            "alerts": (i.alerts.len() + 1).to_string(),
        });
    }
    a
}

/// What was last sent per incident: its labels, when it started, when it was sent.
#[derive(Clone, Debug, Default)]
pub struct Sent(HashMap<i64, (Labels, UnixMs, UnixMs)>);

impl Sent {
    /// The alerts to POST at `now_ms` for `open`, and what will have been sent once they
    /// are delivered (kept only then: a failed delivery is tried again next time).
    pub fn plan(&self, open: &Open, now_ms: UnixMs) -> (Vec<serde_json::Value>, Sent) {
        let resend = RESEND.as_millis() as i64;
        let valid = VALID_FOR.as_millis() as i64;
        let mut out = Vec::new();
        let mut next = Sent::default();
        for i in &open.incidents {
            let l = labels(&open.cluster, i);
            match self.0.get(&i.id) {
                Some((old, _, at)) if *old == l && now_ms - at < resend => {
                    next.0.insert(i.id, (l, i.started_ms, *at));
                    continue;
                }
                Some((old, starts, _)) if *old != l => {
                    out.push(alert(old, None, *starts, now_ms));
                }
                _ => {}
            }
            out.push(alert(&l, Some(i), i.started_ms, now_ms + valid));
            next.0.insert(i.id, (l, i.started_ms, now_ms));
        }
        for (id, (l, starts, _)) in &self.0 {
            if !next.0.contains_key(id) {
                out.push(alert(l, None, *starts, now_ms));
            }
        }
        (out, next)
    }
}

/// Sends `open`'s incidents to `url` (the Alertmanager's base URL) whenever they change,
/// and every [`RESEND`], until `open` closes.
pub async fn run(
    url: String,
    tls: Arc<rustls::ClientConfig>,
    mut open: tokio::sync::watch::Receiver<Open>,
) {
    let endpoint = format!("{}/api/v2/alerts", url.trim_end_matches('/'));
    let mut sent = Sent::default();
    let mut failing = false;
    loop {
        let snapshot = open.borrow_and_update().clone();
        let (batch, next) = sent.plan(&snapshot, crate::clock::wall_now_ms());
        if !batch.is_empty() {
            let body = serde_json::Value::Array(batch);
            match super::webhook::post_json(&endpoint, &body, Duration::from_secs(5), &tls).await {
                Ok(_) => {
                    if failing {
                        tracing::info!("Alertmanager reachable again");
                    }
                    failing = false;
                    sent = next;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "Alertmanager unreachable; incidents are sent again on the next change or within a minute");
                    }
                    failing = true;
                }
            }
        }
        // The next change, or a look every 5 s (a resend due, a failed delivery again).
        tokio::select! {
            changed = open.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMs = 1_795_968_000_000;

    fn incident(id: i64, severity: &str, node: &str) -> Incident {
        serde_json::from_value(serde_json::json!({
            "id": id, "severity": severity, "started_ms": T0, "acked": false,
            "cause": {"id": id, "rule": "xid", "subject": format!("node:{node}:gpu0"),
                "severity": severity, "summary": "XID 48", "link": "", "state": "firing",
                "started_ms": T0, "resolved_ms": null, "acked_by": null, "acked_ms": null,
                "ack_note": null, "silenced_until_ms": null},
            "alerts": [], "place": format!("node {node}"), "place_link": "", "nodes": [node],
            "racks": ["B01"], "jobs": [], "action": "Drain it."
        }))
        .expect("an incident")
    }

    #[test]
    fn a_jobs_own_incident_names_its_owner_for_the_sites_routing() {
        let mut i = incident(9, "warning", "gpu004");
        i.cause.rule = "gpus_idle".into();
        i.cause.subject = "job:4242".into();
        i.jobs = vec![app::views::IncidentJob {
            id: 4242,
            name: "notebook".into(),
            user: "alice".into(),
            account: "research".into(),
            gpus: 8,
            last_checkpoint_ms: None,
            at_risk_gpu_hours: 0.0,
        }];
        let l = labels("c1", &i);
        assert_eq!(l["owner"], "alice");
        assert_eq!(l["account"], "research");
        assert_eq!(l["job"], "4242");
        assert_eq!(l["alertname"], "gpus_idle");
        // A node's incident that hits jobs names no owner: it is the operators'.
        let mut n = incident(10, "critical", "gpu004");
        n.jobs = i.jobs.clone();
        let l = labels("c1", &n);
        assert!(!l.contains_key("owner") && !l.contains_key("job"), "{l:?}");
    }

    #[test]
    fn each_incident_once_then_again_each_minute_and_resolved_when_gone() {
        let open = |v: Vec<Incident>| Open {
            cluster: "c1".into(),
            incidents: v,
        };
        let sent = Sent::default();
        let (batch, sent) = sent.plan(&open(vec![incident(7, "critical", "gpu002")]), T0);
        assert_eq!(batch.len(), 1);
        let a = &batch[0];
        assert_eq!(a["labels"]["incident"], "7");
        assert_eq!(a["labels"]["cause"], "xid");
        assert_eq!(a["labels"]["node"], "gpu002");
        assert_eq!(a["labels"]["rack"], "B01");
        assert_eq!(a["labels"]["cluster"], "c1");
        assert_eq!(a["startsAt"], "2026-11-29T16:00:00Z");
        assert_eq!(a["endsAt"], "2026-11-29T16:04:00Z");
        // Nothing new within the minute; sent again after it.
        let (batch, sent) = sent.plan(&open(vec![incident(7, "critical", "gpu002")]), T0 + 30_000);
        assert!(batch.is_empty());
        let (batch, sent) = sent.plan(&open(vec![incident(7, "critical", "gpu002")]), T0 + 60_000);
        assert_eq!(batch.len(), 1);
        // A new severity: the old label set ends now, the new one starts.
        let (batch, sent) = sent.plan(&open(vec![incident(7, "warning", "gpu002")]), T0 + 61_000);
        let ends: Vec<(&str, &str)> = batch
            .iter()
            .map(|a| {
                (
                    a["labels"]["severity"].as_str().unwrap_or(""),
                    a["endsAt"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            ends,
            [
                ("critical", "2026-11-29T16:01:01Z"),
                ("warning", "2026-11-29T16:05:01Z")
            ]
        );
        // Gone: resolved now, once.
        let (batch, sent) = sent.plan(&open(Vec::new()), T0 + 62_000);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch[0]["endsAt"], "2026-11-29T16:01:02Z");
        let (batch, _) = sent.plan(&open(Vec::new()), T0 + 63_000);
        assert!(batch.is_empty());
    }
}
