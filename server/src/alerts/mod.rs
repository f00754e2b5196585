//! Alerts: the field's rules, evaluated once per live tick on what Gantry already knows.
//!
//! [`evaluate`] is pure: the newest overview, readings, scheduler state, scrape health and
//! NCCL/checkpoint facts in, the conditions true now out (with durations tracked in
//! [`RuleState`], in source time). The task diffs them against the open alerts: a new
//! condition fires (one row, one webhook delivery); one that vanished resolves after it
//! stayed clear a few evaluations (a minute if critical), and one gone for want of
//! readings stays open, marked "no data" (`lifecycle.rs`). One back soon after its
//! resolution reopens the same row (a flap). Operators
//! acknowledge (with a note) and silence until a time.
//!
//! `incidents.rs` groups the open alerts into incidents, one per failure, along the tree;
//! `timeline.rs` tells one incident's story from what the store kept;
//! `alertmanager.rs` sends them to the site's Alertmanager.
//! `remediation/` runs the policies on the incidents (observe, recommend, execute within
//! limits). `rules/` holds the rules and their state (pure), `task.rs` the task,
//! `webhook.rs` delivery with retries.

pub mod alertmanager;
pub mod incidents;
mod lifecycle;
pub mod remediation;
mod rules;
mod task;
pub mod timeline;
mod webhook;

pub use lifecycle::{Lifecycle, Step};
pub use rules::{evaluate, has_data, radar, AlertConfig, Condition, Facts, RuleState};
pub use task::{is_rule, run, AlertTask};

/// A person's note on an alert or a policy change, from the API or a page: at most 1000
/// characters, no control characters.
pub fn check_note(note: &str) -> Result<(), &'static str> {
    if note.chars().count() > 1000 || note.chars().any(char::is_control) {
        return Err("note: at most 1000 characters, no control characters");
    }
    Ok(())
}
pub use webhook::WebhookFormat;
