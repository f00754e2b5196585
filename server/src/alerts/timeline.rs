//! One incident and its timeline, from what the store kept: its cause's alert (fired,
//! flapped, acknowledged, resolved), the alerts it holds while open, what policies
//! decided on it, and the audited actions that name it (for callers who may read the
//! audit log).

use app::views::{AlertItem, IncidentDetail, TimelineEntry};

use crate::store::{Store, StoreError};

/// Incident `id` (its cause's alert id), or `None` when there is no such alert.
pub async fn detail(
    store: &Store,
    live: &crate::live::Live,
    id: i64,
    with_audit: bool,
) -> Result<Option<IncidentDetail>, StoreError> {
    let Some(cause) = store.alert(id).await? else {
        return Ok(None);
    };
    // Open: as grouped now. A closed incident's children are not kept; its cause is.
    let open = if cause.state == "firing" {
        super::incidents::open(store, live)
            .await?
            .into_iter()
            .find(|i| i.id == id)
    } else {
        None
    };
    let decisions = store.decisions_on(&[id]).await?;
    let audit = if with_audit {
        store.audit_of_incident(id).await?
    } else {
        Vec::new()
    };
    let mut timeline = alert_moments(&cause, true);
    if let Some(i) = &open {
        for a in &i.alerts {
            timeline.extend(alert_moments(a, false));
        }
    }
    timeline.extend(decisions.iter().map(|d| TimelineEntry {
        at_ms: d.at_ms,
        what: format!(
            "policy ({} mode) {}: {}",
            d.mode.as_str(),
            d.outcome,
            d.detail
        ),
        link: Some("/remediation".into()),
    }));
    timeline.extend(audit.iter().map(|a| TimelineEntry {
        at_ms: a.at_ms,
        what: format!(
            "{} ({}) {} {}: {}{}",
            a.user,
            a.role,
            a.action,
            a.target,
            a.status,
            if a.result.is_empty() {
                String::new()
            } else {
                format!(", {}", a.result)
            }
        ),
        link: Some(format!(
            "/audit?target={}",
            app::nav::encode_component(&a.target)
        )),
    }));
    timeline.sort_by_key(|e| e.at_ms);
    Ok(Some(IncidentDetail {
        id,
        open,
        cause,
        timeline,
    }))
}

/// What an alert's row says happened to it.
fn alert_moments(a: &AlertItem, is_cause: bool) -> Vec<TimelineEntry> {
    let mut out = vec![TimelineEntry {
        at_ms: a.started_ms,
        what: format!(
            "{} fired ({}, {} on {}): {}{}",
            if is_cause { "cause" } else { "alert" },
            a.severity,
            a.rule,
            a.subject,
            a.summary,
            if a.flaps > 0 {
                format!(
                    "; came back {} time(s) soon after clearing (flaps)",
                    a.flaps
                )
            } else {
                String::new()
            }
        ),
        link: (!a.link.is_empty()).then(|| a.link.clone()),
    }];
    if let (Some(by), Some(at)) = (&a.acked_by, a.acked_ms) {
        out.push(TimelineEntry {
            at_ms: at,
            what: format!(
                "acknowledged by {by}{}",
                a.ack_note
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
            link: None,
        });
    }
    if let Some(at) = a.no_data_since_ms {
        out.push(TimelineEntry {
            at_ms: at,
            what: format!("{} {}: no data (kept open)", a.rule, a.subject),
            link: None,
        });
    }
    if let Some(at) = a.resolved_ms {
        out.push(TimelineEntry {
            at_ms: at,
            what: format!(
                "{} {} resolved{}",
                a.rule,
                a.subject,
                if is_cause {
                    ": the incident closed"
                } else {
                    ""
                }
            ),
            link: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_alert_row_tells_its_moments_in_order_of_its_fields() {
        let a: app::views::AlertItem = serde_json::from_value(serde_json::json!({
            "id": 4, "rule": "ecc_double_bit", "subject": "node:gpu038", "severity": "critical",
            "summary": "gpu038: double-bit ECC errors on GPU 3", "link": "/nodes/gpu038",
            "state": "resolved", "started_ms": 1000, "resolved_ms": 9000, "acked_by": "op1",
            "acked_ms": 2000, "ack_note": "RMA opened", "silenced_until_ms": null, "flaps": 1
        }))
        .expect("an alert");
        let m = super::alert_moments(&a, true);
        let what: Vec<(i64, &str)> = m.iter().map(|e| (e.at_ms, e.what.as_str())).collect();
        assert_eq!(
            what,
            [
                (1000, "cause fired (critical, ecc_double_bit on node:gpu038): gpu038: double-bit ECC errors on GPU 3; came back 1 time(s) soon after clearing (flaps)"),
                (2000, "acknowledged by op1: RMA opened"),
                (9000, "ecc_double_bit node:gpu038 resolved: the incident closed"),
            ]
        );
        assert_eq!(m[0].link.as_deref(), Some("/nodes/gpu038"));
    }
}
