//! Alerts: the field's rules, evaluated once per live tick on what Gantry already knows.
//!
//! [`evaluate`] is pure: the newest overview, readings, scheduler state, scrape health and
//! NCCL/checkpoint facts in, the conditions true now out (with durations tracked in
//! [`RuleState`], in source time). The task diffs them against the open alerts: a new
//! condition fires (one row, one webhook delivery); one that vanished resolves after it
//! stayed clear a few evaluations (a minute if critical), and one gone for want of
//! readings stays open, marked "no data" (`lifecycle.rs`). One back soon after its
//! resolution reopens the same row (a flap). Operators
//! acknowledge (with a note) and silence until a time. An opt-in policy drains a node on a
//! double-bit ECC error or a drain-class XID through the same action path as a person.
//!
//! `incidents.rs` groups the open alerts into incidents, one per failure, along the tree;
//! `alertmanager.rs` sends them to the site's Alertmanager.
//! `rules/` holds the rules and their state (pure), `task.rs` the task, `webhook.rs`
//! delivery with retries, `policy.rs` the auto-drain policy.

pub mod alertmanager;
pub mod incidents;
mod lifecycle;
mod policy;
mod rules;
mod task;
mod webhook;

pub use lifecycle::{Lifecycle, Step};
pub use rules::{evaluate, has_data, radar, AlertConfig, Condition, Facts, RuleState};
pub use task::{run, AlertTask};
pub use webhook::WebhookFormat;
