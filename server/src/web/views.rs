//! The views server functions ask for, built from live state and the store: the nodes and
//! jobs of the last scheduler poll, one node, one job. Storage errors are logged and become
//! words for the user.

use app::views::{JobDetail, NodeDetail, NodesView};

use crate::clock::wall_now_ms;
use crate::live::Live;
use crate::store::Store;

fn node_row(
    n: &crate::scheduler::SchedNode,
    rack: String,
    jobs: Vec<u64>,
    incidents: Option<&(String, u32)>,
) -> app::views::NodeRow {
    app::views::NodeRow {
        incidents: incidents.map_or(0, |i| i.1),
        worst_incident: incidents.map(|i| i.0.clone()),
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

/// What the rows of jobs read besides the poll: why each waits, and the GPUs each holds idle.
struct RowFacts {
    waits: std::sync::Arc<std::collections::HashMap<u64, app::queue::Wait>>,
    idle: Vec<app::queue::IdleHeld>,
}

impl RowFacts {
    fn of(live: &Live) -> RowFacts {
        RowFacts {
            waits: live.waits(),
            idle: idle_of(live),
        }
    }
}

/// The running jobs holding GPUs idle, as of the newest tick.
pub(super) fn idle_of(live: &Live) -> Vec<app::queue::IdleHeld> {
    live.current()
        .map(|t| t.overview.idle.clone())
        .unwrap_or_default()
}

fn job_row(j: &crate::scheduler::SchedJob, facts: &RowFacts) -> app::views::JobRow {
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
        time_limit_ms: j.queue.time_limit_ms,
        wait: facts.waits.get(&j.job.id).cloned(),
        idle: facts.idle.iter().find(|h| h.job == j.job.id).cloned(),
    }
}

/// Nodes and jobs as of the last scheduler poll, or `None` before the first.
pub(super) fn nodes_view(live: &Live) -> Option<NodesView> {
    let s = live.sched()?;
    let inv = live.inventory();
    let racks: std::collections::HashMap<&str, &str> = inv
        .as_ref()
        .map(|i| {
            i.nodes
                .iter()
                .map(|x| (x.name.as_str(), x.rack.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let rack_of = |n: &str| racks.get(n).map(|r| r.to_string()).unwrap_or_default();
    let marks = live.floor_marks();
    let facts = RowFacts::of(live);
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
    Some(NodesView {
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
                    marks.node_incidents.get(&n.name),
                )
            })
            .collect(),
        jobs: s
            .jobs
            .iter()
            .filter(|j| !j.job.state.is_finished())
            .map(|j| job_row(j, &facts))
            .collect(),
        health: s.health.as_ref().map(|h| h.view()),
        ..Default::default()
    })
}

/// One node's page, or `None` if no source knows the node.
pub(super) async fn node_detail(
    live: &Live,
    store: &Store,
    recent: &crate::reliability::Recent,
    name: &str,
) -> Result<Option<NodeDetail>, String> {
    let tick = live.current();
    let tile = tick
        .as_ref()
        .and_then(|t| t.overview.nodes.iter().find(|n| n.name == name).cloned());
    let sched = live.sched();
    let running: Vec<&crate::scheduler::SchedJob> = sched
        .iter()
        .flat_map(|s| s.jobs.iter())
        .filter(|j| {
            j.job.state == app::model::JobState::Running && j.job.nodes.iter().any(|n| n == name)
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
                live.floor_marks().node_incidents.get(name),
            )
        });
    if tile.is_none() && slurm.is_none() {
        return Ok(None);
    }
    let gpus = live
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
    let switches = live
        .latest()
        .and_then(|l| {
            let r = l.readings();
            r.node(name).map(|n| n.switches.clone())
        })
        .unwrap_or_default();
    let xids = store
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
    let lemon = match live.inventory() {
        Some(inv) => match recent.get(store, &inv, live.source_now()).await {
            Ok(r) => r
                .lemons
                .iter()
                .find(|l| l.node == name && l.rma)
                .map(app::server_html::lemon_html),
            Err(e) => {
                tracing::error!(error = %e, "recent reliability failed");
                None
            }
        },
        None => None,
    };
    Ok(Some(NodeDetail {
        me: app::actions::Me {
            user: None,
            role: None,
        },
        name: name.to_string(),
        tile,
        slurm,
        gpus,
        switches_html: (!switches.is_empty()).then(|| app::server_html::switches_html(&switches)),
        jobs: {
            let facts = RowFacts::of(live);
            running.into_iter().map(|j| job_row(j, &facts)).collect()
        },
        xids,
        lemon_html: lemon,
        at_ms,
        published_ms,
        server_now_ms: wall_now_ms(),
        interval_ms,
        incidents: match crate::alerts::incidents::open(store, live).await {
            Ok(v) => v
                .into_iter()
                .filter(|i| i.nodes.iter().any(|n| n == name))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "incidents unavailable for the node page");
                Vec::new()
            }
        },
    }))
}

/// One job's page, or `None` if neither the scheduler nor the history knows it.
pub(super) async fn job_detail(
    live: &Live,
    store: &Store,
    recent: &crate::reliability::Recent,
    rates: &app::reports::Rates,
    id: u64,
) -> Result<Option<JobDetail>, String> {
    let fail = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "job read failed");
        "storage unavailable".to_string()
    };
    let live_job = live
        .sched()
        .and_then(|s| s.jobs.iter().find(|j| j.job.id == id).cloned());
    let stored = store.job(id).await.map_err(fail)?;
    let wait = live.waits().get(&id).cloned();
    let idle = idle_of(live).into_iter().find(|h| h.job == id);
    let time_limit_ms = live_job.as_ref().and_then(|j| j.queue.time_limit_ms);
    let (job, restart_count, reason) = match (live_job, stored) {
        (Some(j), _) => (j.job, j.restart_count, j.state_reason),
        (None, Some(job)) => {
            let n = store.requeue_count(id).await.map_err(fail)?.unwrap_or(0);
            (job, n as u32, None)
        }
        (None, None) => return Ok(None),
    };
    let events = store.job_events(id).await.map_err(fail)?;
    let mut checkpoints = store.checkpoints(id).await.map_err(fail)?;
    checkpoints.sort_by_key(|c| (c.started_ms, c.step));
    let now_ms = live.source_now();
    // Each run: its start, its end, and whether its end lost work.
    let runs: Vec<(i64, Option<i64>, bool)> = crate::timeline::job_runs(&job, &events, now_ms)
        .iter()
        .map(|r| {
            let lost = r.end_state.is_some_and(crate::reports::loses_work);
            (r.start_ms, r.end_ms, lost)
        })
        .collect();
    let (lost, at_risk) = app::views::work_lost_and_at_risk(job.gpus, &runs, &checkpoints, now_ms);
    let last_good = checkpoints
        .iter()
        .filter(|c| c.complete && c.started_ms.saturating_add(c.duration_ms) <= now_ms)
        .max_by_key(|c| c.started_ms.saturating_add(c.duration_ms))
        .cloned();
    // Advice needs the recent rates; without them (no inventory yet, a failing read) the
    // page shows the rest and says the advice is unavailable.
    let checkpoint_advice = match live.inventory() {
        Some(inv) if !checkpoints.is_empty() => match recent.get(store, &inv, now_ms).await {
            Ok(r) => app::reliability::advise(
                job.gpus,
                &checkpoints,
                &r.by_size,
                r.mtbi_hours_per_1000_gpus,
                r.run_gpu_hours,
            ),
            Err(e) => {
                tracing::error!(error = %e, "recent reliability failed");
                None
            }
        },
        _ => None,
    };
    // Its ledger across its runs: the hours since it was first known (a requeue may move
    // the submit time on), read from the rollups.
    let first_ms = events
        .iter()
        .map(|e| e.at_ms)
        .chain([job.submit_ms])
        .min()
        .unwrap_or(job.submit_ms);
    let (booked, booked_from_ms) = store
        .report_total(
            "job",
            &id.to_string(),
            first_ms - first_ms.rem_euclid(3_600_000),
            now_ms + 3_600_000,
        )
        .await
        .map_err(fail)?;
    let ledger = crate::reliability::ledger::badput(&booked);
    // What the ledger covers: the job's GPU-hours by Slurm's times against those Gantry
    // booked, and the hour it began booking them.
    let coverage = app::reliability::JobCoverage {
        first_run_ms: runs.iter().map(|r| r.0).min(),
        held_gh: runs
            .iter()
            .map(|&(s, e, _)| (e.unwrap_or(now_ms).min(now_ms) - s).max(0) as f64)
            .sum::<f64>()
            * f64::from(job.gpus)
            / 3_600_000.0,
        booked_from_ms,
    };
    let energy = (booked.energy_wh > 0.0 || booked.gpu_energy_wh > 0.0).then(|| {
        let u = crate::reports::usage(&booked);
        let c = crate::reports::cost(&u, 0.0, rates);
        app::reports::JobEnergy {
            kwh: u.energy_kwh,
            gpu_kwh: u.gpu_energy_kwh,
            estimated_kwh: u.energy_estimated_kwh,
            cost: c.power,
            currency: rates.currency.clone(),
            co2_kg: c.co2_kg,
        }
    });
    let own = format!("job:{id}");
    let radar: Vec<app::views::AlertItem> = store
        .open_alerts()
        .await
        .map_err(fail)?
        .into_iter()
        .filter(|a| {
            matches!(a.rule.as_str(), "straggler" | "job_hung")
                && (a.subject == own || a.subject.starts_with(&format!("{own}:")))
        })
        .collect();
    let transitions: Vec<app::views::JobTransition> = events
        .into_iter()
        .map(|e| app::views::JobTransition {
            at_ms: e.at_ms,
            state: e.state,
            nodes: e.nodes,
            detail: e.detail,
        })
        .collect();
    Ok(Some(JobDetail {
        me: app::actions::Me {
            user: None,
            role: None,
        },
        job,
        restart_count,
        reason,
        wait,
        idle,
        time_limit_ms,
        history_html: app::server_html::history(&transitions, &checkpoints),
        last_good,
        work_at_risk_gpu_hours: at_risk,
        lost_gpu_hours: lost,
        advice_html: app::server_html::advice(checkpoint_advice),
        radar_html: app::server_html::radar(&radar),
        ledger_html: app::server_html::ledger(Some(&ledger), &coverage),
        energy,
        now_ms,
    }))
}

/// Days the estimates' accuracy looks back.
pub(super) const ESTIMATE_DAYS: i64 = 7;

/// How far Slurm's start estimates were from the starts that followed, per partition, over
/// the last [`ESTIMATE_DAYS`] of the source's time.
pub(super) async fn estimates(
    live: &Live,
    store: &Store,
) -> Result<app::queue::EstimatesView, crate::store::StoreError> {
    let since_ms = live.source_now() - ESTIMATE_DAYS * 86_400_000;
    let runs = store.start_estimates_since(since_ms).await?;
    Ok(app::queue::EstimatesView {
        since_ms,
        partitions: app::queue::accuracy(runs.iter().map(|r| {
            (
                r.partition.as_str(),
                r.first_est_ms,
                r.last_est_ms,
                r.start_ms,
            )
        })),
    })
}
