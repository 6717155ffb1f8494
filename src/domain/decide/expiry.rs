//! A pending interaction past its deadline (rule 12): it expires, and its run fails, is
//! cancelled, or goes on with the decision its policy names, as the policy says.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::domain::interaction::{
    ExpiryAction, InteractionRequest, InteractionStatus, Resolution, RESOLVED_BY_EXPIRY,
};
use crate::domain::run::{Run, RunEvent, RunState};

#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// Answered, or not yet past its deadline: nothing to do.
    NotDue,
    /// Interaction → `expired`; its run (not yet ended) ends in `end` with `error`.
    Expire { end: Option<(RunState, Value)> },
    /// Interaction → `resolved` with the policy's decision by `system:expiry`, its suspension
    /// → `resolving`, its run → `to`: as a person's reply would.
    Resolve {
        resolution: Resolution,
        to: RunState,
    },
}

/// The interaction as found again under its run's lock, and that run, at `now`. A decision
/// its run can no longer take (the run ended or was resumed otherwise) only expires it.
pub fn decide(interaction: &InteractionRequest, run: &Run, now: DateTime<Utc>) -> Expiry {
    let due = interaction.status == InteractionStatus::Pending
        && interaction.expires_at.is_some_and(|at| at <= now);
    if !due {
        return Expiry::NotDue;
    }
    let policy = &interaction.on_expiry;
    if let (ExpiryAction::Decide, Some(decision)) = (policy.action, &policy.decision) {
        if let Ok(to) = run.state.apply(RunEvent::Resume) {
            return Expiry::Resolve {
                resolution: Resolution {
                    decision: decision.clone(),
                    payload: json!({}),
                    comment: None,
                    resolved_by: RESOLVED_BY_EXPIRY.to_owned(),
                    resolved_by_name: None,
                    resolved_at: now,
                },
                to,
            };
        }
    }
    let event = match policy.action {
        ExpiryAction::Cancel => RunEvent::Cancel,
        ExpiryAction::Fail | ExpiryAction::Decide => RunEvent::Fail,
    };
    let end = run.state.apply(event).ok().map(|to| {
        let error = json!({
            "code": "interaction.expired",
            "message": format!("interaction {} expired before anyone replied", interaction.id),
        });
        (to, error)
    });
    Expiry::Expire { end }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::domain::decide::fixtures::{interaction, now, run};
    use crate::domain::interaction::OnExpiry;

    #[test]
    fn a_pending_interaction_past_its_deadline_expires_and_fails_its_run() {
        let mut i = interaction(InteractionStatus::Pending);
        i.expires_at = Some(now());
        let error = json!({
            "code": "interaction.expired",
            "message": format!("interaction {} expired before anyone replied", i.id),
        });
        assert_eq!(
            decide(&i, &run(RunState::Suspended), now()),
            Expiry::Expire {
                end: Some((RunState::Failed, error))
            }
        );
    }

    #[test]
    fn a_cancel_policy_cancels_the_run() {
        let mut i = interaction(InteractionStatus::Pending);
        i.expires_at = Some(now());
        i.on_expiry.action = ExpiryAction::Cancel;
        let Expiry::Expire { end: Some((to, _)) } = decide(&i, &run(RunState::Suspended), now())
        else {
            panic!("not an expiry that ends the run");
        };
        assert_eq!(to, RunState::Cancelled);
    }

    #[test]
    fn a_decision_policy_resolves_as_the_system_and_resumes_the_run() {
        let mut i = interaction(InteractionStatus::Pending);
        i.expires_at = Some(now() - Duration::seconds(1));
        i.on_expiry = OnExpiry {
            action: ExpiryAction::Decide,
            decision: Some("deny".into()),
        };
        let Expiry::Resolve { resolution, to } = decide(&i, &run(RunState::Suspended), now())
        else {
            panic!("not a resolution");
        };
        assert_eq!(to, RunState::Resuming);
        assert_eq!(resolution.decision, "deny");
        assert_eq!(resolution.resolved_by, RESOLVED_BY_EXPIRY);
        assert_eq!(resolution.resolved_at, now());
        for ended in [RunState::Completed, RunState::Cancelled] {
            assert_eq!(
                decide(&i, &run(ended), now()),
                Expiry::Expire { end: None },
                "a run that ended takes no decision"
            );
        }
    }

    #[test]
    fn an_ended_run_is_left_as_it_is() {
        let mut i = interaction(InteractionStatus::Pending);
        i.expires_at = Some(now() - Duration::seconds(1));
        for state in [RunState::Completed, RunState::Failed, RunState::Cancelled] {
            assert_eq!(decide(&i, &run(state), now()), Expiry::Expire { end: None });
        }
    }

    #[test]
    fn an_answered_or_timely_interaction_is_not_due() {
        let r = run(RunState::Suspended);
        let mut i = interaction(InteractionStatus::Pending);
        assert_eq!(decide(&i, &r, now()), Expiry::NotDue);
        i.expires_at = Some(now() + Duration::milliseconds(1));
        assert_eq!(decide(&i, &r, now()), Expiry::NotDue);
        let mut answered = interaction(InteractionStatus::Resolved);
        answered.expires_at = Some(now() - Duration::seconds(1));
        assert_eq!(decide(&answered, &r, now()), Expiry::NotDue);
    }
}
