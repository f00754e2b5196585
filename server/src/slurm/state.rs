//! Slurm node and job states, normalized from every representation Gantry meets:
//! REST/JSON v0.0.37-38 (lower-case base + `state_flags`), v0.0.39+ (upper-case array,
//! base first), `scontrol` text (`IDLE+DRAIN`), and `sinfo` long/compact forms
//! (`draining`, `drng`, `idle*`). Unknown words are kept, never fatal. Pure.

use app::model::{JobState, NodeState};

/// A node state as Slurm gave it and as Gantry understands it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStateParts {
    /// Upper-case base state (`IDLE`, `MIXED`, ...).
    pub base: String,
    /// Upper-case flags (`DRAIN`, `NOT_RESPONDING`, ...).
    pub flags: Vec<String>,
}

impl NodeStateParts {
    /// From a base string and flags (JSON v0.0.37-38).
    pub fn from_base_and_flags(base: &str, flags: &[String]) -> NodeStateParts {
        NodeStateParts {
            base: base.trim().to_ascii_uppercase(),
            flags: flags.iter().map(|f| f.to_ascii_uppercase()).collect(),
        }
    }

    /// From an array, base first (JSON v0.0.39+).
    pub fn from_array(words: &[String]) -> NodeStateParts {
        let mut it = words.iter().map(|w| w.to_ascii_uppercase());
        NodeStateParts {
            base: it.next().unwrap_or_default(),
            flags: it.collect(),
        }
    }

    /// From CLI text: `IDLE+DRAIN`, `MIXED+DRAIN+NOT_RESPONDING`, `draining`, `drng`, `idle*`,
    /// `down*`, `mix$`, `alloc`.
    pub fn from_cli(text: &str) -> NodeStateParts {
        let t = text.trim();
        let mut flags = Vec::new();
        let mut core = t;
        // Suffix symbols (sinfo): * not responding, $ maintenance, @ reboot requested, ^ reboot issued,
        // ~ powered down, # powering up, % powering down, ! power down pending, + completing.
        while let Some(c) = core.chars().last().filter(|c| "*$@^~#%!+".contains(*c)) {
            flags.push(
                match c {
                    '*' => "NOT_RESPONDING",
                    '$' => "MAINTENANCE",
                    '@' => "REBOOT_REQUESTED",
                    '^' => "REBOOT_ISSUED",
                    '~' => "POWERED_DOWN",
                    '#' => "POWERING_UP",
                    '%' => "POWERING_DOWN",
                    '!' => "POWER_DOWN",
                    _ => "COMPLETING",
                }
                .to_string(),
            );
            core = &core[..core.len() - c.len_utf8()];
        }
        let mut words = core.split('+').map(|w| w.trim().to_ascii_uppercase());
        let first = words.next().unwrap_or_default();
        let mut parts_flags: Vec<String> = words.collect();
        let base = match first.as_str() {
            // Derived names and compact forms.
            "DRAINING" | "DRNG" => {
                parts_flags.push("DRAIN".into());
                "MIXED".to_string()
            }
            "DRAINED" | "DRAIN" => {
                parts_flags.push("DRAIN".into());
                "IDLE".to_string()
            }
            "ALLOC" => "ALLOCATED".into(),
            "MIX" => "MIXED".into(),
            "COMP" | "COMPLETING" => {
                parts_flags.push("COMPLETING".into());
                "ALLOCATED".into()
            }
            "MAINT" => {
                parts_flags.push("MAINTENANCE".into());
                "IDLE".into()
            }
            "RESV" | "RESERVED" => {
                parts_flags.push("RESERVED".into());
                "IDLE".into()
            }
            "PLND" | "PLANNED" => {
                parts_flags.push("PLANNED".into());
                "IDLE".into()
            }
            "INVAL" => {
                parts_flags.push("INVALID_REG".into());
                "IDLE".into()
            }
            "UNK" => "UNKNOWN".into(),
            other => other.to_string(),
        };
        parts_flags.extend(flags);
        NodeStateParts {
            base,
            flags: parts_flags,
        }
    }

    fn has(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }

    /// Gantry's state. DRAIN on an allocated or mixed node (or one still completing) is
    /// DRAINING; on an idle or down node DRAINED, as Slurm's own `node_state_string` says.
    pub fn normalize(&self) -> NodeState {
        let base = self.base.as_str();
        if self.has("DRAIN") {
            let busy = matches!(base, "ALLOCATED" | "MIXED") || self.has("COMPLETING");
            return if busy {
                NodeState::Draining
            } else {
                NodeState::Drained
            };
        }
        if self.has("NOT_RESPONDING") {
            return if base == "DOWN" {
                NodeState::Down
            } else {
                NodeState::NotResponding
            };
        }
        if self.has("MAINTENANCE") {
            return NodeState::Maintenance;
        }
        match base {
            "IDLE" if self.has("RESERVED") => NodeState::Reserved,
            "IDLE" if self.has("PLANNED") => NodeState::Planned,
            "IDLE" => NodeState::Idle,
            "ALLOCATED" => NodeState::Allocated,
            "MIXED" => NodeState::Mixed,
            "DOWN" | "ERROR" | "FAIL" => NodeState::Down,
            _ => NodeState::Unknown,
        }
    }
}

/// A job state from a string (`"RUNNING"`) or the base of an array (`["PENDING","REQUEUED"]`).
pub fn job_state(words: &[String]) -> JobState {
    let has = |w: &str| words.iter().any(|x| x.eq_ignore_ascii_case(w));
    let base = words
        .first()
        .map(|w| w.to_ascii_uppercase())
        .unwrap_or_default();
    if has("REQUEUED") || has("REQUEUE_HOLD") || has("REQUEUE_FED") {
        return JobState::Requeued;
    }
    match base.as_str() {
        "PENDING" => JobState::Pending,
        "RUNNING" | "SUSPENDED" | "CONFIGURING" => JobState::Running,
        "COMPLETING" => JobState::Completing,
        "COMPLETED" => JobState::Completed,
        "FAILED" | "BOOT_FAIL" | "OUT_OF_MEMORY" | "LAUNCH_FAILED" | "DEADLINE" => JobState::Failed,
        "CANCELLED" | "PREEMPTED" | "REVOKED" => JobState::Cancelled,
        "TIMEOUT" => JobState::Timeout,
        "NODE_FAIL" => JobState::NodeFail,
        _ => JobState::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn json_v0038_base_and_flags() {
        let n = |b: &str, f: &[&str]| NodeStateParts::from_base_and_flags(b, &v(f)).normalize();
        assert_eq!(n("idle", &[]), NodeState::Idle);
        assert_eq!(n("mixed", &["DRAIN"]), NodeState::Draining);
        assert_eq!(n("idle", &["DRAIN"]), NodeState::Drained);
        assert_eq!(n("down", &["DRAIN", "NOT_RESPONDING"]), NodeState::Drained);
        assert_eq!(n("idle", &["NOT_RESPONDING"]), NodeState::NotResponding);
        assert_eq!(n("down", &["NOT_RESPONDING"]), NodeState::Down);
        assert_eq!(n("allocated", &[]), NodeState::Allocated);
    }

    #[test]
    fn json_v0039_plus_arrays() {
        let n = |w: &[&str]| NodeStateParts::from_array(&v(w)).normalize();
        assert_eq!(n(&["IDLE", "DRAIN"]), NodeState::Drained);
        assert_eq!(n(&["MIXED", "DRAIN"]), NodeState::Draining);
        assert_eq!(n(&["IDLE", "COMPLETING", "DRAIN"]), NodeState::Draining);
        assert_eq!(n(&["IDLE", "PLANNED"]), NodeState::Planned);
        assert_eq!(n(&["IDLE", "RESERVED"]), NodeState::Reserved);
        assert_eq!(n(&["IDLE", "MAINTENANCE"]), NodeState::Maintenance);
        assert_eq!(n(&["DOWN"]), NodeState::Down);
        assert_eq!(n(&["FUTURE"]), NodeState::Unknown);
        assert_eq!(n(&[]), NodeState::Unknown);
        // A word from a newer Slurm is kept and is not fatal.
        let p = NodeStateParts::from_array(&v(&["IDLE", "BRAND_NEW_FLAG"]));
        assert_eq!(p.normalize(), NodeState::Idle);
        assert_eq!(p.flags, vec!["BRAND_NEW_FLAG"]);
    }

    #[test]
    fn cli_text_long_and_compact() {
        let n = |t: &str| NodeStateParts::from_cli(t).normalize();
        assert_eq!(n("IDLE+DRAIN"), NodeState::Drained);
        assert_eq!(n("MIXED+DRAIN"), NodeState::Draining);
        assert_eq!(n("DOWN+DRAIN+NOT_RESPONDING"), NodeState::Drained);
        assert_eq!(n("IDLE+NOT_RESPONDING"), NodeState::NotResponding);
        assert_eq!(n("draining"), NodeState::Draining);
        assert_eq!(n("drng"), NodeState::Draining);
        assert_eq!(n("drained"), NodeState::Drained);
        assert_eq!(n("drain"), NodeState::Drained);
        assert_eq!(n("idle*"), NodeState::NotResponding);
        assert_eq!(n("down*"), NodeState::Down);
        assert_eq!(n("mix"), NodeState::Mixed);
        assert_eq!(n("alloc"), NodeState::Allocated);
        assert_eq!(n("maint"), NodeState::Maintenance);
        assert_eq!(n("idle$"), NodeState::Maintenance);
        assert_eq!(n("plnd"), NodeState::Planned);
        assert_eq!(n("resv"), NodeState::Reserved);
        assert_eq!(n("idle~"), NodeState::Idle);
    }

    #[test]
    fn job_states_from_strings_and_arrays() {
        assert_eq!(job_state(&v(&["RUNNING"])), JobState::Running);
        assert_eq!(job_state(&v(&["PENDING", "REQUEUED"])), JobState::Requeued);
        assert_eq!(job_state(&v(&["PENDING"])), JobState::Pending);
        assert_eq!(job_state(&v(&["COMPLETED"])), JobState::Completed);
        assert_eq!(job_state(&v(&["OUT_OF_MEMORY"])), JobState::Failed);
        assert_eq!(job_state(&v(&["NODE_FAIL"])), JobState::NodeFail);
        assert_eq!(job_state(&v(&["timeout"])), JobState::Timeout);
        assert_eq!(job_state(&v(&["SOMETHING_NEW"])), JobState::Other);
    }
}
