//! The server's port into the app (server builds only).
//!
//! Server functions reach live state, storage and the scheduler only through [`Backend`],
//! which the server implements and provides as context when it registers the routes. The
//! app knows nothing of axum state, sqlx or the simulator.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::actions::{
    ActionKind, ActionStatus, ActionTargets, AdminView, AuditEntry, AuditFilter, Me, Preview,
};
use crate::live::Overview;
use crate::views::{AlertItem, JobDetail, JobFilter, NodeDetail, NodesView};

pub type BackendFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// What server functions may ask of the server.
pub trait Backend: Send + Sync + 'static {
    /// The newest overview, or `None` before the first tick.
    fn overview(&self) -> Option<Arc<Overview>>;
    /// Nodes and jobs as of the last scheduler poll, or `None` before the first.
    fn nodes_view(&self) -> Option<NodesView>;
    /// What an action would do. Errors are plain words meant for the operator.
    fn preview<'a>(&'a self, kind: ActionKind, t: &'a ActionTargets) -> BackendFuture<'a, Preview>;
    /// Records an action as `me` and starts it (it runs detached from the request:
    /// audited, called, verified); answers at once with its status.
    fn act<'a>(
        &'a self,
        me: &'a Me,
        kind: ActionKind,
        t: &'a ActionTargets,
        reason: Option<&'a str>,
    ) -> BackendFuture<'a, ActionStatus>;
    /// Action `id` as far as it has run, waiting up to `wait_ms` for it to move on from
    /// `seen` (the caller's last view: how many targets had ended); `None` if unknown.
    fn action_status(
        &self,
        id: i64,
        seen: usize,
        wait_ms: u64,
    ) -> BackendFuture<'_, Option<ActionStatus>>;
    /// One node's page, or `None` if no source knows the node.
    fn node_detail<'a>(&'a self, name: &'a str) -> BackendFuture<'a, Option<NodeDetail>>;
    /// One job's page, or `None` if neither the scheduler nor the history knows it.
    fn job_detail(&self, id: u64) -> BackendFuture<'_, Option<JobDetail>>;
    /// The Gantt of jobs over nodes for `hours` ending at `end_ms` (now by default).
    fn timeline(
        &self,
        hours: u32,
        end_ms: Option<i64>,
        group: crate::timeline::Grouping,
    ) -> BackendFuture<'_, crate::timeline::TimelineData>;
    /// How far Slurm's start estimates were from the starts, per partition, over the last
    /// seven days.
    fn estimates(&self) -> BackendFuture<'_, crate::queue::EstimatesView>;
    /// The job history matching `f`, a page, and how many match.
    fn job_history<'a>(
        &'a self,
        f: &'a JobFilter,
    ) -> BackendFuture<'a, (Vec<crate::model::Job>, u64)>;
    /// Firing alerts first, then recent ones.
    fn alerts(&self, limit: u32) -> BackendFuture<'_, Vec<AlertItem>>;
    /// Incident `id` and its timeline (`me` decides whether audited actions are in it);
    /// `None` when there is no such alert.
    fn incident<'a>(
        &'a self,
        me: &'a Me,
        id: i64,
    ) -> BackendFuture<'a, Option<crate::views::IncidentDetail>>;
    /// Open incidents: open alerts grouped by cause, critical first.
    fn incidents(&self) -> BackendFuture<'_, Vec<crate::views::Incident>>;
    /// Alerts firing and not silenced.
    fn alerts_firing(&self) -> u32;
    /// Open critical incidents whose cause is not silenced.
    fn alerts_critical(&self) -> u32;
    fn ack_alert<'a>(&'a self, me: &'a Me, id: i64, note: &'a str) -> BackendFuture<'a, ()>;
    fn silence_alert<'a>(&'a self, me: &'a Me, id: i64, minutes: u32) -> BackendFuture<'a, ()>;
    /// The report `q` asks for (manager or admin; the guard checks). Errors are words for
    /// the user.
    fn report<'a>(
        &'a self,
        q: &'a crate::reports::ReportQuery,
    ) -> BackendFuture<'a, crate::reports::Report>;
    /// Interruptions and their causes for the period of `q` (operators, managers, admins;
    /// the guard checks). Errors are words for the user.
    fn reliability<'a>(
        &'a self,
        q: &'a crate::reports::ReportQuery,
    ) -> BackendFuture<'a, crate::reliability::Reliability>;
    /// Remediation policies: rules in force, limits, switches, newest decisions (operators
    /// and admins; the guard checks).
    fn remediation(&self) -> BackendFuture<'_, crate::remediation::RemediationView>;
    /// An admin's change to the policies (audited). Errors are words for the user.
    fn remediation_change<'a>(
        &'a self,
        me: &'a Me,
        change: &'a crate::remediation::RemediationChange,
        note: &'a str,
    ) -> BackendFuture<'a, ()>;
    /// Audit entries matching `f`, newest first.
    fn audit<'a>(&'a self, f: &'a AuditFilter) -> BackendFuture<'a, Vec<AuditEntry>>;
    /// Every user and valid session (admins only; the guard checks the route).
    fn admin_view(&self) -> BackendFuture<'_, AdminView>;
    /// The single sign-on button's words, when an OpenID provider is configured.
    fn single_sign_on(&self) -> Option<String>;
}

/// The handle provided as Leptos context.
#[derive(Clone)]
pub struct BackendHandle(pub Arc<dyn Backend>);

/// The backend from context, or an error a server function can return.
pub fn backend() -> Result<Arc<dyn Backend>, leptos::prelude::ServerFnError> {
    leptos::prelude::use_context::<BackendHandle>()
        .map(|h| h.0)
        .ok_or_else(|| leptos::prelude::ServerFnError::new("server not ready"))
}

/// Who made this request, as the server's guard resolved it.
pub fn me() -> Me {
    leptos::prelude::use_context::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Me>().cloned())
        .unwrap_or(Me {
            user: None,
            role: None,
        })
}
