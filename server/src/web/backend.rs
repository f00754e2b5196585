//! [`LiveBackend`]: the app's [`Backend`], through which server functions read live state
//! and the store and run actions. Errors become words for the user; internals are logged.

use std::sync::Arc;

use app::backend::Backend;
use app::live::Overview;

use super::AppState;
use crate::live::{wall_now_ms, Live};
use crate::store::Store;

/// Server functions see live state, the store and actions only through this.
pub(super) struct LiveBackend {
    live: Arc<Live>,
    actions: Arc<crate::actions::Actions>,
    store: Store,
    rates: Arc<app::reports::Rates>,
}

impl LiveBackend {
    pub(super) fn new(st: &AppState) -> LiveBackend {
        LiveBackend {
            live: Arc::clone(&st.live),
            actions: Arc::clone(&st.actions),
            store: st.store.clone(),
            rates: Arc::clone(&st.rates),
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

fn node_row(n: &crate::scheduler::SchedNode, rack: String, jobs: Vec<u64>) -> app::views::NodeRow {
    app::views::NodeRow {
        name: n.name.clone(),
        rack,
        state: n.state,
        raw_state: n.raw_state.join("+"),
        reason: n.reason.clone(),
        gpus_total: n.gpus_total,
        gpus_used: n.gpus_used,
        jobs,
    }
}

fn job_row(j: &crate::scheduler::SchedJob) -> app::views::JobRow {
    app::views::JobRow {
        id: j.job.id,
        name: j.job.name.clone(),
        user: j.job.user.clone(),
        state: j.job.state,
        nodes: j.job.nodes.clone(),
        gpus: j.job.gpus,
        start_ms: j.job.start_ms,
        restart_count: j.restart_count,
        reason: j.state_reason.clone(),
    }
}

impl Backend for LiveBackend {
    fn overview(&self) -> Option<Arc<Overview>> {
        self.live.current().map(|t| Arc::clone(&t.overview))
    }

    fn nodes_view(&self) -> Option<app::views::NodesView> {
        let s = self.live.sched()?;
        let inv = self.live.inventory();
        let rack_of = |n: &str| {
            inv.as_ref()
                .and_then(|i| i.nodes.iter().find(|x| x.name == n).map(|x| x.rack.clone()))
                .unwrap_or_default()
        };
        let mut jobs_on: std::collections::HashMap<&str, Vec<u64>> = Default::default();
        for j in s
            .jobs
            .iter()
            .filter(|j| j.job.state == app::model::JobState::Running)
        {
            for n in &j.job.nodes {
                jobs_on.entry(n.as_str()).or_default().push(j.job.id);
            }
        }
        Some(app::views::NodesView {
            me: app::actions::Me {
                user: None,
                role: None,
            },
            at_ms: s.at_ms,
            polled_ms: s.polled_ms,
            server_now_ms: wall_now_ms(),
            interval_ms: s.interval_ms,
            racks: inv
                .as_ref()
                .map(|i| i.racks.iter().map(|r| r.name.clone()).collect())
                .unwrap_or_default(),
            nodes: s
                .nodes
                .iter()
                .map(|n| {
                    node_row(
                        n,
                        rack_of(&n.name),
                        jobs_on.get(n.name.as_str()).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
            jobs: s
                .jobs
                .iter()
                .filter(|j| !j.job.state.is_finished())
                .map(job_row)
                .collect(),
        })
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
    ) -> app::backend::BackendFuture<'a, app::actions::ActionResult> {
        Box::pin(async move {
            let caller = crate::auth::Caller {
                user: me.user.clone(),
                role: me.role,
            };
            self.actions
                .run(&caller, kind, t, reason)
                .await
                .map_err(action_message)
        })
    }

    fn node_detail<'a>(
        &'a self,
        name: &'a str,
    ) -> app::backend::BackendFuture<'a, Option<app::views::NodeDetail>> {
        Box::pin(async move {
            let tick = self.live.current();
            let tile = tick
                .as_ref()
                .and_then(|t| t.overview.nodes.iter().find(|n| n.name == name).cloned());
            let sched = self.live.sched();
            let running: Vec<&crate::scheduler::SchedJob> = sched
                .iter()
                .flat_map(|s| s.jobs.iter())
                .filter(|j| {
                    j.job.state == app::model::JobState::Running
                        && j.job.nodes.iter().any(|n| n == name)
                })
                .collect();
            let slurm = sched
                .as_ref()
                .and_then(|s| s.nodes.iter().find(|n| n.name == name))
                .map(|n| {
                    node_row(
                        n,
                        tile.as_ref().map(|t| t.rack.clone()).unwrap_or_default(),
                        running.iter().map(|j| j.job.id).collect(),
                    )
                });
            if tile.is_none() && slurm.is_none() {
                return Ok(None);
            }
            let gpus = self
                .live
                .latest()
                .map(|l| {
                    l.readings()
                        .gpus
                        .iter()
                        .filter(|g| g.node == name)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let xids = self
                .store
                .xids(name)
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "XID read failed");
                    "storage unavailable".to_string()
                })?
                .into_iter()
                .take(50)
                .map(|(gpu, xid, at_ms)| app::views::XidSeen { gpu, xid, at_ms })
                .collect();
            let (at_ms, published_ms, interval_ms) = tick
                .as_ref()
                .map(|t| {
                    (
                        t.overview.at_ms,
                        t.overview.published_ms,
                        t.overview.interval_ms,
                    )
                })
                .unwrap_or((0, 0, 1000));
            Ok(Some(app::views::NodeDetail {
                me: app::actions::Me {
                    user: None,
                    role: None,
                },
                name: name.to_string(),
                tile,
                slurm,
                gpus,
                jobs: running.into_iter().map(job_row).collect(),
                xids,
                at_ms,
                published_ms,
                server_now_ms: wall_now_ms(),
                interval_ms,
            }))
        })
    }

    fn job_detail(
        &self,
        id: u64,
    ) -> app::backend::BackendFuture<'_, Option<app::views::JobDetail>> {
        Box::pin(async move {
            let fail = |e: crate::store::StoreError| {
                tracing::error!(error = %e, "job read failed");
                "storage unavailable".to_string()
            };
            let live_job = self
                .live
                .sched()
                .and_then(|s| s.jobs.iter().find(|j| j.job.id == id).cloned());
            let stored = self.store.job(id).await.map_err(fail)?;
            let (job, restart_count, reason) = match (live_job, stored) {
                (Some(j), _) => (j.job, j.restart_count, j.state_reason),
                (None, Some(job)) => {
                    let n = self
                        .store
                        .requeue_count(id)
                        .await
                        .map_err(fail)?
                        .unwrap_or(0);
                    (job, n as u32, None)
                }
                (None, None) => return Ok(None),
            };
            let events = self.store.job_events(id).await.map_err(fail)?;
            let mut checkpoints = self.store.checkpoints(id).await.map_err(fail)?;
            checkpoints.sort_by_key(|c| (c.started_ms, c.step));
            let now_ms = self.live.source_now();
            // Runs from the transitions: a start, then how it ended.
            let mut runs: Vec<(i64, Option<i64>, bool)> = Vec::new();
            for e in &events {
                use app::model::JobState as S;
                match e.state {
                    S::Running if runs.last().is_none_or(|r| r.1.is_some()) => {
                        runs.push((e.at_ms, None, false));
                    }
                    S::Requeued
                    | S::Failed
                    | S::NodeFail
                    | S::Timeout
                    | S::Completed
                    | S::Cancelled => {
                        if let Some(r) = runs.last_mut().filter(|r| r.1.is_none()) {
                            r.1 = Some(e.at_ms);
                            r.2 = matches!(
                                e.state,
                                S::Requeued | S::Failed | S::NodeFail | S::Timeout
                            );
                        }
                    }
                    _ => {}
                }
            }
            // A run the history missed the start of, still going: it started at the job's start.
            if job.state == app::model::JobState::Running
                && runs.last().is_none_or(|r| r.1.is_some())
            {
                if let Some(s) = job.start_ms {
                    runs.push((s, None, false));
                }
            }
            if job.state != app::model::JobState::Running {
                if let Some(r) = runs.last_mut().filter(|r| r.1.is_none()) {
                    r.1 = job.end_ms.or(Some(now_ms));
                }
            }
            let (lost, at_risk) =
                app::views::work_lost_and_at_risk(job.gpus, &runs, &checkpoints, now_ms);
            let last_good = checkpoints
                .iter()
                .filter(|c| c.complete && c.started_ms + c.duration_ms <= now_ms)
                .max_by_key(|c| c.started_ms + c.duration_ms)
                .cloned();
            Ok(Some(app::views::JobDetail {
                me: app::actions::Me {
                    user: None,
                    role: None,
                },
                job,
                restart_count,
                reason,
                transitions: events
                    .into_iter()
                    .map(|e| app::views::JobTransition {
                        at_ms: e.at_ms,
                        state: e.state,
                        nodes: e.nodes,
                        detail: e.detail,
                    })
                    .collect(),
                checkpoints,
                last_good,
                work_at_risk_gpu_hours: at_risk,
                lost_gpu_hours: lost,
                now_ms,
            }))
        })
    }

    fn report<'a>(
        &'a self,
        q: &'a app::reports::ReportQuery,
    ) -> app::backend::BackendFuture<'a, app::reports::Report> {
        Box::pin(async move {
            let now = self.live.source_now();
            crate::reports::build(&self.store, q, now, &self.rates)
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

    fn alerts_firing(&self) -> u32 {
        self.live.alerts_firing()
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
            if note.len() > 1000 || note.chars().any(char::is_control) {
                return Err("note: at most 1000 characters, no control characters".into());
            }
            let user = me.user.clone().unwrap_or_default();
            match self.store.ack_alert(id, &user, note, wall_now_ms()).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("no alert {id}")),
                Err(e) => {
                    tracing::error!(error = %e, "alert ack failed");
                    Err("storage unavailable".into())
                }
            }
        })
    }

    fn silence_alert(&self, id: i64, minutes: u32) -> app::backend::BackendFuture<'_, ()> {
        Box::pin(async move {
            if !(1..=7 * 24 * 60).contains(&minutes) {
                return Err("minutes: 1 to 10080".into());
            }
            match self
                .store
                .silence_alert(id, wall_now_ms() + i64::from(minutes) * 60_000)
                .await
            {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("no alert {id}")),
                Err(e) => {
                    tracing::error!(error = %e, "alert silence failed");
                    Err("storage unavailable".into())
                }
            }
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
}
