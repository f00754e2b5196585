//! The opt-in auto-drain policy: a drain-class condition drains its node through `Actions`,
//! as `gantry-policy`, never by calling the scheduler.

use super::rules::Condition;

/// The policy drains like a person would: preview, audit row, call, verified end state.
pub(super) async fn auto_drain(
    actions: &std::sync::Arc<crate::actions::Actions>,
    node: &str,
    c: &Condition,
) {
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
    let submitted = actions
        .submit(
            &caller,
            app::actions::ActionKind::Drain,
            &targets,
            Some(&reason),
        )
        .await;
    // The drain runs on its own; the policy waits for its end only to log it.
    let ended = match submitted {
        Ok(s) => actions
            .status(s.id, usize::MAX, std::time::Duration::from_secs(60))
            .await
            .map(|now| now.unwrap_or(s))
            .map_err(crate::actions::ActionError::Audit),
        Err(e) => Err(e),
    };
    match ended {
        Ok(r) => {
            tracing::warn!(node, outcome = ?r.outcomes.first().map(|o| o.status.clone()), "auto-drain policy acted")
        }
        Err(e) => tracing::error!(node, error = %e, "auto-drain policy failed"),
    }
}
