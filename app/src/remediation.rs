//! Remediation policies on the wire: what each rule does and in which mode, the limits
//! that always hold, the breakers and the kill switch, and every decision a policy took.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// How far a rule may go: record what it would do, offer it on the incident, or do it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Observe,
    Recommend,
    Execute,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Observe, Mode::Recommend, Mode::Execute];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Recommend => "recommend",
            Mode::Execute => "execute",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// One rule: an incident whose cause is `cause` gets `action` on its node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RemedyRule {
    /// The incident's cause (an alert rule: `ecc_double_bit`, `xid`, …).
    pub cause: String,
    /// `drain`.
    pub action: String,
    /// The mode in force (an admin's change, else the configured one).
    pub mode: Mode,
    /// The mode the configuration gives.
    pub configured: Mode,
}

/// The limits every execution passes first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RemedyLimits {
    /// Per node and cause: no second action within this many seconds.
    pub cooldown_seconds: u64,
    /// Executions in any hour, at most.
    pub max_actions_per_hour: u32,
    /// A breaker counts a domain's nodes acted on (or about to be) within this window.
    pub breaker_window_minutes: u64,
    /// A rack's, NVLink or switch domain's breaker trips past this share of its nodes.
    pub breaker_domain_share: f64,
    /// The fleet's breaker trips past this share of every node.
    pub breaker_fleet_share: f64,
}

/// A breaker that tripped: no execution in its domain until a person resets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Breaker {
    /// `fleet`, `rack:B02`, `domain:leaf03`.
    pub domain: String,
    pub tripped_ms: UnixMs,
    /// Why, in words.
    pub detail: String,
}

/// Who switched the kill switch on, when and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct KillSwitch {
    pub by: String,
    pub since_ms: UnixMs,
    pub note: String,
}

/// One decision a policy took on an incident.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RemedyDecision {
    pub id: i64,
    pub at_ms: UnixMs,
    /// The incident (its cause's alert id).
    pub incident: i64,
    pub cause: String,
    pub node: String,
    pub action: String,
    pub mode: Mode,
    /// `observed` (would have acted), `recommended`, `executed` or `held` (a limit).
    pub outcome: String,
    /// What it did or would do, or which limit held it.
    pub detail: String,
    /// The action it started (its audit rows), when executed.
    pub action_id: Option<i64>,
}

/// `GET /api/remediation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct RemediationView {
    /// On: nothing is executed (observe and recommend go on).
    pub kill_switch: Option<KillSwitch>,
    pub rules: Vec<RemedyRule>,
    pub limits: RemedyLimits,
    pub breakers: Vec<Breaker>,
    /// Executions in the last hour.
    pub executed_last_hour: u32,
    /// Newest first.
    pub decisions: Vec<RemedyDecision>,
}

/// What an admin changes at run time (each is audited).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum RemediationChange {
    /// Stop (`on`) or allow executions.
    KillSwitch { on: bool },
    /// Close a tripped breaker.
    ResetBreaker { domain: String },
    /// Run a rule in another mode.
    Mode { cause: String, mode: Mode },
}
