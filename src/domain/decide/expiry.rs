//! A pending interaction past its deadline (rule 12): it expires, and its run fails.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::domain::interaction::{InteractionRequest, InteractionStatus};
use crate::domain::run::{Run, RunEvent, RunState};

#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// Answered, or not yet past its deadline: nothing to do.
    NotDue,
    /// Interaction → `expired`; with `fail_run`, its run (not yet ended) fails with that error.
    Expire { fail_run: Option<Value> },
}

/// The interaction as found again under its run's lock, and that run, at `now`.
pub fn decide(interaction: &InteractionRequest, run: &Run, now: DateTime<Utc>) -> Expiry {
    let due = interaction.status == InteractionStatus::Pending
        && interaction.expires_at.is_some_and(|at| at <= now);
    if !due {
        return Expiry::NotDue;
    }
    let fails = run.state.apply(RunEvent::Fail) == Ok(RunState::Failed);
    Expiry::Expire {
        fail_run: fails.then(|| {
            json!({
                "code": "interaction.expired",
                "message": format!("interaction {} expired before anyone replied", interaction.id),
            })
        }),
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::*;
    use crate::domain::decide::fixtures::{interaction, now, run};

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
                fail_run: Some(error)
            }
        );
    }

    #[test]
    fn an_ended_run_is_left_as_it_is() {
        let mut i = interaction(InteractionStatus::Pending);
        i.expires_at = Some(now() - Duration::seconds(1));
        for state in [RunState::Completed, RunState::Failed, RunState::Cancelled] {
            assert_eq!(
                decide(&i, &run(state), now()),
                Expiry::Expire { fail_run: None }
            );
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
