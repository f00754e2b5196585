//! The opt-in auto-drain policy: a drain-class condition drains its node through `Actions`,
//! as `gantry-policy`, never by calling the scheduler.

use super::rules::Condition;

/// The policy drains like a person would: preview, audit row, call, verified end state.
pub(super) async fn auto_drain(actions: &crate::actions::Actions, node: &str, c: &Condition) {
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
