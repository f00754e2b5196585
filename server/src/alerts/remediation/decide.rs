//! Pure: which open incidents a rule acts on, and whether the limits let it act. Incidents,
//! rules, the limits, where each node sits and what was executed before in; one proposal
//! per incident a rule covers, and the breakers to trip, out.
//!
//! The limits are checked in this order, each before anything runs: the kill switch; the
//! cooldown per node and cause; a breaker already open on any of the node's domains (the
//! fleet, its rack, its NVLink or leaf domain); the breakers' shares (the domain's nodes
//! acted on within the window plus those about to be, past the share of its nodes, trips
//! the breaker before anything runs); then the actions an hour.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use app::model::UnixMs;
use app::remediation::Mode;
use app::views::Incident;

/// One rule: incidents caused by `cause` get a drain of their node, in `mode`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub cause: String,
    pub mode: Mode,
}

/// The limits every execution passes (`[remediation]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    pub cooldown_ms: i64,
    pub per_hour: u32,
    pub window_ms: i64,
    pub domain_share: f64,
    pub fleet_share: f64,
}

/// An execution: when, on which node, for which cause.
#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    pub at_ms: UnixMs,
    pub node: String,
    pub cause: String,
}

/// Where the nodes are, and which are out of service (nothing to do there).
#[derive(Default)]
pub struct World {
    pub fleet_nodes: usize,
    /// Per node its domains besides the fleet (`rack:B02`, `domain:nvl1`).
    pub domains_of: HashMap<String, Vec<String>>,
    pub domain_size: HashMap<String, usize>,
    pub out_of_service: HashSet<String>,
}

/// Why an execution was held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Held {
    KillSwitch,
    Cooldown,
    Breaker,
    Hourly,
}

impl Held {
    pub fn as_str(self) -> &'static str {
        match self {
            Held::KillSwitch => "kill_switch",
            Held::Cooldown => "cooldown",
            Held::Breaker => "breaker",
            Held::Hourly => "hourly_limit",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Observed,
    Recommended,
    Execute,
    Held(Held),
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Observed => "observed",
            Outcome::Recommended => "recommended",
            Outcome::Execute => "executed",
            Outcome::Held(_) => "held",
        }
    }
}

/// What a rule does, or would do, about one incident.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub incident: i64,
    pub cause: String,
    pub node: String,
    pub mode: Mode,
    pub outcome: Outcome,
    /// In words: what, and which limit held it.
    pub detail: String,
    /// The cause's summary (a drain's reason says it).
    pub summary: String,
}

/// What [`decide`] says.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub proposals: Vec<Proposal>,
    /// Breakers to trip now, with why.
    pub trip: BTreeMap<String, String>,
}

/// The node an incident is about, if its cause is a node's (`node:X`, `node:X:gpuN`).
pub fn node_of(i: &Incident) -> Option<&str> {
    let rest = i.cause.subject.strip_prefix("node:")?;
    Some(rest.split(':').next().unwrap_or(rest)).filter(|n| !n.is_empty())
}

/// What holds now besides the world: the kill switch, the breakers open, what was
/// executed before, and the time.
#[derive(Clone, Copy)]
pub struct Ledger<'a> {
    pub kill: bool,
    pub open_breakers: &'a BTreeSet<String>,
    pub done: &'a [Done],
    pub now: UnixMs,
}

/// The proposals for `incidents` (in their order: critical first).
pub fn decide(
    incidents: &[Incident],
    rules: &[Rule],
    limits: &Limits,
    world: &World,
    ledger: &Ledger<'_>,
) -> Plan {
    let Ledger {
        kill,
        open_breakers,
        done,
        now,
    } = *ledger;
    let mut plan = Plan::default();
    // Executions wanted now, as indices into `plan.proposals`.
    let mut wanting: Vec<usize> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for i in incidents {
        let Some(rule) = rules.iter().find(|r| r.cause == i.cause.rule) else {
            continue;
        };
        let Some(node) = node_of(i) else { continue };
        // Out of service already (drained by anyone, down): nothing to do. One proposal
        // per node: its second incident waits for the first's end.
        if world.out_of_service.contains(node) || !seen.insert(node) {
            continue;
        }
        let mut p = Proposal {
            incident: i.id,
            cause: rule.cause.clone(),
            node: node.to_string(),
            mode: rule.mode,
            outcome: Outcome::Observed,
            detail: String::new(),
            summary: i.cause.summary.chars().take(400).collect(),
        };
        match rule.mode {
            Mode::Observe => p.detail = format!("would drain {node} ({})", rule.cause),
            Mode::Recommend => {
                p.outcome = Outcome::Recommended;
                p.detail = format!("drain {node} ({}): recommended", rule.cause);
            }
            Mode::Execute => {
                let domains = domains(world, node);
                if kill {
                    p.outcome = Outcome::Held(Held::KillSwitch);
                    p.detail = format!("would drain {node}: the kill switch is on");
                } else if let Some(d) = done.iter().find(|d| {
                    d.node == node && d.cause == rule.cause && now - d.at_ms < limits.cooldown_ms
                }) {
                    p.outcome = Outcome::Held(Held::Cooldown);
                    p.detail = format!(
                        "would drain {node}: acted on it for {} {} s ago (cooldown {} s)",
                        rule.cause,
                        (now - d.at_ms) / 1000,
                        limits.cooldown_ms / 1000
                    );
                } else if let Some(b) = domains.iter().find(|d| open_breakers.contains(*d)) {
                    p.outcome = Outcome::Held(Held::Breaker);
                    p.detail = format!("would drain {node}: the {b} breaker is open");
                } else {
                    p.outcome = Outcome::Execute;
                    p.detail = format!("drain {node} ({})", rule.cause);
                    wanting.push(plan.proposals.len());
                }
            }
        }
        plan.proposals.push(p);
    }
    if wanting.is_empty() {
        return plan;
    }
    // The breakers: per domain, the nodes acted on within the window and those wanted now.
    let recent: BTreeSet<&str> = done
        .iter()
        .filter(|d| now - d.at_ms < limits.window_ms)
        .map(|d| d.node.as_str())
        .collect();
    let mut count: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for n in &recent {
        for d in domains(world, n) {
            count.entry(d).or_default().insert(n);
        }
    }
    // Only a domain an execution now would add to can trip now.
    let mut touched: BTreeSet<String> = BTreeSet::new();
    for &k in &wanting {
        let n = plan.proposals[k].node.as_str();
        for d in domains(world, n) {
            count.entry(d.clone()).or_default().insert(n);
            touched.insert(d);
        }
    }
    for (d, nodes) in count.iter().filter(|(d, _)| touched.contains(*d)) {
        let (size, share) = if d == "fleet" {
            (world.fleet_nodes, limits.fleet_share)
        } else {
            (
                world.domain_size.get(d).copied().unwrap_or(0),
                limits.domain_share,
            )
        };
        let allowed = allowed(size, share);
        if nodes.len() > allowed {
            plan.trip.insert(
                d.clone(),
                format!(
                    "{} of its {size} nodes needed action within {} min (at most {allowed})",
                    nodes.len(),
                    limits.window_ms / 60_000
                ),
            );
        }
    }
    let hour_ago = now - 3_600_000;
    let mut this_hour = done.iter().filter(|d| d.at_ms > hour_ago).count() as u32;
    for k in wanting {
        let p = &mut plan.proposals[k];
        let node = p.node.clone();
        if let Some(b) = domains(world, &node)
            .iter()
            .find(|d| plan.trip.contains_key(*d))
        {
            p.outcome = Outcome::Held(Held::Breaker);
            p.detail = format!(
                "would drain {node}: tripped the {b} breaker ({})",
                plan.trip[b]
            );
        } else if this_hour >= limits.per_hour {
            p.outcome = Outcome::Held(Held::Hourly);
            p.detail = format!(
                "would drain {node}: {this_hour} actions this hour (at most {})",
                limits.per_hour
            );
        } else {
            this_hour += 1;
        }
    }
    plan
}

/// Nodes of `size` a breaker of `share` lets be acted on within its window: at least one.
fn allowed(size: usize, share: f64) -> usize {
    ((size as f64 * share).floor() as usize).max(1)
}

fn domains(world: &World, node: &str) -> Vec<String> {
    let mut v = vec!["fleet".to_string()];
    if let Some(ds) = world.domains_of.get(node) {
        v.extend(ds.iter().cloned());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: UnixMs = 1_800_000_000_000;

    fn incident(id: i64, rule: &str, node: &str) -> Incident {
        serde_json::from_value(serde_json::json!({
            "id": id, "severity": "critical", "started_ms": NOW, "acked": false,
            "cause": {"id": id, "rule": rule, "subject": format!("node:{node}:gpu1"),
                "severity": "critical", "summary": "s", "link": "", "state": "firing",
                "started_ms": NOW, "resolved_ms": null, "acked_by": null, "acked_ms": null,
                "ack_note": null, "silenced_until_ms": null},
            "alerts": [], "place": format!("node {node}"), "place_link": "", "nodes": [node],
            "racks": [], "jobs": [], "action": "a"
        }))
        .expect("an incident")
    }

    /// 64 nodes, 8 racks of 8 (`n00`..`n63`, rack `r{i/8}`).
    fn world() -> World {
        let mut w = World {
            fleet_nodes: 64,
            ..Default::default()
        };
        for i in 0..64 {
            let rack = format!("rack:r{}", i / 8);
            w.domains_of.insert(format!("n{i:02}"), vec![rack.clone()]);
            *w.domain_size.entry(rack).or_default() += 1;
        }
        w
    }

    fn limits() -> Limits {
        Limits {
            cooldown_ms: 3_600_000,
            per_hour: 3,
            window_ms: 300_000,
            domain_share: 0.5,
            fleet_share: 0.05,
        }
    }

    fn execute(cause: &str) -> Vec<Rule> {
        vec![Rule {
            cause: cause.into(),
            mode: Mode::Execute,
        }]
    }

    /// What holds besides the incidents and rules: nothing executed, no breaker open,
    /// the kill switch off, 64 nodes in racks of 8, the default limits, at `NOW`.
    struct Case {
        limits: Limits,
        world: World,
        kill: bool,
        open: BTreeSet<String>,
        done: Vec<Done>,
        now: UnixMs,
    }

    impl Default for Case {
        fn default() -> Case {
            Case {
                limits: limits(),
                world: world(),
                kill: false,
                open: BTreeSet::new(),
                done: Vec::new(),
                now: NOW,
            }
        }
    }

    impl Case {
        fn plan(&self, inc: &[Incident], rules: &[Rule]) -> Plan {
            decide(
                inc,
                rules,
                &self.limits,
                &self.world,
                &Ledger {
                    kill: self.kill,
                    open_breakers: &self.open,
                    done: &self.done,
                    now: self.now,
                },
            )
        }
    }

    fn outcomes(p: &Plan) -> Vec<(String, Outcome)> {
        p.proposals
            .iter()
            .map(|p| (p.node.clone(), p.outcome.clone()))
            .collect()
    }

    #[test]
    fn each_mode_does_what_it_says_and_other_causes_are_left_alone() {
        let inc = [
            incident(1, "ecc_double_bit", "n01"),
            incident(2, "xid", "n02"),
            incident(3, "thermal_throttling", "n03"),
        ];
        let rules = vec![
            Rule {
                cause: "ecc_double_bit".into(),
                mode: Mode::Observe,
            },
            Rule {
                cause: "xid".into(),
                mode: Mode::Recommend,
            },
        ];
        let p = Case::default().plan(&inc, &rules);
        assert_eq!(
            outcomes(&p),
            [
                ("n01".to_string(), Outcome::Observed),
                ("n02".to_string(), Outcome::Recommended)
            ]
        );
        assert_eq!(p.proposals[0].detail, "would drain n01 (ecc_double_bit)");
        assert!(p.trip.is_empty());
    }

    #[test]
    fn the_kill_switch_and_the_cooldown_hold_an_execution() {
        let inc = [incident(1, "xid", "n01")];
        let rules = execute("xid");
        let killed = Case {
            kill: true,
            ..Case::default()
        };
        assert_eq!(
            outcomes(&killed.plan(&inc, &rules))[0].1,
            Outcome::Held(Held::KillSwitch)
        );
        let mut c = Case {
            done: vec![Done {
                at_ms: NOW - 1_000_000,
                node: "n01".into(),
                cause: "xid".into(),
            }],
            ..Case::default()
        };
        assert_eq!(
            outcomes(&c.plan(&inc, &rules))[0].1,
            Outcome::Held(Held::Cooldown)
        );
        // Past the cooldown it runs.
        c.now = NOW + 2_600_001;
        assert_eq!(outcomes(&c.plan(&inc, &rules))[0].1, Outcome::Execute);
        // Out of service already: nothing proposed.
        let mut c = Case::default();
        c.world.out_of_service.insert("n01".into());
        assert!(c.plan(&inc, &rules).proposals.is_empty());
    }

    #[test]
    fn a_storm_trips_the_fleet_breaker_before_any_limit_is_passed() {
        // 10% of 64 nodes (7) fail at once: the fleet may lose 3 (5%) within 5 minutes.
        let inc: Vec<Incident> = (0..7)
            .map(|k| incident(k, "ecc_double_bit", &format!("n{:02}", k * 9)))
            .collect();
        let rules = execute("ecc_double_bit");
        let p = Case::default().plan(&inc, &rules);
        assert!(p.trip.contains_key("fleet"), "{:?}", p.trip);
        assert!(p
            .proposals
            .iter()
            .all(|p| p.outcome == Outcome::Held(Held::Breaker)));
        // Arriving one by one: three run (the hourly limit and the share agree), the
        // fourth within the window trips the breaker rather than run.
        let mut c = Case::default();
        let mut executed = 0;
        for k in 0..7 {
            c.now = NOW + k * 10_000;
            let p = c.plan(&inc[..=k as usize], &rules);
            for pr in &p.proposals {
                if pr.outcome == Outcome::Execute && !c.done.iter().any(|d| d.node == pr.node) {
                    c.done.push(Done {
                        at_ms: c.now,
                        node: pr.node.clone(),
                        cause: pr.cause.clone(),
                    });
                    executed += 1;
                }
            }
            c.open.extend(p.trip.keys().cloned());
        }
        assert_eq!(executed, 3);
        assert!(c.open.contains("fleet"));
    }

    #[test]
    fn a_rack_breaker_trips_past_half_its_nodes_and_stays_open() {
        let mut c = Case::default();
        c.limits.fleet_share = 1.0;
        c.limits.per_hour = 100;
        // Five of rack r0's eight nodes.
        let inc: Vec<Incident> = (0..5)
            .map(|k| incident(k, "xid", &format!("n{k:02}")))
            .collect();
        let p = c.plan(&inc, &execute("xid"));
        assert_eq!(p.trip.keys().collect::<Vec<_>>(), ["rack:r0"]);
        assert!(
            p.trip["rack:r0"].starts_with("5 of its 8 nodes"),
            "{:?}",
            p.trip
        );
        // Open: a node elsewhere runs, one in the rack is held.
        c.open.insert("rack:r0".into());
        let inc = [incident(9, "xid", "n05"), incident(10, "xid", "n20")];
        assert_eq!(
            outcomes(&c.plan(&inc, &execute("xid"))),
            [
                ("n05".to_string(), Outcome::Held(Held::Breaker)),
                ("n20".to_string(), Outcome::Execute)
            ]
        );
    }

    #[test]
    fn the_hourly_limit_holds_the_fourth() {
        let mut c = Case::default();
        c.limits.fleet_share = 1.0;
        let inc: Vec<Incident> = (0..4)
            .map(|k| incident(k, "xid", &format!("n{:02}", k * 8)))
            .collect();
        let p = c.plan(&inc, &execute("xid"));
        let o: Vec<Outcome> = p.proposals.iter().map(|p| p.outcome.clone()).collect();
        assert_eq!(
            o,
            [
                Outcome::Execute,
                Outcome::Execute,
                Outcome::Execute,
                Outcome::Held(Held::Hourly)
            ]
        );
    }

    #[test]
    fn the_node_is_read_from_the_cause() {
        let i = incident(1, "xid", "gpu003");
        assert_eq!(node_of(&i), Some("gpu003"));
        let mut j = i.clone();
        j.cause.subject = "rack:B01".into();
        assert_eq!(node_of(&j), None);
    }
}
