//! Wire types of users, roles, actions and the audit log, shared by the server and the
//! browser. No I/O here.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// What a user may do. Ordered: each role can do everything the ones before it can.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads every page.
    Viewer,
    /// Drains, resumes and requeues; reads the audit log.
    Operator,
    /// Reads reports and costs (and everything a viewer reads).
    Manager,
    /// Everything, including users.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Operator, Role::Manager, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Manager => "manager",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this role may read reports and costs.
    pub fn can_report(self) -> bool {
        matches!(self, Role::Manager | Role::Admin)
    }

    /// Whether this role may see reliability (interruptions, their causes, lemon nodes):
    /// operators act on it, managers review it, admins both.
    pub fn can_review_reliability(self) -> bool {
        matches!(self, Role::Operator | Role::Manager | Role::Admin)
    }

    /// Whether this role may drain, resume and requeue. A manager reviews; it does not act.
    pub fn can_act(self) -> bool {
        matches!(self, Role::Operator | Role::Admin)
    }
}

/// Who is looking at the page.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Me {
    /// `None` when anonymous read-only viewing is on and nobody is signed in.
    pub user: Option<String>,
    pub role: Option<Role>,
}

impl Me {
    pub fn can_act(&self) -> bool {
        self.role.is_some_and(Role::can_act)
    }
}

/// The actions Gantry can take on the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Drain,
    Resume,
    Requeue,
    RequeueHold,
}

impl ActionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Drain => "drain",
            ActionKind::Resume => "resume",
            ActionKind::Requeue => "requeue",
            ActionKind::RequeueHold => "requeue_hold",
        }
    }

    pub const ALL: [ActionKind; 4] = [
        ActionKind::Drain,
        ActionKind::Resume,
        ActionKind::Requeue,
        ActionKind::RequeueHold,
    ];

    /// The kind [`ActionKind::as_str`] names.
    pub fn parse(s: &str) -> Option<ActionKind> {
        ActionKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn label(self) -> &'static str {
        match self {
            ActionKind::Drain => "Drain",
            ActionKind::Resume => "Resume",
            ActionKind::Requeue => "Requeue",
            ActionKind::RequeueHold => "Requeue and hold",
        }
    }

    pub fn on_nodes(self) -> bool {
        matches!(self, ActionKind::Drain | ActionKind::Resume)
    }
}

/// One request: an action on nodes (given by name, or all nodes of a rack) or on jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ActionTargets {
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Every node of this rack (bulk drain for maintenance).
    #[serde(default)]
    pub rack: Option<String>,
    /// Every node of this switch domain (NVLink domain, leaf, spine or block).
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default, deserialize_with = "whole::vec_u64")]
    pub jobs: Vec<u64>,
    /// For a requeue: nodes its jobs must never run on again (Slurm's `ExcNodeList`; the
    /// nodes blamed for their failure). At most 64.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// A job an action would touch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AffectedJob {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub gpus: u32,
    pub nodes: Vec<String>,
    pub running_since_ms: Option<UnixMs>,
    /// Age of its newest complete checkpoint, when Gantry knows one.
    pub last_checkpoint_age_ms: Option<i64>,
    /// GPU-hours since that checkpoint (or since the start, with none): what a kill loses.
    pub work_at_risk_gpu_hours: Option<f64>,
}

/// What an action would do, shown before the confirm button.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Preview {
    pub action: ActionKind,
    /// The nodes or job ids acted on, resolved (a rack expanded to its nodes).
    pub targets: Vec<String>,
    /// Targets already in the requested state (nothing will be called for them).
    pub already: Vec<String>,
    /// Running jobs affected: killed by a requeue, left to finish by a drain.
    pub jobs: Vec<AffectedJob>,
    pub gpus_affected: u32,
    pub work_at_risk_gpu_hours: Option<f64>,
    /// Plain words: what will happen.
    pub summary: String,
}

/// One target of an action, as far as it has run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct TargetOutcome {
    pub target: String,
    /// `pending` (recorded, not yet called), `calling` (the call may have been sent), then
    /// one end: `ok`, `already` (nothing to do), `failed`, `unverified` (the call succeeded
    /// but reading the scheduler back did not show the end state in time) or `interrupted`
    /// (the server stopped; the message says what the scheduler showed after the restart).
    pub status: String,
    pub message: String,
    pub audit_id: i64,
}

impl TargetOutcome {
    /// Whether this target has reached its end.
    pub fn finished(&self) -> bool {
        !matches!(self.status.as_str(), "pending" | "calling")
    }
}

/// An action as recorded and as far as it has run: what `POST /api/actions/*` answers
/// (202 while it runs, with `url` to follow) and `GET /api/actions/{id}` shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ActionStatus {
    pub id: i64,
    pub action: ActionKind,
    pub user: String,
    pub at_ms: UnixMs,
    /// `queued` (waiting for the action before it), `running`, `done`, or `stopped` (the
    /// audit log could not be written mid-action: `note` names what was already done).
    pub state: String,
    pub note: String,
    pub finished_ms: Option<UnixMs>,
    pub outcomes: Vec<TargetOutcome>,
    /// Where to follow it: `/api/actions/{id}`.
    pub url: String,
}

impl ActionStatus {
    /// Whether nothing more will happen to it.
    pub fn finished(&self) -> bool {
        matches!(self.state.as_str(), "done" | "stopped")
    }

    /// How many targets have reached their end.
    pub fn ended(&self) -> usize {
        self.outcomes.iter().filter(|o| o.finished()).count()
    }

    /// Finished, and every target ended `ok` or `already`.
    pub fn all_ok(&self) -> bool {
        self.state == "done"
            && self
                .outcomes
                .iter()
                .all(|o| o.status == "ok" || o.status == "already")
    }

    /// The URL of action `id`.
    pub fn url_of(id: i64) -> String {
        format!("/api/actions/{id}")
    }
}

/// One row of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: i64,
    pub at_ms: UnixMs,
    pub user: String,
    pub role: String,
    pub action: String,
    pub target: String,
    pub detail: String,
    /// `pending`, `calling`, then an end as in [`TargetOutcome::status`]. Rows written
    /// before actions were durable were `started` until their end.
    pub status: String,
    pub result: String,
    pub finished_ms: Option<UnixMs>,
}

/// Filters of the audit log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AuditFilter {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
}

/// A user as listed (`gantry user list`, `/admin`, `GET /api/admin/users`): never the hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct UserInfo {
    pub name: String,
    pub role: Role,
    pub disabled: bool,
    pub disabled_ms: Option<UnixMs>,
    pub created_ms: UnixMs,
    /// Sessions valid now.
    pub sessions: u64,
    /// `local` (a password here), `ldap` or `oidc` (the directory gives the role).
    #[serde(default)]
    pub origin: String,
}

/// A session as listed (`/admin`, `GET /api/admin/sessions`): its opaque id, never the
/// token or its digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct SessionInfo {
    pub id: String,
    pub user: String,
    pub created_ms: UnixMs,
    pub last_seen_ms: UnixMs,
    /// When it ends whatever happens (`auth.session_hours` after sign-in).
    pub expires_ms: UnixMs,
    /// When it ends unless it is used before (`auth.session_idle_minutes` after it was
    /// last seen, which is kept to the minute).
    pub idle_expires_ms: UnixMs,
}

/// What `/admin` shows: every user and every valid session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct AdminView {
    pub users: Vec<UserInfo>,
    pub sessions: Vec<SessionInfo>,
}

/// Whole numbers as JSON may write them: `807` or `807.0` (JSON Schema's `integer` takes
/// both), never a fraction, a negative or one out of range.
pub mod whole {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};

    fn of<T: TryFrom<i128>>(n: &serde_json::Number) -> Option<T> {
        let i = if let Some(u) = n.as_u64() {
            i128::from(u)
        } else if let Some(i) = n.as_i64() {
            i128::from(i)
        } else {
            let f = n.as_f64()?;
            if !f.is_finite() || f.fract() != 0.0 || f.abs() > 1e19 {
                return None;
            }
            f as i128
        };
        T::try_from(i).ok()
    }

    fn one<'de, D: Deserializer<'de>, T: TryFrom<i128>>(d: D) -> Result<T, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        of(&n).ok_or_else(|| D::Error::custom(format!("{n}: not a whole number in range")))
    }

    pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        one(d)
    }

    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        one(d)
    }

    pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        one(d)
    }

    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<serde_json::Number>::deserialize(d)?
            .map(|n| {
                of(&n).ok_or_else(|| D::Error::custom(format!("{n}: not a whole number in range")))
            })
            .transpose()
    }

    pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        Option::<serde_json::Number>::deserialize(d)?
            .map(|n| {
                of(&n).ok_or_else(|| D::Error::custom(format!("{n}: not a whole number in range")))
            })
            .transpose()
    }

    pub fn vec_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        Vec::<serde_json::Number>::deserialize(d)?
            .iter()
            .map(|n| {
                of(n).ok_or_else(|| D::Error::custom(format!("{n}: not a whole number in range")))
            })
            .collect()
    }

    #[cfg(test)]
    mod tests {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(deserialize_with = "super::u32")]
            n: u32,
        }

        #[test]
        fn whole_numbers_in_either_spelling() {
            let n = |s: &str| serde_json::from_str::<T>(s).map(|t| t.n).ok();
            assert_eq!(n(r#"{"n": 807}"#), Some(807));
            assert_eq!(n(r#"{"n": 807.0}"#), Some(807));
            assert_eq!(n(r#"{"n": 807.5}"#), None);
            assert_eq!(n(r#"{"n": -1}"#), None);
            assert_eq!(n(r#"{"n": 4294967296}"#), None);
            assert_eq!(n(r#"{"n": 1e300}"#), None);
        }
    }
}
