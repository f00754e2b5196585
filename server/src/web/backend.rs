//! [`LiveBackend`]: the app's [`Backend`], through which server functions read live state
//! and the store and run actions. Errors become words for the user; internals are logged.

use std::sync::Arc;

use app::backend::Backend;
use app::live::Overview;

use super::AppState;
use crate::clock::wall_now_ms;
use crate::live::Live;
use crate::store::Store;

/// Server functions see live state, the store and actions only through this.
pub(super) struct LiveBackend {
    live: Arc<Live>,
    actions: Arc<crate::actions::Actions>,
    store: Store,
    rates: Arc<app::reports::Rates>,
    policies: Arc<crate::alerts::remediation::Policies>,
    recent: Arc<crate::reliability::Recent>,
    /// The single sign-on button's words, when `[auth.oidc]` is set.
    sso_label: Option<String>,
}

impl LiveBackend {
    pub(super) fn new(st: &AppState) -> LiveBackend {
        LiveBackend {
            live: Arc::clone(&st.live),
            actions: Arc::clone(&st.actions),
            store: st.store.clone(),
            rates: Arc::clone(&st.rates),
            policies: Arc::clone(&st.policies),
            recent: Arc::clone(&st.recent),
            sso_label: st.oidc.as_ref().map(|p| p.label().to_string()),
        }
    }

    /// An audited acknowledgement or silence from a page, in words for the operator.
    async fn mute(
        &self,
        me: &app::actions::Me,
        id: i64,
        what: super::alerts::Mute<'_>,
    ) -> Result<(), String> {
        let (Some(user), Some(role)) = (&me.user, me.role) else {
            return Err("sign in first".into());
        };
        match super::alerts::mute(&self.store, user, role, id, what).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(format!("no alert {id}")),
            Err(e) => {
                if let super::error::ApiError::Storage(inner) = &e {
                    tracing::error!(error = %inner, "alert change failed");
                }
                Err(e.to_string())
            }
        }
    }
}

/// An action error in words for the operator; storage internals are logged, not shown.
fn action_message(e: crate::actions::ActionError) -> String {
    match e {
        crate::actions::ActionError::Audit(inner) => {
            tracing::error!(error = %inner, "audit write failed");
            "the audit log cannot be written, so nothing was done".into()
        }
        other => other.to_string(),
    }
}

impl Backend for LiveBackend {
    fn overview(&self) -> Option<Arc<Overview>> {
        self.live.current().map(|t| Arc::clone(&t.overview))
    }

    fn nodes_view(&self) -> Option<app::views::NodesView> {
        super::views::nodes_view(&self.live)
    }

    fn preview<'a>(
        &'a self,
        kind: app::actions::ActionKind,
        t: &'a app::actions::ActionTargets,
    ) -> app::backend::BackendFuture<'a, app::actions::Preview> {
        Box::pin(async move { self.actions.preview(kind, t).await.map_err(action_message) })
    }

    fn act<'a>(
        &'a self,
        me: &'a app::actions::Me,
        kind: app::actions::ActionKind,
        t: &'a app::actions::ActionTargets,
        reason: Option<&'a str>,
    ) -> app::backend::BackendFuture<'a, app::actions::ActionStatus> {
        Box::pin(async move {
            let caller = crate::auth::Caller {
                user: me.user.clone(),
                role: me.role,
            };
            self.actions
                .submit(&caller, kind, t, reason)
                .await
                .map_err(action_message)
        })
    }

    fn action_status(
        &self,
        id: i64,
        seen: usize,
        wait_ms: u64,
    ) -> app::backend::BackendFuture<'_, Option<app::actions::ActionStatus>> {
        Box::pin(async move {
            // A follower's poll, bounded well inside the request timeout.
            let wait = std::time::Duration::from_millis(wait_ms.min(20_000));
            self.actions.status(id, seen, wait).await.map_err(|e| {
                tracing::error!(error = %e, "action status read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn node_detail<'a>(
        &'a self,
        name: &'a str,
    ) -> app::backend::BackendFuture<'a, Option<app::views::NodeDetail>> {
        Box::pin(super::views::node_detail(
            &self.live,
            &self.store,
            &self.recent,
            name,
        ))
    }

    fn job_detail(
        &self,
        id: u64,
    ) -> app::backend::BackendFuture<'_, Option<app::views::JobDetail>> {
        Box::pin(super::views::job_detail(
            &self.live,
            &self.store,
            &self.recent,
            &self.rates,
            id,
        ))
    }

    fn report<'a>(
        &'a self,
        q: &'a app::reports::ReportQuery,
    ) -> app::backend::BackendFuture<'a, app::reports::Report> {
        Box::pin(async move {
            let now = self.live.source_now();
            crate::reports::build(
                &self.store,
                q,
                now,
                &self.rates,
                super::reports::gpus_of(&self.live),
            )
            .await
            .map_err(|e| match e {
                crate::reports::ReportError::Query(m) => m,
                other => {
                    tracing::error!(error = %other, "report failed");
                    "the report cannot be computed now (storage unavailable)".into()
                }
            })
        })
    }

    fn reliability<'a>(
        &'a self,
        q: &'a app::reports::ReportQuery,
    ) -> app::backend::BackendFuture<'a, app::reliability::Reliability> {
        Box::pin(async move {
            match super::reliability::answer(&self.live, &self.store, q).await {
                Ok((mut r, _, _)) => {
                    // The page's charts inline, so their text takes the page's colour (an
                    // image's `currentColor` is black on the dark page).
                    let window = (r.from_ms, r.to_ms);
                    r.charts = crate::charts::LedgerChartKind::ALL
                        .into_iter()
                        .filter_map(|k| match crate::charts::ledger_svg(k, &r.ledger, window) {
                            Ok(svg) => Some(app::reports::ReportChart {
                                name: k.name().to_string(),
                                title: k.title(&r.ledger, window),
                                svg,
                            }),
                            Err(e) => {
                                tracing::error!(error = %e, chart = k.name(), "reliability chart failed");
                                None
                            }
                        })
                        .collect();
                    Ok(r)
                }
                Err(super::error::ApiError::BadRequest(m)) => Err(m),
                Err(e) => {
                    // Logged once here; the page gets the words only.
                    tracing::error!(error = ?e, "reliability failed");
                    Err(e.to_string())
                }
            }
        })
    }

    fn timeline(
        &self,
        hours: u32,
        end_ms: Option<i64>,
        group: app::timeline::Grouping,
    ) -> app::backend::BackendFuture<'_, app::timeline::TimelineData> {
        Box::pin(async move {
            let inv = self.live.inventory().ok_or("no inventory yet")?;
            let now = self.live.source_now();
            let hours = hours.clamp(1, 168);
            let to = end_ms.unwrap_or(now).min(now);
            let from = to - i64::from(hours) * 3_600_000;
            // Runs that started up to 7 days before the window may still be in it.
            let events = self
                .store
                .job_events_between(from - 7 * 86_400_000, to)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "timeline read failed");
                    "storage unavailable".to_string()
                })?;
            let runs = crate::timeline::runs(&events);
            let node_events = self
                .store
                .node_events_between(from - 7 * 86_400_000, to)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "timeline read failed");
                    "storage unavailable".to_string()
                })?;
            let spans = crate::timeline::node_spans(&node_events, to);
            let names: std::collections::HashMap<u64, String> = self
                .live
                .sched()
                .map(|s| {
                    s.jobs
                        .iter()
                        .map(|j| (j.job.id, j.job.name.clone()))
                        .collect()
                })
                .unwrap_or_default();
            Ok(crate::timeline::data(
                &inv, group, &runs, &names, &spans, from, to, now,
            ))
        })
    }

    fn estimates(&self) -> app::backend::BackendFuture<'_, app::queue::EstimatesView> {
        Box::pin(async move {
            super::views::estimates(&self.live, &self.store)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "start estimates read failed");
                    "storage unavailable".to_string()
                })
        })
    }

    fn job_history<'a>(
        &'a self,
        f: &'a app::views::JobFilter,
    ) -> app::backend::BackendFuture<'a, (Vec<app::model::Job>, u64)> {
        Box::pin(async move {
            self.store.jobs_filtered(f).await.map_err(|e| {
                tracing::error!(error = %e, "job history read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn alerts(&self, limit: u32) -> app::backend::BackendFuture<'_, Vec<app::views::AlertItem>> {
        Box::pin(async move {
            self.store.alerts(limit).await.map_err(|e| {
                tracing::error!(error = %e, "alerts read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn incidents(&self) -> app::backend::BackendFuture<'_, Vec<app::views::Incident>> {
        Box::pin(async move {
            crate::alerts::incidents::open(&self.store, &self.live)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "incidents read failed");
                    "storage unavailable".to_string()
                })
        })
    }

    fn incident<'a>(
        &'a self,
        me: &'a app::actions::Me,
        id: i64,
    ) -> app::backend::BackendFuture<'a, Option<app::views::IncidentDetail>> {
        Box::pin(async move {
            crate::alerts::timeline::detail(&self.store, &self.live, id, me.can_act())
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "incident read failed");
                    "storage unavailable".to_string()
                })
        })
    }

    fn alerts_firing(&self) -> u32 {
        self.live.alerts_firing()
    }

    fn alerts_critical(&self) -> u32 {
        self.live.alerts_critical()
    }

    fn ack_alert<'a>(
        &'a self,
        me: &'a app::actions::Me,
        id: i64,
        note: &'a str,
    ) -> app::backend::BackendFuture<'a, ()> {
        Box::pin(async move {
            if !me.can_act() {
                return Err("operators acknowledge alerts".into());
            }
            self.mute(me, id, super::alerts::Mute::Ack { note }).await
        })
    }

    fn silence_alert<'a>(
        &'a self,
        me: &'a app::actions::Me,
        id: i64,
        minutes: u32,
    ) -> app::backend::BackendFuture<'a, ()> {
        Box::pin(async move {
            if !me.can_act() {
                return Err("operators silence alerts".into());
            }
            self.mute(me, id, super::alerts::Mute::Silence { minutes, note: "" })
                .await
        })
    }

    fn remediation(&self) -> app::backend::BackendFuture<'_, app::remediation::RemediationView> {
        Box::pin(async move {
            crate::alerts::remediation::view(&self.store, &self.policies)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "remediation read failed");
                    "storage unavailable".to_string()
                })
        })
    }

    fn remediation_change<'a>(
        &'a self,
        me: &'a app::actions::Me,
        change: &'a app::remediation::RemediationChange,
        note: &'a str,
    ) -> app::backend::BackendFuture<'a, ()> {
        Box::pin(async move {
            let (Some(user), Some(role)) = (&me.user, me.role) else {
                return Err("sign in first".into());
            };
            if role != app::actions::Role::Admin {
                return Err("admins change remediation policies".into());
            }
            use crate::alerts::remediation::ChangeError;
            crate::alerts::remediation::change(
                &self.store,
                &self.policies,
                user,
                role,
                change,
                note,
            )
            .await
            .map_err(|e| match e {
                ChangeError::Store(inner) => {
                    tracing::error!(error = %inner, "remediation change failed");
                    "storage unavailable".to_string()
                }
                other => other.to_string(),
            })
        })
    }

    fn audit<'a>(
        &'a self,
        f: &'a app::actions::AuditFilter,
    ) -> app::backend::BackendFuture<'a, Vec<app::actions::AuditEntry>> {
        Box::pin(async move {
            self.store.audit(f).await.map_err(|e| {
                tracing::error!(error = %e, "audit read failed");
                "storage unavailable".to_string()
            })
        })
    }

    fn single_sign_on(&self) -> Option<String> {
        self.sso_label.clone()
    }

    fn admin_view(&self) -> app::backend::BackendFuture<'_, app::actions::AdminView> {
        Box::pin(async move {
            let now = wall_now_ms();
            let fail = |e: crate::store::StoreError| {
                tracing::error!(error = %e, "admin view read failed");
                "storage unavailable".to_string()
            };
            Ok(app::actions::AdminView {
                users: self.store.users(now).await.map_err(fail)?,
                sessions: self.store.sessions(now).await.map_err(fail)?,
            })
        })
    }
}
