//! Alerts: the field's rules, evaluated once per live tick on what Gantry already knows.
//!
//! [`evaluate`] is pure: the newest overview, readings, scheduler state, scrape health and
//! NCCL/checkpoint facts in, the conditions true now out (with durations tracked in
//! [`RuleState`], in source time). The task diffs them against the open alerts: a new
//! condition fires (one row, one webhook delivery), a vanished one resolves. Operators
//! acknowledge (with a note) and silence until a time. An opt-in policy drains a node on a
//! double-bit ECC error or a drain-class XID through the same action path as a person.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use app::live::Overview;
use app::model::{JobState, NodeState, UnixMs};
use app::units;
use serde::Serialize;

use crate::aggregate::Readings;
use crate::scheduler::SchedJob;
use crate::scrape::TargetHealth;

/// Thresholds and durations, from `[alerts]`.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertConfig {
    /// Rack power over this share of its limit for `rack_power_high_ms` is a warning.
    pub rack_power_high_ratio: f64,
    pub rack_power_high_ms: i64,
    /// GPUs thermally throttled longer than this.
    pub thermal_throttle_ms: i64,
    /// A scrape target failing this many times in a row is down.
    pub target_failures: u32,
    /// NCCL all-reduce latency over this for `nccl_consecutive` steps...
    pub nccl_latency_us: f64,
    pub nccl_consecutive: usize,
    /// ...or over this multiple of the job's own median of its first `nccl_baseline_steps`.
    pub nccl_baseline_factor: f64,
    pub nccl_baseline_steps: usize,
    /// A job that has checkpointed and then not for this long.
    pub checkpoint_overdue_ms: i64,
    /// POST each firing and resolution here (`http://`).
    pub webhook_url: Option<String>,
    /// `gantry` (Gantry's JSON) or `alertmanager` (Alertmanager's v2 alert list).
    pub webhook_format: WebhookFormat,
    /// Drain a node on a double-bit ECC error or a drain-class XID. Off by default.
    pub auto_drain: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookFormat {
    Gantry,
    Alertmanager,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            rack_power_high_ratio: 0.9,
            rack_power_high_ms: 5 * 60_000,
            thermal_throttle_ms: 5 * 60_000,
            target_failures: 3,
            nccl_latency_us: 100.0,
            nccl_consecutive: 3,
            nccl_baseline_factor: 1.3,
            nccl_baseline_steps: 20,
            checkpoint_overdue_ms: 2 * 3_600_000,
            webhook_url: None,
            webhook_format: WebhookFormat::Gantry,
            auto_drain: false,
        }
    }
}

/// One condition true now.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Condition {
    pub rule: &'static str,
    /// What it is about: `node:gpu038`, `rack:B02`, `job:1042`, `target:http://…`.
    pub subject: String,
    pub severity: &'static str,
    pub summary: String,
    /// The page to look at.
    pub link: String,
    /// The node a drain would take out, for the auto-drain policy.
    pub drain_node: Option<String>,
}

impl Condition {
    /// The condition as the store records a firing alert.
    pub fn as_new_alert(&self) -> crate::store::NewAlert<'_> {
        crate::store::NewAlert {
            rule: self.rule,
            subject: &self.subject,
            severity: self.severity,
            summary: &self.summary,
            link: &self.link,
        }
    }
}

/// Facts beyond the overview that some rules need.
#[derive(Default)]
pub struct Facts<'a> {
    pub readings: Option<&'a Readings>,
    pub jobs: &'a [SchedJob],
    pub targets: &'a [TargetHealth],
    /// Per running job: its NCCL latency samples, oldest first (step, microseconds).
    pub nccl: HashMap<u64, Vec<(u64, f64)>>,
    /// Per running job: when its newest complete checkpoint finished.
    pub last_checkpoint_ms: HashMap<u64, UnixMs>,
}

/// When each duration-bound condition started being true (source time).
#[derive(Default)]
pub struct RuleState {
    since: HashMap<(&'static str, String), UnixMs>,
    /// Per node, per GPU index: the last PCIe replay count seen, and when it last rose.
    replays: HashMap<String, Vec<(u32, u64, Option<UnixMs>)>>,
}

impl RuleState {
    /// Whether `key` has held for `ms` (it starts holding now if new); keys not held this
    /// round are forgotten by [`RuleState::retain`].
    fn held(
        &mut self,
        rule: &'static str,
        subject: &str,
        now: UnixMs,
        ms: i64,
        seen: &mut HashSet<(&'static str, String)>,
    ) -> bool {
        let k = (rule, subject.to_string());
        seen.insert(k.clone());
        let since = *self.since.entry(k).or_insert(now);
        now - since >= ms
    }

    fn retain(&mut self, seen: &HashSet<(&'static str, String)>) {
        self.since.retain(|k, _| seen.contains(k));
    }
}

fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The conditions true at `ov.at_ms`.
pub fn evaluate(
    cfg: &AlertConfig,
    ov: &Overview,
    f: &Facts<'_>,
    st: &mut RuleState,
) -> Vec<Condition> {
    let now = ov.at_ms;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let node_state: HashMap<&str, NodeState> = ov
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.state))
        .collect();
    let out_of_service = |n: &str| {
        matches!(
            node_state.get(n),
            Some(
                NodeState::Drained | NodeState::Draining | NodeState::Down | NodeState::Maintenance
            )
        )
    };

    if let Some(r) = f.readings {
        // Per node: double-bit ECC, drain-class XIDs, thermal throttling.
        // GPUs by node, nodes in name order: readings come grouped by node, so the sort
        // is a check more than work, and no per-GPU map entry is built.
        let mut sorted: Vec<&app::model::GpuReading> = r.gpus.iter().collect();
        sorted.sort_by(|a, b| a.node.cmp(&b.node));
        for gpus in sorted.chunk_by(|a, b| a.node == b.node) {
            let node = gpus[0].node.as_str();
            let dbe: Vec<u32> = gpus
                .iter()
                .filter(|g| g.ecc_dbe_total.is_some_and(|x| x > 0))
                .map(|g| g.index)
                .collect();
            if !dbe.is_empty() && !out_of_service(node) {
                out.push(Condition {
                    rule: "ecc_double_bit",
                    subject: format!("node:{node}"),
                    severity: "critical",
                    summary: format!(
                        "{node}: double-bit ECC errors on GPU {} — bad hardware; drain the node",
                        dbe.iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    link: units::node_href(node),
                    drain_node: Some(node.to_string()),
                });
            }
            for g in gpus {
                let Some(x) = g.last_xid else { continue };
                let Some((meaning, action)) = app::xid::lookup(x) else {
                    continue;
                };
                if action.is_drain_class() && !out_of_service(node) {
                    out.push(Condition {
                        rule: "xid",
                        subject: format!("node:{node}:gpu{}", g.index),
                        severity: "critical",
                        summary: format!(
                            "{node} GPU {}: XID {x}, {meaning}; {}",
                            g.index,
                            action.label()
                        ),
                        link: units::node_href(node),
                        drain_node: Some(node.to_string()),
                    });
                }
            }
            let remapped: Vec<u32> = gpus
                .iter()
                .filter(|g| g.remapped_rows_uncorrectable.is_some_and(|x| x > 0))
                .map(|g| g.index)
                .collect();
            if !remapped.is_empty() && !out_of_service(node) {
                out.push(Condition {
                    rule: "remapped_rows",
                    subject: format!("node:{node}"),
                    severity: "critical",
                    summary: format!(
                        "{node}: rows remapped for uncorrectable memory errors on GPU {} — drain the node",
                        remapped.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
                    ),
                    link: units::node_href(node),
                    drain_node: Some(node.to_string()),
                });
            }
            // PCIe replays rising: firing while the count rose within the last 5 minutes.
            for g in gpus {
                let Some(count) = g.pcie_replay_total else {
                    continue;
                };
                let per_gpu = match st.replays.get_mut(node) {
                    Some(v) => v,
                    None => st.replays.entry(node.to_string()).or_default(),
                };
                let i = match per_gpu.iter().position(|e| e.0 == g.index) {
                    Some(i) => i,
                    None => {
                        per_gpu.push((g.index, count, None));
                        per_gpu.len() - 1
                    }
                };
                let e = &mut per_gpu[i];
                if count > e.1 {
                    e.2 = Some(now);
                }
                e.1 = count;
                if e.2.is_some_and(|t| now - t <= 5 * 60_000) {
                    out.push(Condition {
                        rule: "pcie_replays",
                        subject: format!("node:{node}:gpu{}", g.index),
                        severity: "warning",
                        summary: format!(
                            "{node} GPU {}: PCIe replay counter rising ({count}): check the link or riser",
                            g.index
                        ),
                        link: units::node_href(node),
                        drain_node: None,
                    });
                }
            }
            let thermal = gpus
                .iter()
                .filter(|g| g.throttle.is_some_and(|t| t.is_thermal()))
                .count();
            if thermal > 0
                && st.held(
                    "thermal_throttling",
                    node,
                    now,
                    cfg.thermal_throttle_ms,
                    &mut seen,
                )
            {
                out.push(Condition {
                    rule: "thermal_throttling",
                    subject: format!("node:{node}"),
                    severity: "warning",
                    summary: format!(
                        "{node}: {thermal} GPU(s) thermally throttled for over {} min",
                        cfg.thermal_throttle_ms / 60_000
                    ),
                    link: units::node_href(node),
                    drain_node: None,
                });
            }
        }
    }

    for rack in &ov.racks {
        if let (Some(t), limit) = (rack.inlet_celsius, rack.inlet_limit_celsius) {
            if limit > 0.0 && t > limit {
                out.push(Condition {
                    rule: "inlet_over_limit",
                    subject: format!("rack:{}", rack.name),
                    severity: "critical",
                    summary: format!("rack {}: inlet {t:.0} °C, over its {limit:.0} °C limit — GPUs will throttle", rack.name),
                    link: "/thermal".into(),
                    drain_node: None,
                });
            }
        }
        match rack.load_ratio() {
            Some(x) if x > 1.0 => out.push(Condition {
                rule: "rack_power_over_limit",
                subject: format!("rack:{}", rack.name),
                severity: "critical",
                summary: format!(
                    "rack {}: {:.1} kW, over its {:.1} kW limit",
                    rack.name,
                    rack.power_watts.unwrap_or(0.0) / 1000.0,
                    rack.power_limit_watts / 1000.0
                ),
                link: "/racks".into(),
                drain_node: None,
            }),
            Some(x)
                if x > cfg.rack_power_high_ratio
                    && st.held(
                        "rack_power_high",
                        &rack.name,
                        now,
                        cfg.rack_power_high_ms,
                        &mut seen,
                    ) =>
            {
                out.push(Condition {
                    rule: "rack_power_high",
                    subject: format!("rack:{}", rack.name),
                    severity: "warning",
                    summary: format!(
                        "rack {}: over {:.0}% of its power limit for {} min",
                        rack.name,
                        cfg.rack_power_high_ratio * 100.0,
                        cfg.rack_power_high_ms / 60_000
                    ),
                    link: "/racks".into(),
                    drain_node: None,
                });
            }
            _ => {}
        }
    }

    for n in &ov.nodes {
        if matches!(n.state, NodeState::NotResponding | NodeState::Down) {
            out.push(Condition {
                rule: "node_not_responding",
                subject: format!("node:{}", n.name),
                severity: "warning",
                summary: format!("{}: {} in Slurm", n.name, n.state.label()),
                link: units::node_href(&n.name),
                drain_node: None,
            });
        }
    }

    for t in f.targets {
        if t.consecutive_failures >= cfg.target_failures {
            out.push(Condition {
                rule: "target_down",
                subject: format!("target:{}", t.url),
                severity: "warning",
                summary: format!(
                    "{} failed {} scrapes in a row: {}",
                    t.url,
                    t.consecutive_failures,
                    t.last_error.as_deref().unwrap_or("?")
                ),
                link: "/api/targets".into(),
                drain_node: None,
            });
        }
    }

    let running: Vec<&SchedJob> = f
        .jobs
        .iter()
        .filter(|j| j.job.state == JobState::Running)
        .collect();
    for j in &running {
        let id = j.job.id;
        if let Some(samples) = f.nccl.get(&id) {
            let k = cfg.nccl_consecutive.max(1);
            if samples.len() >= k {
                let last: Vec<f64> = samples[samples.len() - k..].iter().map(|s| s.1).collect();
                let baseline = (samples.len() >= cfg.nccl_baseline_steps + k)
                    .then(|| {
                        median(
                            &samples[..cfg.nccl_baseline_steps]
                                .iter()
                                .map(|s| s.1)
                                .collect::<Vec<_>>(),
                        )
                    })
                    .flatten();
                // Like with like: the job's own baseline once it has one, else the cluster's
                // threshold for small messages.
                let limit = match baseline {
                    Some(b) => b * cfg.nccl_baseline_factor,
                    None => cfg.nccl_latency_us,
                };
                if last.iter().all(|&l| l > limit) {
                    out.push(Condition {
                        rule: "nccl_latency",
                        subject: format!("job:{id}"),
                        severity: "warning",
                        summary: format!(
                            "job {id}: NCCL all-reduce over {limit:.0} us for {k} steps in a row (last {:.0} us){}",
                            last[k - 1],
                            baseline.map(|b| format!("; its baseline is {b:.0} us")).unwrap_or_default()
                        ),
                        link: format!("/jobs/{id}"),
                        drain_node: None,
                    });
                }
            }
        }
        if let Some(&last) = f.last_checkpoint_ms.get(&id) {
            if now - last > cfg.checkpoint_overdue_ms {
                out.push(Condition {
                    rule: "checkpoint_overdue",
                    subject: format!("job:{id}"),
                    severity: "warning",
                    summary: format!(
                        "job {id} ({}): no checkpoint for {}",
                        j.job.name,
                        app::units::duration_ms(now - last)
                    ),
                    link: "/jobs".into(),
                    drain_node: None,
                });
            }
        }
    }
    st.retain(&seen);
    out.sort();
    out.dedup_by(|a, b| a.rule == b.rule && a.subject == b.subject);
    out
}

/// What the task needs from the rest of the server.
pub struct AlertTask {
    pub cfg: AlertConfig,
    pub live: Arc<crate::live::Live>,
    pub store: crate::store::Store,
    pub actions: Arc<crate::actions::Actions>,
}

/// One webhook delivery: the alert and whether it fired or resolved.
#[derive(Clone, Debug)]
struct Delivery {
    alert_id: i64,
    event: &'static str,
    cond: Condition,
    at_ms: UnixMs,
}

fn payload(fmt: WebhookFormat, d: &Delivery) -> serde_json::Value {
    // RFC 3339: `2026-11-29 16:00:00 UTC` -> `2026-11-29T16:00:00Z`.
    let at = format!(
        "{}Z",
        app::units::utc(d.at_ms)
            .trim_end_matches(" UTC")
            .replacen(' ', "T", 1)
    );
    match fmt {
        WebhookFormat::Gantry => serde_json::json!({
            "id": d.alert_id, "event": d.event, "rule": d.cond.rule, "subject": d.cond.subject,
            "severity": d.cond.severity, "summary": d.cond.summary, "link": d.cond.link, "at_ms": d.at_ms,
        }),
        // Alertmanager's POST /api/v2/alerts body: a list of alerts with labels and annotations.
        WebhookFormat::Alertmanager => {
            let mut a = serde_json::json!({
                "labels": {"alertname": d.cond.rule, "subject": d.cond.subject, "severity": d.cond.severity, "source": "gantry"},
                "annotations": {"summary": d.cond.summary},
                "generatorURL": d.cond.link,
                "startsAt": at,
            });
            if d.event == "resolved" {
                a["endsAt"] = at.into();
            }
            serde_json::json!([a])
        }
    }
}

/// POSTs JSON over HTTP/1.1; `Ok` on 2xx.
async fn post_json(url: &str, body: &serde_json::Value, timeout: Duration) -> Result<u16, String> {
    use http_body_util::{BodyExt, Full};
    let uri: hyper::Uri = url.parse().map_err(|_| format!("bad URL {url:?}"))?;
    let host = uri
        .authority()
        .map(|a| a.to_string())
        .ok_or("no host in URL")?;
    let path = uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_else(|| "/".into());
    let work = async {
        let s = tokio::net::TcpStream::connect(host.as_str())
            .await
            .map_err(|e| e.to_string())?;
        let (mut tx, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(s))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = hyper::Request::post(path)
            .header(hyper::header::HOST, host.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes::Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let resp = tx.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        if (200..300).contains(&status) {
            Ok(status)
        } else {
            Err(format!("HTTP {status}"))
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or(Err("timed out".into()))
}

/// Delivers queued webhooks with retries (1, 2, 4, 8 s), logging every attempt.
async fn deliver(
    cfg: AlertConfig,
    store: crate::store::Store,
    mut rx: tokio::sync::mpsc::Receiver<Delivery>,
) {
    let Some(url) = cfg.webhook_url.clone() else {
        return;
    };
    while let Some(d) = rx.recv().await {
        let body = payload(cfg.webhook_format, &d);
        for attempt in 1..=5u32 {
            let res = post_json(&url, &body, Duration::from_secs(5)).await;
            let (status, detail) = match &res {
                Ok(code) => ("delivered", format!("HTTP {code}")),
                Err(e) => ("failed", e.clone()),
            };
            if let Err(e) = store
                .put_delivery(
                    d.alert_id,
                    d.event,
                    crate::live::wall_now_ms(),
                    attempt,
                    status,
                    &detail,
                )
                .await
            {
                tracing::warn!(error = %e, "webhook delivery log write failed");
            }
            if res.is_ok() {
                break;
            }
            tracing::warn!(alert = d.alert_id, attempt, error = %detail, "webhook delivery failed");
            if attempt < 5 {
                tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
            }
        }
    }
}

/// Evaluates the rules on every published tick until shutdown.
pub async fn run(task: AlertTask, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let AlertTask {
        cfg,
        live,
        store,
        actions,
    } = task;
    let (tx, rx) = tokio::sync::mpsc::channel::<Delivery>(1024);
    let delivery = tokio::spawn(deliver(cfg.clone(), store.clone(), rx));
    let mut ticks = live.subscribe();
    let mut state = RuleState::default();
    // Open alerts by (rule, subject) -> id; loaded from the store so a restart resumes.
    // Open alerts silenced, id -> until (refreshed every tick from the store).
    let mut silenced_until: HashMap<i64, UnixMs> = HashMap::new();
    let mut open: HashMap<(String, String), i64> = match store.open_alerts().await {
        Ok(v) => v
            .into_iter()
            .map(|a| {
                if let Some(u) = a.silenced_until_ms {
                    silenced_until.insert(a.id, u);
                }
                ((a.rule, a.subject), a.id)
            })
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "cannot load open alerts");
            HashMap::new()
        }
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
        for (job, end) in live.last_checkpoints() {
            if running.contains(&job) {
                let e = last_checkpoint_ms.entry(job).or_insert(end);
                *e = (*e).max(end);
            }
        }
        let facts = Facts {
            readings: latest.as_ref().map(|l| l.readings()),
            jobs,
            targets: &targets,
            nccl,
            last_checkpoint_ms,
        };
        let now_conds = evaluate(&cfg, ov, &facts, &mut state);
        let wall = crate::live::wall_now_ms();
        let mut still: HashMap<(String, String), i64> = HashMap::new();
        for c in now_conds {
            let key = (c.rule.to_string(), c.subject.clone());
            if let Some(id) = open.remove(&key) {
                still.insert(key, id);
                continue;
            }
            match store.fire_alert(&c.as_new_alert(), wall).await {
                Ok((id, silenced)) => {
                    // A silence on this rule and subject covers its new firing: recorded and
                    // shown, not sent.
                    if let Some(until) = silenced.filter(|u| *u > wall) {
                        tracing::info!(rule = c.rule, subject = %c.subject, silenced_until_ms = until, "alert firing (silenced)");
                        silenced_until.insert(id, until);
                    } else {
                        tracing::info!(rule = c.rule, subject = %c.subject, "alert firing");
                        let _ = tx.try_send(Delivery {
                            alert_id: id,
                            event: "firing",
                            cond: c.clone(),
                            at_ms: wall,
                        });
                    }
                    if cfg.auto_drain {
                        if let Some(node) = &c.drain_node {
                            auto_drain(&actions, node, &c).await;
                        }
                    }
                    still.insert(key, id);
                }
                Err(e) => tracing::error!(error = %e, "alert could not be recorded"),
            }
        }
        for ((rule, subject), id) in open.drain() {
            if let Err(e) = store.resolve_alert(id, wall).await {
                tracing::error!(error = %e, "alert could not be resolved");
                continue;
            }
            // Silenced: its resolution is not news either.
            if silenced_until.remove(&id).is_some_and(|u| u > wall) {
                continue;
            }
            let cond = Condition {
                rule: "resolved",
                subject: subject.clone(),
                severity: "info",
                summary: format!("{rule} on {subject} resolved"),
                link: String::new(),
                drain_node: None,
            };
            let _ = tx.try_send(Delivery {
                alert_id: id,
                event: "resolved",
                cond: Condition {
                    rule: static_rule(&rule),
                    ..cond
                },
                at_ms: wall,
            });
        }
        open = still;
        // The badge counts what is firing and not silenced.
        match store.open_alerts().await {
            Ok(v) => {
                silenced_until = v
                    .iter()
                    .filter_map(|a| a.silenced_until_ms.map(|u| (a.id, u)))
                    .collect();
                live.set_alerts_firing(
                    v.iter()
                        .filter(|a| a.silenced_until_ms.is_none_or(|u| u <= wall))
                        .count() as u32,
                )
            }
            Err(e) => tracing::warn!(error = %e, "open alerts unavailable"),
        }
    }
    drop(tx);
    let _ = tokio::time::timeout(Duration::from_secs(5), delivery).await;
}

fn static_rule(rule: &str) -> &'static str {
    const RULES: [&str; 12] = [
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
        "remapped_rows",
        "pcie_replays",
    ];
    RULES.into_iter().find(|r| *r == rule).unwrap_or("unknown")
}

/// The policy drains like a person would: preview, audit row, call, verified end state.
async fn auto_drain(actions: &crate::actions::Actions, node: &str, c: &Condition) {
    let caller = crate::auth::Caller {
        user: Some("gantry-policy".into()),
        role: Some(app::actions::Role::Operator),
    };
    let targets = app::actions::ActionTargets {
        nodes: vec![node.to_string()],
        ..Default::default()
    };
    let reason = format!(
        "auto-drain: {}",
        c.summary.chars().take(400).collect::<String>()
    );
    match actions
        .run(
            &caller,
            app::actions::ActionKind::Drain,
            &targets,
            Some(&reason),
        )
        .await
    {
        Ok(r) => {
            tracing::warn!(node, outcome = ?r.outcomes.first().map(|o| o.status.clone()), "auto-drain policy acted")
        }
        Err(e) => tracing::error!(node, error = %e, "auto-drain policy failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Sim;

    const T0: i64 = 1_795_968_000_000;

    fn base() -> (Sim, Readings, Overview) {
        let sim = Sim::new(64, 42, "t", T0);
        let r = sim.readings();
        let ov = crate::aggregate::overview(sim.inventory(), &r, 1, 1000, T0);
        (sim, r, ov)
    }

    fn rules(c: &[Condition]) -> Vec<(&'static str, String)> {
        c.iter().map(|c| (c.rule, c.subject.clone())).collect()
    }

    #[test]
    fn the_simulated_cluster_fires_what_is_wrong_with_it() {
        let (_, r, ov) = base();
        let mut st = RuleState::default();
        let c = evaluate(
            &AlertConfig::default(),
            &ov,
            &Facts {
                readings: Some(&r),
                ..Default::default()
            },
            &mut st,
        );
        // The down node is not responding.
        assert!(
            rules(&c).contains(&("node_not_responding", "node:gpu061".into())),
            "{c:?}"
        );
    }

    #[test]
    fn each_rule_fires_and_resolves() {
        let (_, mut r, mut ov) = base();
        let cfg = AlertConfig::default();
        let mut st = RuleState::default();
        // Double-bit ECC and a drain-class XID on gpu002.
        let g = r.gpus.iter_mut().find(|g| g.node == "gpu002").expect("gpu");
        g.ecc_dbe_total = Some(1);
        g.last_xid = Some(79);
        // Rack A01 over its power limit, B01 inlet over its limit.
        ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 1.05);
        let i = ov.racks.iter().position(|t| t.name == "B01").expect("B01");
        ov.racks[i].inlet_celsius = Some(45.0);
        let c = evaluate(
            &cfg,
            &ov,
            &Facts {
                readings: Some(&r),
                ..Default::default()
            },
            &mut st,
        );
        let got = rules(&c);
        for want in [
            ("ecc_double_bit", "node:gpu002".to_string()),
            ("xid", "node:gpu002:gpu0".to_string()),
            ("rack_power_over_limit", "rack:A01".to_string()),
            ("inlet_over_limit", "rack:B01".to_string()),
        ] {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
        assert_eq!(
            c.iter()
                .find(|c| c.rule == "xid")
                .and_then(|c| c.drain_node.clone()),
            Some("gpu002".into())
        );
        // Drained: the hardware alerts stop (the action was taken).
        let n = ov
            .nodes
            .iter_mut()
            .find(|n| n.name == "gpu002")
            .expect("node");
        n.state = NodeState::Drained;
        let c = evaluate(
            &cfg,
            &ov,
            &Facts {
                readings: Some(&r),
                ..Default::default()
            },
            &mut st,
        );
        assert!(!rules(&c)
            .iter()
            .any(|(r, s)| s.starts_with("node:gpu002") && (*r == "xid" || *r == "ecc_double_bit")));
    }

    #[test]
    fn remapped_rows_replays_targets_thermal_and_checkpoints() {
        let (_, mut r, mut ov) = base();
        let cfg = AlertConfig::default();
        let mut st = RuleState::default();
        let g = r.gpus.iter_mut().find(|g| g.node == "gpu003").expect("gpu");
        g.remapped_rows_uncorrectable = Some(2);
        g.pcie_replay_total = Some(10);
        let targets = vec![TargetHealth {
            url: "http://gpu009:9400/metrics".into(),
            consecutive_failures: 3,
            last_error: Some("connection refused".into()),
            ..TargetHealth::default()
        }];
        let jobs: Vec<SchedJob> = r
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .take(1)
            .map(|j| SchedJob {
                job: j.clone(),
                raw_state: vec![],
                state_reason: None,
                restart_count: 0,
                exit_code: None,
            })
            .collect();
        let id = jobs[0].job.id;
        let mut last = HashMap::new();
        last.insert(id, ov.at_ms - 3 * 3_600_000);
        let eval = |r: &Readings, ov: &Overview, st: &mut RuleState, last: &HashMap<u64, i64>| {
            let f = Facts {
                readings: Some(r),
                jobs: &jobs,
                targets: &targets,
                last_checkpoint_ms: last.clone(),
                ..Default::default()
            };
            rules(&evaluate(&cfg, ov, &f, st))
        };
        let c = eval(&r, &ov, &mut st, &last);
        assert!(
            c.contains(&("remapped_rows", "node:gpu003".into())),
            "{c:?}"
        );
        assert!(c.contains(&("target_down", "target:http://gpu009:9400/metrics".into())));
        assert!(c.contains(&("checkpoint_overdue", format!("job:{id}"))));
        assert!(
            !c.iter().any(|(r, _)| *r == "pcie_replays"),
            "the first count is a baseline, not a rise"
        );
        // The replay counter rises: fires; 6 minutes without a rise: resolves.
        r.gpus
            .iter_mut()
            .find(|g| g.node == "gpu003")
            .expect("gpu")
            .pcie_replay_total = Some(15);
        ov.at_ms += 10_000;
        assert!(
            eval(&r, &ov, &mut st, &last).contains(&("pcie_replays", "node:gpu003:gpu0".into()))
        );
        ov.at_ms += 6 * 60_000;
        assert!(!eval(&r, &ov, &mut st, &last)
            .iter()
            .any(|(r, _)| *r == "pcie_replays"));
        // A checkpoint arrives: the job is no longer overdue.
        last.insert(id, ov.at_ms - 60_000);
        assert!(!eval(&r, &ov, &mut st, &last)
            .iter()
            .any(|(r, _)| *r == "checkpoint_overdue"));
        // Thermal throttling held for 5 minutes.
        for g in r.gpus.iter_mut().filter(|g| g.node == "gpu004") {
            g.throttle = Some(app::model::ThrottleReasons(
                app::model::ThrottleReasons::SW_THERMAL,
            ));
        }
        assert!(!eval(&r, &ov, &mut st, &last)
            .iter()
            .any(|(r, s)| *r == "thermal_throttling" && s == "node:gpu004"));
        ov.at_ms += 5 * 60_000;
        assert!(
            eval(&r, &ov, &mut st, &last).contains(&("thermal_throttling", "node:gpu004".into()))
        );
    }

    #[test]
    fn durations_are_respected() {
        let (_, r, mut ov) = base();
        let cfg = AlertConfig::default();
        let mut st = RuleState::default();
        ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 0.95);
        let fire = |ov: &Overview, st: &mut RuleState| {
            rules(&evaluate(
                &cfg,
                ov,
                &Facts {
                    readings: Some(&r),
                    ..Default::default()
                },
                st,
            ))
            .contains(&("rack_power_high", "rack:A01".into()))
        };
        assert!(!fire(&ov, &mut st), "not yet: 0 of 5 minutes");
        ov.at_ms += 4 * 60_000;
        assert!(!fire(&ov, &mut st));
        ov.at_ms += 60_000;
        assert!(fire(&ov, &mut st), "5 minutes over 90%");
        // Drops below: forgotten, so it must hold 5 minutes again.
        ov.racks[0].power_watts = Some(1000.0);
        assert!(!fire(&ov, &mut st));
        ov.racks[0].power_watts = Some(ov.racks[0].power_limit_watts * 0.95);
        ov.at_ms += 60_000;
        assert!(!fire(&ov, &mut st));
    }

    #[test]
    fn nccl_latency_against_a_threshold_and_a_baseline() {
        let (_, r, ov) = base();
        let jobs: Vec<SchedJob> = r
            .jobs
            .iter()
            .filter(|j| j.state == JobState::Running)
            .take(1)
            .map(|j| SchedJob {
                job: j.clone(),
                raw_state: vec![],
                state_reason: None,
                restart_count: 0,
                exit_code: None,
            })
            .collect();
        let id = jobs[0].job.id;
        let cfg = AlertConfig::default();
        let run = |samples: Vec<f64>| {
            let mut st = RuleState::default();
            let mut nccl = HashMap::new();
            nccl.insert(
                id,
                samples
                    .into_iter()
                    .enumerate()
                    .map(|(i, l)| (i as u64, l))
                    .collect(),
            );
            let f = Facts {
                jobs: &jobs,
                nccl,
                ..Default::default()
            };
            rules(&evaluate(&cfg, &ov, &f, &mut st))
                .contains(&("nccl_latency", format!("job:{id}")))
        };
        assert!(run(vec![40.0, 120.0, 130.0, 140.0]), "3 steps over 100 us");
        assert!(!run(vec![120.0, 130.0, 40.0]), "not 3 in a row");
        // A job whose all-reduce is naturally slow (EFA, 70 us) is judged by its baseline.
        let mut slow = vec![70.0; 20];
        slow.extend([80.0, 85.0, 88.0]);
        assert!(!run(slow.clone()), "within 1.3 x its own median");
        slow.extend([95.0, 96.0, 97.0]);
        assert!(run(slow), "over 1.3 x 70 us for 3 steps");
    }

    #[test]
    fn alertmanager_payloads() {
        let d = Delivery {
            alert_id: 7,
            event: "resolved",
            cond: Condition {
                rule: "xid",
                subject: "node:gpu002:gpu0".into(),
                severity: "critical",
                summary: "s".into(),
                link: "/nodes/gpu002".into(),
                drain_node: None,
            },
            at_ms: T0,
        };
        let p = payload(WebhookFormat::Alertmanager, &d);
        assert_eq!(p[0]["labels"]["alertname"], "xid");
        assert_eq!(p[0]["endsAt"], "2026-11-29T16:00:00Z");
        let g = payload(WebhookFormat::Gantry, &d);
        assert_eq!(g["event"], "resolved");
    }
}
