//! A reply to an interaction: a replay of the first answer, or a resolution that resumes
//! the run (rule 8).

use chrono::{DateTime, Utc};

use super::Refusal;
use crate::domain::commands::ReplyInteraction;
use crate::domain::interaction::{InteractionRequest, InteractionStatus, Resolution, Resolver};
use crate::domain::run::{Run, RunEvent, RunState};
use crate::domain::validate::ValidationError;

/// The rows a reply reads: the interaction and its run, both locked.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    pub interaction: &'a InteractionRequest,
    pub run: &'a Run,
}

/// The reply as the caller made it.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    pub cmd: &'a ReplyInteraction,
    pub by: &'a Resolver,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The same reply again: answer with the interaction and run as they are.
    Replay,
    /// Interaction → `resolved` with `resolution`, its suspension → `resolving`, run → `to`.
    Resolve {
        resolution: Resolution,
        to: RunState,
    },
}

/// Checks, in order: replay or not pending, allowed decision, expected revision, expiry, and
/// the run's `Resume`.
pub fn decide(found: Found<'_>, reply: Reply<'_>, now: DateTime<Utc>) -> Result<Decision, Refusal> {
    let (current, cmd) = (found.interaction, reply.cmd);
    if current.status != InteractionStatus::Pending {
        let replay = current.status == InteractionStatus::Resolved
            && current
                .resolution
                .as_ref()
                .is_some_and(|r| r.decision == cmd.decision && r.payload == cmd.payload);
        if replay {
            return Ok(Decision::Replay);
        }
        return Err(Refusal::conflict(
            "interaction.not_pending",
            format!("the interaction is {}, not pending", current.status),
        ));
    }
    if !current.allowed_decisions.contains(&cmd.decision) {
        return Err(ValidationError::new(
            "decision",
            format!("must be one of: {}", current.allowed_decisions.join(", ")),
        )
        .into());
    }
    if cmd.expected_revision.is_some_and(|r| r != current.revision) {
        return Err(Refusal::conflict(
            "interaction.revision_mismatch",
            format!(
                "the interaction is at revision {}, not the expected one",
                current.revision
            ),
        ));
    }
    if cmd
        .payload_sha256
        .as_ref()
        .is_some_and(|d| *d != current.payload_sha256)
    {
        return Err(Refusal::conflict(
            "interaction.payload_changed",
            "the interaction's payload is not the one the reply was made for",
        ));
    }
    if current.expires_at.is_some_and(|at| at <= now) {
        return Err(Refusal::conflict(
            "interaction.expired",
            "the interaction has expired",
        ));
    }
    let to = found.run.state.apply(RunEvent::Resume).map_err(|_| {
        Refusal::conflict(
            "run.not_suspended",
            format!("the run is {}, not suspended", found.run.state),
        )
    })?;
    Ok(Decision::Resolve {
        resolution: Resolution {
            decision: cmd.decision.clone(),
            payload: cmd.payload.clone(),
            comment: cmd.comment.clone(),
            resolved_by: reply.by.id.clone(),
            resolved_by_name: reply.by.name.clone(),
            resolved_at: now,
        },
        to,
    })
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use serde_json::json;

    use super::*;
    use crate::domain::decide::fixtures::{interaction, now, run};

    fn cmd(decision: &str) -> ReplyInteraction {
        ReplyInteraction {
            decision: decision.into(),
            payload: json!({"note": "ok"}),
            expected_revision: None,
            payload_sha256: None,
            comment: None,
        }
    }

    fn ask(i: &InteractionRequest, r: &Run, cmd: &ReplyInteraction) -> Result<Decision, Refusal> {
        let found = Found {
            interaction: i,
            run: r,
        };
        let by = Resolver {
            id: "ann".into(),
            name: Some("Ann".into()),
        };
        let reply = Reply { cmd, by: &by };
        decide(found, reply, now())
    }

    fn code(refusal: Result<Decision, Refusal>) -> &'static str {
        match refusal {
            Err(Refusal::Conflict { code, .. }) => code,
            other => panic!("not a conflict: {other:?}"),
        }
    }

    #[test]
    fn a_pending_interaction_of_a_suspended_run_is_resolved() {
        let (i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Suspended),
        );
        let decided = ask(&i, &r, &cmd("approve"));
        let resolution = Resolution {
            decision: "approve".into(),
            payload: json!({"note": "ok"}),
            comment: None,
            resolved_by: "ann".into(),
            resolved_by_name: Some("Ann".into()),
            resolved_at: now(),
        };
        assert_eq!(
            decided,
            Ok(Decision::Resolve {
                resolution,
                to: RunState::Resuming
            })
        );
    }

    #[test]
    fn the_same_reply_to_a_resolved_interaction_is_a_replay() {
        let mut i = interaction(InteractionStatus::Resolved);
        i.resolution = Some(Resolution {
            decision: "approve".into(),
            payload: json!({"note": "ok"}),
            comment: None,
            resolved_by: "bob".into(),
            resolved_by_name: None,
            resolved_at: now(),
        });
        let r = run(RunState::Resuming);
        assert_eq!(ask(&i, &r, &cmd("approve")), Ok(Decision::Replay));
        assert_eq!(code(ask(&i, &r, &cmd("deny"))), "interaction.not_pending");
        let mut other_payload = cmd("approve");
        other_payload.payload = json!({});
        assert_eq!(code(ask(&i, &r, &other_payload)), "interaction.not_pending");
    }

    #[test]
    fn a_reply_bound_to_another_payload_is_a_conflict_and_its_comment_is_kept() {
        let (mut i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Suspended),
        );
        i.payload = json!({"command": "rm -rf build"});
        i.payload_sha256 = crate::domain::interaction::payload_digest(&i.payload);
        let mut shown_before = cmd("approve");
        shown_before.payload_sha256 = Some(crate::domain::interaction::payload_digest(
            &json!({"command": "ls"}),
        ));
        assert_eq!(
            code(ask(&i, &r, &shown_before)),
            "interaction.payload_changed"
        );
        let mut shown = cmd("approve");
        shown.payload_sha256 = Some(i.payload_sha256.clone());
        shown.comment = Some("only the build folder".into());
        match ask(&i, &r, &shown) {
            Ok(Decision::Resolve { resolution, .. }) => {
                assert_eq!(resolution.comment.as_deref(), Some("only the build folder"));
            }
            other => panic!("not resolved: {other:?}"),
        }
    }

    #[test]
    fn a_reply_to_an_interaction_no_longer_pending_is_refused() {
        let r = run(RunState::Suspended);
        for status in [
            InteractionStatus::Resolved,
            InteractionStatus::Expired,
            InteractionStatus::Cancelled,
        ] {
            let i = interaction(status);
            assert_eq!(
                ask(&i, &r, &cmd("approve")),
                Err(Refusal::conflict(
                    "interaction.not_pending",
                    format!("the interaction is {status}, not pending")
                ))
            );
        }
    }

    #[test]
    fn a_decision_not_allowed_is_invalid() {
        let (i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Suspended),
        );
        assert_eq!(
            ask(&i, &r, &cmd("maybe")),
            Err(Refusal::Invalid(ValidationError::new(
                "decision",
                "must be one of: approve, deny"
            )))
        );
    }

    #[test]
    fn a_stale_expected_revision_conflicts() {
        let (i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Suspended),
        );
        let mut stale = cmd("approve");
        stale.expected_revision = Some(2);
        assert_eq!(
            ask(&i, &r, &stale),
            Err(Refusal::conflict(
                "interaction.revision_mismatch",
                "the interaction is at revision 1, not the expected one"
            ))
        );
        stale.expected_revision = Some(1);
        assert!(matches!(ask(&i, &r, &stale), Ok(Decision::Resolve { .. })));
    }

    #[test]
    fn an_interaction_past_its_deadline_has_expired() {
        let (mut i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Suspended),
        );
        i.expires_at = Some(now());
        assert_eq!(code(ask(&i, &r, &cmd("approve"))), "interaction.expired");
        i.expires_at = Some(now() + Duration::milliseconds(1));
        assert!(matches!(
            ask(&i, &r, &cmd("approve")),
            Ok(Decision::Resolve { .. })
        ));
    }

    #[test]
    fn only_a_suspended_run_resumes() {
        let i = interaction(InteractionStatus::Pending);
        let r = run(RunState::Running);
        assert_eq!(
            ask(&i, &r, &cmd("approve")),
            Err(Refusal::conflict(
                "run.not_suspended",
                "the run is running, not suspended"
            ))
        );
        let r = run(RunState::SuspendRequested);
        assert!(matches!(
            ask(&i, &r, &cmd("approve")),
            Ok(Decision::Resolve { .. })
        ));
    }

    #[test]
    fn the_first_failing_check_decides() {
        let (mut i, r) = (
            interaction(InteractionStatus::Pending),
            run(RunState::Running),
        );
        i.expires_at = Some(now());
        let mut both = cmd("maybe");
        both.expected_revision = Some(9);
        assert!(matches!(ask(&i, &r, &both), Err(Refusal::Invalid(_))));
        both.decision = "approve".into();
        assert_eq!(code(ask(&i, &r, &both)), "interaction.revision_mismatch");
        both.expected_revision = None;
        assert_eq!(code(ask(&i, &r, &both)), "interaction.expired");
    }
}
