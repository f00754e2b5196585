//! Remediation policies with graduated autonomy: `[remediation]` rules say which incident
//! causes get a drain of their node, each in a mode (`observe` records what it would do,
//! `recommend` offers it on the incident, `execute` does it through [`Actions`] as the user
//! `gantry`, so its drains carry the `gantry:` reason prefix and an audit row each).
//!
//! `decide.rs` is pure (the limits: kill switch, cooldown, breakers, actions an hour);
//! this file runs it once per alert tick on the open incidents, records each decision
//! once, trips breakers, and applies an admin's changes (kill switch, modes, breaker
//! resets: run time, no restart, every one audited). Gantry never resumes a node here.

mod decide;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use app::actions::{ActionKind, ActionTargets, Role};
use app::model::{Inventory, NodeState, UnixMs};
use app::remediation::{
    Breaker, KillSwitch, Mode, RemediationChange, RemediationView, RemedyLimits, RemedyRule,
};
use app::views::Incident;
use serde::Deserialize;

pub use decide::{decide, node_of, Done, Held, Ledger, Limits, Outcome, Plan, Rule, World};

use crate::actions::Actions;
use crate::auth::Caller;
use crate::clock::wall_now_ms;
use crate::scheduler::SchedNode;
use crate::store::{NewDecision, Setting, Store, StoreError};

pub use crate::auth::GANTRY_USER;

/// The only action rules take today.
const DRAIN: &str = "drain";

/// `[remediation]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemediationConfig {
    pub cooldown_seconds: u64,
    pub max_actions_per_hour: u32,
    pub breaker_window_minutes: u64,
    pub breaker_domain_share: f64,
    pub breaker_fleet_share: f64,
    /// Which causes get which action in which mode; replaces the defaults when given.
    pub rules: Vec<RuleConfig>,
}

/// `[[remediation.rules]]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// An incident's cause: an alert rule (`ecc_double_bit`, `xid`, …).
    pub cause: String,
    /// `drain` (the only one so far).
    #[serde(default = "drain")]
    pub action: String,
    pub mode: Mode,
}

fn drain() -> String {
    DRAIN.into()
}

/// The causes whose alerts name a node to drain (bad hardware, by NVIDIA's catalog).
pub const DRAIN_CLASS: [&str; 4] = ["ecc_double_bit", "xid", "remapped_rows", "nvswitch_fatal"];

impl Default for RemediationConfig {
    fn default() -> Self {
        RemediationConfig {
            cooldown_seconds: 3600,
            max_actions_per_hour: 3,
            breaker_window_minutes: 5,
            breaker_domain_share: 0.5,
            breaker_fleet_share: 0.05,
            rules: DRAIN_CLASS
                .iter()
                .map(|c| RuleConfig {
                    cause: (*c).into(),
                    action: DRAIN.into(),
                    mode: Mode::Recommend,
                })
                .collect(),
        }
    }
}

/// The configured rules and limits, shared by the task and the pages.
#[derive(Clone, Debug)]
pub struct Policies {
    pub rules: Vec<Rule>,
    pub limits: Limits,
}

impl Policies {
    /// From `[remediation]`; `auto_drain` (`alerts.auto_drain`, kept for old files) runs
    /// every `recommend` rule in `execute`.
    pub fn new(cfg: &RemediationConfig, auto_drain: bool) -> Policies {
        Policies {
            rules: cfg
                .rules
                .iter()
                .map(|r| Rule {
                    cause: r.cause.clone(),
                    mode: if auto_drain && r.mode == Mode::Recommend {
                        Mode::Execute
                    } else {
                        r.mode
                    },
                })
                .collect(),
            limits: Limits {
                cooldown_ms: cfg
                    .cooldown_seconds
                    .saturating_mul(1000)
                    .min(i64::MAX as u64) as i64,
                per_hour: cfg.max_actions_per_hour,
                window_ms: cfg
                    .breaker_window_minutes
                    .saturating_mul(60_000)
                    .min(i64::MAX as u64) as i64,
                domain_share: cfg.breaker_domain_share,
                fleet_share: cfg.breaker_fleet_share,
            },
        }
    }

    /// The rules with an admin's mode changes applied.
    fn in_force(&self, s: &Switches) -> Vec<Rule> {
        self.rules
            .iter()
            .map(|r| Rule {
                cause: r.cause.clone(),
                mode: s.modes.get(&r.cause).copied().unwrap_or(r.mode),
            })
            .collect()
    }
}

/// What the settings table holds, read.
#[derive(Default)]
struct Switches {
    kill: Option<KillSwitch>,
    modes: HashMap<String, Mode>,
    breakers: Vec<Breaker>,
}

impl Switches {
    fn read(settings: Vec<Setting>) -> Switches {
        let mut s = Switches::default();
        for row in settings {
            if row.key == "kill_switch" {
                s.kill = Some(KillSwitch {
                    by: row.by,
                    since_ms: row.at_ms,
                    note: row.note,
                });
            } else if let Some(cause) = row.key.strip_prefix("mode:") {
                if let Some(m) = Mode::parse(&row.value) {
                    s.modes.insert(cause.to_string(), m);
                }
            } else if let Some(domain) = row.key.strip_prefix("breaker:") {
                s.breakers.push(Breaker {
                    domain: domain.to_string(),
                    tripped_ms: row.at_ms,
                    detail: row.value,
                });
            }
        }
        s
    }

    fn open(&self) -> BTreeSet<String> {
        self.breakers.iter().map(|b| b.domain.clone()).collect()
    }
}

/// Where the scheduler's nodes are: racks, and the NVLink or leaf domains of the layout.
pub fn world(nodes: &[SchedNode], inventory: Option<&Inventory>) -> World {
    let mut w = World {
        fleet_nodes: nodes.len(),
        ..Default::default()
    };
    w.out_of_service = nodes
        .iter()
        .filter(|n| {
            matches!(
                n.state,
                NodeState::Drained | NodeState::Draining | NodeState::Down | NodeState::Maintenance
            )
        })
        .map(|n| n.name.clone())
        .collect();
    let Some(inv) = inventory else { return w };
    let mut add = |node: &str, domain: String| {
        *w.domain_size.entry(domain.clone()).or_default() += 1;
        w.domains_of
            .entry(node.to_string())
            .or_default()
            .push(domain);
    };
    for n in &inv.nodes {
        add(&n.name, format!("rack:{}", n.rack));
    }
    // The lowest level only (a leaf, an NVLink domain): those above are the fleet's.
    let parents: HashSet<&str> = inv
        .domains
        .iter()
        .filter_map(|d| d.parent.as_deref())
        .collect();
    for d in &inv.domains {
        if parents.contains(d.name.as_str()) {
            continue;
        }
        for n in &d.nodes {
            add(n, format!("domain:{}", d.name));
        }
    }
    w
}

/// The policy task's part of the alert task.
pub struct Remediation {
    policies: Arc<Policies>,
    store: Store,
    actions: Arc<Actions>,
    /// Decisions recorded (incident, node, action, outcome, held by), for open incidents.
    recorded: HashSet<(i64, String, String, String, String)>,
    /// Executions within the longest limit's reach.
    done: Vec<Done>,
    /// Executions the action service refused (the scheduler unreachable, the rate limit):
    /// per incident and node, when to ask again.
    retry_at: HashMap<(i64, String), UnixMs>,
    loaded: bool,
}

/// How long after a refused execution a policy asks again.
const RETRY_REFUSED_MS: i64 = 60_000;

impl Remediation {
    pub fn new(policies: Arc<Policies>, store: Store, actions: Arc<Actions>) -> Remediation {
        Remediation {
            policies,
            store,
            actions,
            recorded: HashSet::new(),
            done: Vec::new(),
            retry_at: HashMap::new(),
            loaded: false,
        }
    }

    fn reach_ms(&self) -> i64 {
        let l = &self.policies.limits;
        l.cooldown_ms.max(l.window_ms).max(3_600_000)
    }

    /// One evaluation on the open incidents (critical first).
    pub async fn tick(
        &mut self,
        incidents: &[Incident],
        nodes: &[SchedNode],
        inventory: Option<&Inventory>,
    ) {
        let now = wall_now_ms();
        let open_ids: HashSet<i64> = incidents.iter().map(|i| i.id).collect();
        self.recorded.retain(|k| open_ids.contains(&k.0));
        self.retry_at.retain(|k, _| open_ids.contains(&k.0));
        let reach = self.reach_ms();
        self.done.retain(|d| now - d.at_ms < reach);
        // Most ticks no incident is one a rule covers: nothing to read or decide.
        let covered = incidents.iter().any(|i| {
            node_of(i).is_some() && self.policies.rules.iter().any(|r| r.cause == i.cause.rule)
        });
        if !covered {
            return;
        }
        if !self.loaded {
            // What this or an earlier process did: the limits hold across restarts.
            match self.store.decisions_since(now - self.reach_ms()).await {
                Ok(rows) => {
                    for r in rows {
                        if r.outcome == Outcome::Execute.as_str() {
                            self.done.push(Done {
                                at_ms: r.at_ms,
                                node: r.node.clone(),
                                cause: r.cause.clone(),
                            });
                        }
                        self.recorded
                            .insert((r.incident, r.node, r.action, r.outcome, r.held_by));
                    }
                    self.loaded = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "remediation: past decisions unreadable; nothing decided this tick");
                    return;
                }
            }
        }
        // The switches are read every time: an admin's change on any replica holds at once.
        // Unreadable, nothing runs (the kill switch may be on).
        let switches = match self.store.remediation_settings().await {
            Ok(s) => Switches::read(s),
            Err(e) => {
                tracing::warn!(error = %e, "remediation: switches unreadable; nothing decided this tick");
                return;
            }
        };
        let rules = self.policies.in_force(&switches);
        let open = switches.open();
        let plan = decide(
            incidents,
            &rules,
            &self.policies.limits,
            &world(nodes, inventory),
            &Ledger {
                kill: switches.kill.is_some(),
                open_breakers: &open,
                done: &self.done,
                now,
            },
        );
        for (domain, why) in &plan.trip {
            self.trip(domain, why, now).await;
        }
        for p in &plan.proposals {
            self.carry(p, now).await;
        }
    }

    async fn trip(&self, domain: &str, why: &str, now: UnixMs) {
        tracing::warn!(
            domain,
            why,
            "remediation breaker tripped: no executions there until a person resets it"
        );
        let audit = self
            .store
            .audit_begin(
                now,
                GANTRY_USER,
                Role::Operator,
                "remediation_breaker",
                domain,
                why,
            )
            .await;
        let set = self
            .store
            .set_remediation_setting(&Setting {
                key: format!("breaker:{domain}"),
                value: why.to_string(),
                by: GANTRY_USER.into(),
                at_ms: now,
                note: String::new(),
            })
            .await;
        if let Err(e) = &set {
            tracing::error!(error = %e, domain, "breaker not recorded (its executions were held this tick)");
        }
        if let Ok(id) = audit {
            let status = if set.is_ok() { "ok" } else { "failed" };
            let _ = self
                .store
                .audit_finish(id, status, "tripped", wall_now_ms())
                .await;
        }
    }

    /// Records `p` once; an execution first runs (its action recorded before any call). A
    /// refused execution is recorded once and asked again a minute on.
    async fn carry(&mut self, p: &decide::Proposal, now: UnixMs) {
        let mut outcome = p.outcome.as_str();
        let mut held_by = match p.outcome {
            Outcome::Held(h) => h.as_str(),
            _ => "",
        };
        let key = |outcome: &str, held_by: &str| {
            (
                p.incident,
                p.node.clone(),
                DRAIN.to_string(),
                outcome.to_string(),
                held_by.to_string(),
            )
        };
        // Decided so already (an execution: done, never twice for one incident).
        if self.recorded.contains(&key(outcome, held_by)) {
            return;
        }
        let mut detail = p.detail.clone();
        let mut action_id = None;
        if p.outcome == Outcome::Execute {
            let retry = (p.incident, p.node.clone());
            if self.retry_at.get(&retry).is_some_and(|&t| now < t) {
                return;
            }
            match self.execute(p).await {
                Ok(id) => {
                    action_id = Some(id);
                    self.retry_at.remove(&retry);
                    self.done.push(Done {
                        at_ms: now,
                        node: p.node.clone(),
                        cause: p.cause.clone(),
                    });
                }
                Err(e) => {
                    tracing::error!(node = %p.node, error = %e, "remediation: the drain was refused");
                    self.retry_at.insert(retry, now + RETRY_REFUSED_MS);
                    outcome = "held";
                    held_by = "refused";
                    detail = format!("would drain {}: refused ({e})", p.node);
                }
            }
        }
        // A refusal is recorded under its own outcome (once), so that the execution still
        // runs once accepted.
        let key = key(outcome, held_by);
        if self.recorded.contains(&key) {
            return;
        }
        let d = NewDecision {
            at_ms: now,
            incident: p.incident,
            cause: &p.cause,
            node: &p.node,
            action: DRAIN,
            mode: p.mode,
            outcome,
            held_by,
            detail: &detail,
            action_id,
        };
        match self.store.record_decision(&d).await {
            Ok(_) => {
                tracing::info!(incident = p.incident, node = %p.node, outcome, held_by, "remediation decision");
                self.recorded.insert(key);
            }
            Err(e) => tracing::warn!(error = %e, "remediation decision not recorded"),
        }
    }

    /// Drains `p`'s node as [`GANTRY_USER`], like a person would: preview, audit rows, call,
    /// verified end state. The action id.
    async fn execute(&self, p: &decide::Proposal) -> Result<i64, crate::actions::ActionError> {
        let caller = Caller {
            user: Some(GANTRY_USER.into()),
            role: Some(Role::Operator),
        };
        let reason = format!("incident {}: {}", p.incident, p.summary);
        let targets = ActionTargets {
            nodes: vec![p.node.clone()],
            ..Default::default()
        };
        let s = self
            .actions
            .submit(&caller, ActionKind::Drain, &targets, Some(&reason))
            .await?;
        tracing::warn!(node = %p.node, incident = p.incident, action = s.id, "remediation policy drains a node");
        Ok(s.id)
    }
}

/// `GET /api/remediation`: the rules in force, limits, switches and the newest decisions.
pub async fn view(store: &Store, policies: &Policies) -> Result<RemediationView, StoreError> {
    let switches = Switches::read(store.remediation_settings().await?);
    let now = wall_now_ms();
    let decisions = store.decisions(500).await?;
    let executed_last_hour = store
        .decisions_counted(now - 3_600_000, Outcome::Execute.as_str())
        .await?;
    let l = &policies.limits;
    Ok(RemediationView {
        rules: policies
            .in_force(&switches)
            .into_iter()
            .zip(&policies.rules)
            .map(|(now, configured)| RemedyRule {
                cause: now.cause,
                action: DRAIN.into(),
                mode: now.mode,
                configured: configured.mode,
            })
            .collect(),
        limits: RemedyLimits {
            cooldown_seconds: (l.cooldown_ms / 1000) as u64,
            max_actions_per_hour: l.per_hour,
            breaker_window_minutes: (l.window_ms / 60_000) as u64,
            breaker_domain_share: l.domain_share,
            breaker_fleet_share: l.fleet_share,
        },
        kill_switch: switches.kill,
        breakers: switches.breakers,
        executed_last_hour,
        decisions,
    })
}

/// Why an admin's change was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("the store: {0}")]
    Store(#[from] StoreError),
}

/// Applies `change` as `user` (an admin; the route checks): the audit row first, then the
/// change, then the row's outcome.
pub async fn change(
    store: &Store,
    policies: &Policies,
    user: &str,
    role: Role,
    change: &RemediationChange,
    note: &str,
) -> Result<(), ChangeError> {
    super::check_note(note).map_err(|m| ChangeError::Invalid(m.into()))?;
    let now = wall_now_ms();
    let (action, target, detail) = match change {
        RemediationChange::KillSwitch { on } => (
            "remediation_kill_switch",
            "kill switch".to_string(),
            if *on { "on" } else { "off" }.to_string(),
        ),
        RemediationChange::ResetBreaker { domain } => {
            let open = Switches::read(store.remediation_settings().await?).open();
            if !open.contains(domain) {
                return Err(ChangeError::NotFound(format!(
                    "no open breaker {:?}",
                    domain.chars().take(64).collect::<String>()
                )));
            }
            ("remediation_breaker_reset", domain.clone(), "reset".into())
        }
        RemediationChange::Mode { cause, mode } => {
            if !policies.rules.iter().any(|r| &r.cause == cause) {
                return Err(ChangeError::NotFound(format!(
                    "no rule for cause {:?}",
                    cause.chars().take(64).collect::<String>()
                )));
            }
            ("remediation_mode", cause.clone(), mode.as_str().to_string())
        }
    };
    let audit = store
        .audit_begin(
            now,
            user,
            role,
            action,
            &target,
            &format!("{detail}; note: {note}"),
        )
        .await?;
    let done = match change {
        RemediationChange::KillSwitch { on: true } => store
            .set_remediation_setting(&Setting {
                key: "kill_switch".into(),
                value: "on".into(),
                by: user.into(),
                at_ms: now,
                note: note.into(),
            })
            .await
            .map(|()| true),
        RemediationChange::KillSwitch { on: false } => store
            .clear_remediation_setting("kill_switch")
            .await
            .map(|_| true),
        RemediationChange::ResetBreaker { domain } => {
            store
                .clear_remediation_setting(&format!("breaker:{domain}"))
                .await
        }
        RemediationChange::Mode { cause, mode } => store
            .set_remediation_setting(&Setting {
                key: format!("mode:{cause}"),
                value: mode.as_str().into(),
                by: user.into(),
                at_ms: now,
                note: note.into(),
            })
            .await
            .map(|()| true),
    };
    let (status, result) = match &done {
        Ok(true) => ("ok", "done"),
        Ok(false) => ("failed", "nothing to change"),
        Err(_) => ("failed", "storage unavailable"),
    };
    if let Err(e) = store
        .audit_finish(audit, status, result, wall_now_ms())
        .await
    {
        tracing::error!(error = %e, audit_id = audit, "audit row could not be completed");
    }
    tracing::warn!(user, action, target, detail, status, "remediation changed");
    done?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// `[remediation]`: rules replace the defaults; a cause Gantry has no rule for, an action
    /// other than `drain`, a second rule for one cause, a mode it does not know and a share
    /// out of (0, 1] are refused, each naming its field.
    #[test]
    fn remediation_rules_and_limits_are_checked() {
        let dir = std::env::temp_dir().join(format!("gantry-cfg-rem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let f = dir.join("gantry.toml");
        let load = |text: &str| {
            std::fs::write(&f, text).expect("write");
            crate::config::Config::load(Some(&f), Vec::<(String, String)>::new())
        };
        let c = load(
            "[remediation]\ncooldown_seconds = 600\n[[remediation.rules]]\ncause = \"xid\"\nmode = \"execute\"\n",
        )
        .expect("valid");
        assert_eq!(c.remediation.cooldown_seconds, 600);
        assert_eq!(c.remediation.rules.len(), 1);
        assert_eq!(c.remediation.rules[0].action, "drain");
        assert_eq!(c.remediation.max_actions_per_hour, 3);
        assert_eq!(crate::config::Config::default().remediation.rules.len(), 4);
        for (text, field) in [
            ("[[remediation.rules]]\ncause = \"no_such\"\nmode = \"observe\"\n", "remediation.rules.cause"),
            ("[[remediation.rules]]\ncause = \"xid\"\naction = \"reboot\"\nmode = \"observe\"\n", "remediation.rules.action"),
            ("[[remediation.rules]]\ncause = \"xid\"\nmode = \"observe\"\n[[remediation.rules]]\ncause = \"xid\"\nmode = \"execute\"\n", "remediation.rules.cause"),
            ("[[remediation.rules]]\ncause = \"xid\"\nmode = \"always\"\n", "mode"),
            ("[remediation]\nbreaker_fleet_share = 0\n", "remediation.breaker_fleet_share"),
            ("[remediation]\nbreaker_domain_share = 1.5\n", "remediation.breaker_domain_share"),
            ("[remediation]\nbreaker_window_minutes = 0\n", "remediation.breaker_window_minutes"),
        ] {
            let e = load(text).expect_err(text);
            assert!(e.to_string().contains(field), "{text}: {e}");
        }
        // `alerts.auto_drain` runs the recommend rules in execute.
        let c = load("[alerts]\nauto_drain = true\n").expect("valid");
        let p = super::Policies::new(&c.remediation, c.alerts.auto_drain);
        assert!(p
            .rules
            .iter()
            .all(|r| r.mode == app::remediation::Mode::Execute));
    }
}
