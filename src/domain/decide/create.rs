//! A new session or run names rows that must exist and fit: its parent, its session, its
//! provider.

use super::Refusal;
use crate::domain::commands::{CreateRun, CreateSession};
use crate::domain::run::Run;
use crate::domain::validate::ValidationError;
use crate::domain::SessionId;

/// A session's parent, when it names one, must be a session its tenant sees.
pub fn session(cmd: &CreateSession, parent_seen: bool) -> Result<(), Refusal> {
    if cmd.parent_session_id.is_some() && !parent_seen {
        return Err(ValidationError::new(
            "parent_session_id",
            "must name an existing session of the same tenant",
        )
        .into());
    }
    Ok(())
}

/// The rows a run creation reads.
#[derive(Debug, Clone, Copy)]
pub struct FoundForRun<'a> {
    /// The session exists and the caller's tenant sees it.
    pub session_seen: bool,
    /// The provider the sandbox spec names is registered (or there is no spec).
    pub provider_registered: bool,
    /// The parent run the command names, if it exists and the caller's tenant sees it.
    pub parent: Option<&'a Run>,
    /// The session's own parent session, if it has one: a sub-agent's session.
    pub parent_session: Option<&'a SessionId>,
}

const PARENT_RUN_RULE: &str = "must name a run of the same session or of its parent session";

/// Checks, in order: the session, the spec's provider, the parent run (of the same session,
/// or of the session's parent session: a sub-agent's run in a child session).
pub fn run(found: FoundForRun<'_>, session_id: &SessionId, cmd: &CreateRun) -> Result<(), Refusal> {
    if !found.session_seen {
        return Err(Refusal::NotFound("session"));
    }
    if let Some(spec) = cmd
        .sandbox_spec
        .as_ref()
        .filter(|_| !found.provider_registered)
    {
        return Err(ValidationError::new(
            "sandbox_spec.provider_id",
            format!("provider `{}` is not registered", spec.provider_id),
        )
        .into());
    }
    let of_family =
        |p: &Run| &p.session_id == session_id || found.parent_session == Some(&p.session_id);
    if cmd.parent_run_id.is_some() && !found.parent.is_some_and(of_family) {
        return Err(ValidationError::new("parent_run_id", PARENT_RUN_RULE).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::decide::fixtures::{hash, run as a_run};
    use crate::domain::run::RunState;
    use crate::domain::sandbox::{ResolvedSandboxSpec, WorkspaceMode};
    use crate::domain::RunId;

    #[test]
    fn a_session_parent_must_be_seen() {
        let mut cmd = CreateSession {
            title: None,
            metadata: json!({}),
            parent_session_id: None,
        };
        assert_eq!(session(&cmd, false), Ok(()));
        cmd.parent_session_id = Some(SessionId::new());
        assert_eq!(session(&cmd, true), Ok(()));
        assert_eq!(
            session(&cmd, false),
            Err(Refusal::Invalid(ValidationError::new(
                "parent_session_id",
                "must name an existing session of the same tenant"
            )))
        );
    }

    fn cmd(spec: bool, parent: Option<RunId>) -> CreateRun {
        CreateRun {
            parent_run_id: parent,
            sandbox_spec: spec
                .then(|| ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated)),
            resolved_spec_hash: hash('a'),
            input: json!({}),
        }
    }

    fn found(
        session_seen: bool,
        provider_registered: bool,
        parent: Option<&Run>,
    ) -> FoundForRun<'_> {
        FoundForRun {
            session_seen,
            provider_registered,
            parent,
            parent_session: None,
        }
    }

    #[test]
    fn a_run_in_a_seen_session_is_created() {
        let session_id = SessionId::new();
        assert_eq!(
            run(found(true, false, None), &session_id, &cmd(false, None)),
            Ok(())
        );
        assert_eq!(
            run(found(true, true, None), &session_id, &cmd(true, None)),
            Ok(())
        );
        let mut parent = a_run(RunState::Running);
        parent.session_id = session_id.clone();
        let named = cmd(true, Some(parent.id.clone()));
        assert_eq!(
            run(found(true, true, Some(&parent)), &session_id, &named),
            Ok(())
        );
    }

    #[test]
    fn an_unseen_session_is_not_found_first() {
        let refused = run(
            found(false, false, None),
            &SessionId::new(),
            &cmd(true, Some(RunId::new())),
        );
        assert_eq!(refused, Err(Refusal::NotFound("session")));
    }

    #[test]
    fn the_provider_must_be_registered() {
        let refused = run(
            found(true, false, None),
            &SessionId::new(),
            &cmd(true, Some(RunId::new())),
        );
        assert_eq!(
            refused,
            Err(Refusal::Invalid(ValidationError::new(
                "sandbox_spec.provider_id",
                "provider `local` is not registered"
            )))
        );
    }

    #[test]
    fn the_parent_may_be_a_run_of_the_parent_session() {
        let session_id = SessionId::new();
        let parent_session = SessionId::new();
        let mut parent = a_run(RunState::Running);
        parent.session_id = parent_session.clone();
        let named = cmd(true, Some(parent.id.clone()));
        let mut seen = found(true, true, Some(&parent));
        assert!(run(seen, &session_id, &named).is_err());
        seen.parent_session = Some(&parent_session);
        assert_eq!(run(seen, &session_id, &named), Ok(()));
        let other = SessionId::new();
        seen.parent_session = Some(&other);
        assert!(run(seen, &session_id, &named).is_err());
    }

    #[test]
    fn the_parent_must_be_a_run_of_the_same_session() {
        let invalid = Err(Refusal::Invalid(ValidationError::new(
            "parent_run_id",
            PARENT_RUN_RULE,
        )));
        let session_id = SessionId::new();
        let named = cmd(false, Some(RunId::new()));
        assert_eq!(run(found(true, true, None), &session_id, &named), invalid);
        let elsewhere = a_run(RunState::Running);
        assert_eq!(
            run(found(true, true, Some(&elsewhere)), &session_id, &named),
            invalid
        );
    }
}
