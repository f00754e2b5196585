//! The alert task: on every published tick, evaluates the rules on what `Live` and the store
//! know, lets the lifecycle (`lifecycle.rs`) say what fires, reopens, resolves or lacks
//! readings, records that, queues the webhooks and keeps the header's badge count.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use app::model::{JobState, UnixMs};

use super::lifecycle::{Lifecycle, Step};
use super::rules::{evaluate, has_data, AlertConfig, Condition, Facts, RuleState};
use super::webhook::{deliver, Delivery};
use crate::scheduler::SchedJob;

/// What the task needs from the rest of the server.
pub struct AlertTask {
    pub cfg: AlertConfig,
    pub live: Arc<crate::live::Live>,
    pub store: crate::store::Store,
    pub actions: Arc<crate::actions::Actions>,
    /// `[remediation]`: what the policies do about incidents.
    pub policies: Arc<super::remediation::Policies>,
    /// Verifies `https://` webhook receivers ([`crate::tls::client_config`]).
    pub tls: Arc<rustls::ClientConfig>,
    /// How long alerts found open at start (fired by a previous process or leader) stay
    /// open though their condition is not seen: until then it may be unknown rather than
    /// false (no scrape yet, a target's failures counted afresh), and resolving it would
    /// send a false resolution and, soon after, a second firing.
    pub settle: Duration,
}

/// Evaluates the rules on every published tick until shutdown.
pub async fn run(task: AlertTask, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let AlertTask {
        cfg,
        live,
        store,
        actions,
        policies,
        tls,
        settle,
    } = task;
    let mut remedy = super::remediation::Remediation::new(policies, store.clone(), actions);
    let (tx, rx) = tokio::sync::mpsc::channel::<Delivery>(1024);
    // The open incidents, for the site's Alertmanager when one is configured.
    let (incidents_tx, incidents_rx) =
        tokio::sync::watch::channel(super::alertmanager::Open::default());
    let notifier = cfg.alertmanager_url.clone().map(|url| {
        tokio::spawn(super::alertmanager::run(
            url,
            Arc::clone(&tls),
            incidents_rx,
        ))
    });
    let delivery = tokio::spawn(deliver(cfg.clone(), tls, store.clone(), rx));
    let mut ticks = live.subscribe();
    // Rows an older version stored with numbers out of range are skipped by every query;
    // said once here, not every tick.
    match store.rows_out_of_range().await {
        Ok((0, 0)) => {}
        Ok((checkpoints, nccl)) => tracing::warn!(
            checkpoints,
            nccl,
            "stored rows with numbers out of range are skipped (written before ingest checked them)"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot count stored rows out of range"),
    }
    let mut state = RuleState::default();
    let mut life = Lifecycle::default();
    // Open alerts silenced, id -> until (refreshed every tick from the store).
    let mut silenced_until: HashMap<i64, UnixMs> = HashMap::new();
    // Open alerts are loaded from the store, so a restart (or a new leader) resumes them.
    match store.open_alerts().await {
        Ok(v) => {
            for a in v {
                if let Some(u) = a.silenced_until_ms {
                    silenced_until.insert(a.id, u);
                }
                state.seed(static_rule(&a.rule), &a.subject);
                life.adopt(&a);
            }
        }
        Err(e) => tracing::error!(error = %e, "cannot load open alerts"),
    }
    let started = std::time::Instant::now();
    let fire = Fire {
        store: &store,
        tx: &tx,
    };
    loop {
        let tick = tokio::select! {
            _ = shutdown.changed() => break,
            t = ticks.recv() => match t {
                Ok(t) => t,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(_) => break,
            },
        };
        let ov = &tick.overview;
        let sched = live.sched();
        let latest = live.latest();
        let targets = live.targets();
        let jobs: &[SchedJob] = sched.as_ref().map(|s| s.jobs.as_slice()).unwrap_or(&[]);
        let running: Vec<u64> = jobs
            .iter()
            .filter(|j| j.job.state == JobState::Running)
            .map(|j| j.job.id)
            .collect();
        let (nccl, mut last_checkpoint_ms) = match store.alert_facts(&running).await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "alert facts unavailable this tick");
                (HashMap::new(), HashMap::new())
            }
        };
        // Checkpoints noted in memory count too: the store writer may lag behind the source.
        super::incidents::with_noted(&mut last_checkpoint_ms, live.last_checkpoints(), |j| {
            running.contains(&j)
        });
        let inventory = live.inventory();
        let facts = Facts {
            readings: latest.as_ref().map(|l| l.readings()),
            jobs,
            inventory: inventory.as_deref(),
            nodes: sched.as_ref().map(|s| s.nodes.as_slice()).unwrap_or(&[]),
            targets: &targets,
            nccl,
            last_checkpoint_ms,
            health: sched
                .as_ref()
                .and_then(|s| s.health.as_deref())
                .filter(|h| !h.stale_at(crate::clock::wall_now_ms()))
                .map(|h| &h.health),
        };
        let now_conds = evaluate(&cfg, ov, &facts, &mut state);
        let wall = crate::clock::wall_now_ms();
        // Alerts found open at start (fired by a previous process or leader) stay open
        // while the task settles, though their condition is not seen.
        let settling = started.elapsed() < settle;
        let steps = life.step(&cfg, ov.at_ms, now_conds, settling, |rule, subject| {
            has_data(rule, subject, &facts)
        });
        for step in steps {
            match step {
                Step::Fire(c) => {
                    if let Some(id) = fire.new_alert(&c, wall, &mut silenced_until).await {
                        life.opened(&c, id, ov.at_ms);
                    }
                }
                Step::Reopen { id, cond } => match store.reopen_alert(id, &cond.summary).await {
                    Ok(Some(silenced)) => {
                        tracing::info!(rule = cond.rule, subject = %cond.subject, id, "alert firing again (a flap)");
                        fire.announce(id, &cond, silenced, wall, &mut silenced_until)
                            .await;
                        life.opened(&cond, id, ov.at_ms);
                    }
                    // Not resolved any more (another row is open): as any new firing.
                    Ok(None) => {
                        if let Some(id) = fire.new_alert(&cond, wall, &mut silenced_until).await {
                            life.opened(&cond, id, ov.at_ms);
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "alert could not be reopened"),
                },
                Step::Summary { id, summary } => {
                    if let Err(e) = store.set_alert_summary(id, &summary).await {
                        tracing::warn!(error = %e, "alert's new summary not recorded");
                    }
                }
                Step::NoData { id, missing } => {
                    if let Err(e) = store.set_alert_no_data(id, missing.then_some(wall)).await {
                        tracing::warn!(error = %e, "alert's no-data mark not recorded");
                    }
                }
                Step::Resolve {
                    id,
                    key: (rule, subject),
                } => {
                    if let Err(e) = store.resolve_alert(id, wall).await {
                        tracing::error!(error = %e, "alert could not be resolved");
                        continue;
                    }
                    // Silenced: its resolution is not news either.
                    if silenced_until.remove(&id).is_some_and(|u| u > wall) {
                        continue;
                    }
                    let _ = tx.try_send(Delivery {
                        alert_id: id,
                        event: "resolved",
                        cond: Condition {
                            rule: static_rule(&rule),
                            summary: format!("{rule} on {subject} resolved"),
                            subject,
                            severity: "info",
                            link: String::new(),
                            drain_node: None,
                        },
                        at_ms: wall,
                    });
                }
            }
        }
        // The badge counts what is firing and not silenced.
        match store.open_alerts().await {
            Ok(v) => {
                // Silenced or not, an open radar alert is a fact the floor shows.
                let (stragglers, hung) = crate::live::FloorMarks::radar_of(
                    v.iter().map(|a| (a.rule.as_str(), a.subject.as_str())),
                );
                live.set_radar_marks(stragglers, hung);
                silenced_until = v
                    .iter()
                    .filter_map(|a| a.silenced_until_ms.map(|u| (a.id, u)))
                    .collect();
                let unsilenced: Vec<app::views::AlertItem> = v
                    .into_iter()
                    .filter(|a| a.silenced_until_ms.is_none_or(|u| u <= wall))
                    .collect();
                live.set_alerts_firing(unsilenced.len() as u32);
                let incidents = super::incidents::group(
                    unsilenced,
                    &super::incidents::Context {
                        inventory: facts.inventory,
                        targets: facts.targets,
                        jobs: facts.jobs,
                        last_checkpoint_ms: &facts.last_checkpoint_ms,
                        now_ms: ov.at_ms,
                    },
                );
                live.set_alerts_critical(
                    incidents
                        .iter()
                        .filter(|i| i.severity == "critical")
                        .count() as u32,
                );
                live.set_incident_marks(&incidents);
                remedy.tick(&incidents, facts.nodes, facts.inventory).await;
                if notifier.is_some() {
                    let cluster = ov.cluster.clone();
                    incidents_tx.send_if_modified(|o| {
                        let changed = o.incidents != incidents || o.cluster != cluster;
                        if changed {
                            *o = super::alertmanager::Open { cluster, incidents };
                        }
                        changed
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "open alerts unavailable"),
        }
    }
    drop(tx);
    drop(incidents_tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), delivery).await;
    if let Some(n) = notifier {
        let _ = tokio::time::timeout(Duration::from_secs(5), n).await;
    }
}

/// Records and announces a firing: its webhook (unless silenced).
struct Fire<'a> {
    store: &'a crate::store::Store,
    tx: &'a tokio::sync::mpsc::Sender<Delivery>,
}

impl Fire<'_> {
    /// A new alert for `c`; its id, or `None` if the store could not record it (the
    /// condition fires again at the next evaluation).
    async fn new_alert(
        &self,
        c: &Condition,
        wall: UnixMs,
        silenced_until: &mut HashMap<i64, UnixMs>,
    ) -> Option<i64> {
        match self.store.fire_alert(&c.as_new_alert(), wall).await {
            Ok((id, silenced)) => {
                tracing::info!(rule = c.rule, subject = %c.subject, id, "alert firing");
                self.announce(id, c, silenced, wall, silenced_until).await;
                Some(id)
            }
            Err(e) => {
                tracing::error!(error = %e, "alert could not be recorded");
                None
            }
        }
    }

    /// Alert `id` fires for `c`: a silence on it (its rule and subject) means recorded and
    /// shown, not sent.
    async fn announce(
        &self,
        id: i64,
        c: &Condition,
        silenced: Option<UnixMs>,
        wall: UnixMs,
        silenced_until: &mut HashMap<i64, UnixMs>,
    ) {
        if let Some(until) = silenced.filter(|u| *u > wall) {
            tracing::info!(rule = c.rule, subject = %c.subject, silenced_until_ms = until, "alert silenced");
            silenced_until.insert(id, until);
        } else {
            let _ = self.tx.try_send(Delivery {
                alert_id: id,
                event: "firing",
                cond: c.clone(),
                at_ms: wall,
            });
        }
    }
}

/// Whether `rule` is one the rules can fire.
pub fn is_rule(rule: &str) -> bool {
    static_rule(rule) != "unknown"
}

fn static_rule(rule: &str) -> &'static str {
    const RULES: [&str; 28] = [
        "coolant_leak",
        "job_hung",
        "straggler",
        "nvlink_switch_tray_down",
        "nvlink_links_down",
        "nvswitch_fatal",
        "nvswitch_hot",
        "power_shelf_down",
        "power_shelf_degraded",
        "layout_disagrees",
        "coolant_leak_warning",
        "coolant_flow_low",
        "coolant_delta_t_high",
        "ecc_double_bit",
        "xid",
        "thermal_throttling",
        "inlet_over_limit",
        "rack_power_over_limit",
        "rack_power_high",
        "node_not_responding",
        "target_down",
        "nccl_latency",
        "checkpoint_overdue",
        "gpus_idle",
        "backfill_slow",
        "agent_queue_high",
        "remapped_rows",
        "pcie_replays",
    ];
    RULES.into_iter().find(|r| *r == rule).unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    /// Every rule the rules can fire is one `static_rule` knows, or its resolution would be
    /// delivered (and a restart would seed it) as `unknown`. Reads every source file under
    /// `alerts/rules/` (the rules' tests aside) for `rule: "…"` and the names a rule picks
    /// between (`rule: if … { "…" } else { "…" }`).
    #[test]
    fn every_rule_the_rules_fire_is_known() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/alerts/rules");
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .expect("alerts/rules")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .filter(|p| p.file_name().is_some_and(|n| n != "tests.rs"))
            .collect();
        files.sort();
        let mut names = std::collections::BTreeSet::new();
        let mut with_rules = 0;
        for f in &files {
            let text = std::fs::read_to_string(f).expect("rules source");
            let before = names.len();
            for part in text.split("rule: ").skip(1) {
                // `rule: "name"`, or `rule: if … { "name" } else { "name" }`: each quoted
                // name up to the field's end.
                let field = if part.starts_with('"') {
                    part.split_inclusive('"').take(2).collect::<String>()
                } else if part.starts_with("if ") {
                    part.split("},").next().unwrap_or("").to_string()
                } else {
                    continue;
                };
                for name in field.split('"').skip(1).step_by(2) {
                    assert_eq!(super::static_rule(name), name, "{}: {name}", f.display());
                    names.insert(name.to_string());
                }
            }
            if names.len() > before {
                with_rules += 1;
            }
        }
        // The reading works: the family files are found, and the rules in them.
        assert!(with_rules >= 10, "{with_rules} files with rules: {files:?}");
        assert!(names.len() >= 25, "{names:?}");
    }
}
