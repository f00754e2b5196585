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
    let s = match submitted {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(node, error = %e, "auto-drain policy failed");
            return;
        }
    };
    // The drain runs on its own; the policy waits for its end only to log it.
    match actions
        .status(s.id, usize::MAX, std::time::Duration::from_secs(60))
        .await
    {
        Ok(Some(r)) => {
            tracing::warn!(node, state = %r.state, outcome = ?r.outcomes.first().map(|o| o.status.clone()), "auto-drain policy acted")
        }
        Ok(None) => tracing::warn!(
            node,
            id = s.id,
            "auto-drain policy acted; its end is in the audit log"
        ),
        Err(e) => {
            tracing::warn!(node, id = s.id, error = %e, "auto-drain started; its end could not be read")
        }
    }
}
