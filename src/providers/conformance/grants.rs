//! Exec and grant checks: a fresh grant opens the sandbox, the provider's service token does
//! not, a grant opens nothing but exec, and an old grant stops working after terminate.

use super::{e, Checker, Outcome};
use crate::providers::client::{CallOptions, ProviderCallError, ProviderClient};
use crate::providers::wire::{ExecRequest, SandboxHandle};
use crate::providers::wire_spec::ReleaseDisposition as D;

const GRANT_TTL_MINUTES: i64 = 5;

pub(super) fn exec_req(script: &str) -> ExecRequest {
    ExecRequest {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: None,
        env: None,
        stdin: None,
        timeout_seconds: 30,
    }
}

impl Checker {
    pub(super) async fn exec(
        &self,
        h: &SandboxHandle,
        grant: &str,
        script: &str,
    ) -> Result<String, ProviderCallError> {
        self.client
            .exec(
                &h.r#ref.sandbox_id,
                grant,
                &exec_req(script),
                &CallOptions::default(),
            )
            .await
            .map(|r| r.stdout)
    }

    /// A grant for the handle's sandbox generation: minted by the checker when it holds the
    /// key, else the one the provider answered with.
    pub(super) fn exec_grant(&self, h: &SandboxHandle) -> Option<String> {
        if !self.caps.supports_exec {
            return None;
        }
        match &self.grants {
            Some(signer) => {
                let expires = chrono::Utc::now() + chrono::Duration::minutes(GRANT_TTL_MINUTES);
                Some(
                    signer
                        .mint(
                            &self.caps.provider_id,
                            &h.r#ref.sandbox_id,
                            h.generation,
                            expires,
                        )
                        .token,
                )
            }
            None => h.grant.as_ref().map(|g| g.token.clone()),
        }
    }

    pub(super) async fn old_grants(&self) -> Outcome {
        if !self
            .caps
            .supported_release_dispositions
            .contains(&D::Terminate)
        {
            return Ok("skipped: the provider does not offer terminate".into());
        }
        let h = self.provision().await?;
        let Some(g) = self.exec_grant(&h) else {
            self.cleanup(&h).await;
            return Ok("skipped: the provider offers no exec with grants".into());
        };
        if let Err(x) = self.exec(&h, &g, "true").await {
            self.cleanup(&h).await;
            return Err(e("exec with a fresh grant", x));
        }
        self.release(&h, D::Terminate, &self.key("grant")).await?;
        match self.exec(&h, &g, "true").await {
            Err(ProviderCallError::Refused { status, .. }) => Ok(format!("refused with {status}")),
            Err(other) => Err(format!("the old grant was not clearly refused: {other}")),
            Ok(_) => Err("a grant for terminated compute was accepted".into()),
        }
    }

    /// Exec with the provider's service token (or no credential at all) and no grant.
    pub(super) async fn exec_needs_grant(&self) -> Outcome {
        if !self.caps.supports_exec {
            return Ok("skipped: the provider offers no exec".into());
        }
        let h = self.provision().await?;
        let tried = self
            .client
            .exec_with_service_token(
                &h.r#ref.sandbox_id,
                &exec_req("true"),
                &CallOptions::default(),
            )
            .await;
        self.cleanup(&h).await;
        match tried {
            Err(ProviderCallError::Refused { status, error }) if matches!(status, 401 | 403) => {
                Ok(format!("refused with {status} {}", error.code))
            }
            Err(other) => Err(format!(
                "exec without a grant was not refused with 401 or 403: {other}"
            )),
            Ok(_) => Err("exec ran with the service token and no grant".into()),
        }
    }

    /// A grant as the bearer token of a route other than exec.
    pub(super) async fn grant_off_exec(&self) -> Outcome {
        if !self.has_token {
            return Ok("skipped: the provider takes no service token".into());
        }
        let h = self.provision().await?;
        let Some(g) = self.exec_grant(&h) else {
            self.cleanup(&h).await;
            return Ok("skipped: no grant to try".into());
        };
        let outcome = match ProviderClient::new(&self.base_url, Some(&g)) {
            Ok(as_grant) => {
                let release = self.release_req(&h, D::Terminate, &self.key("grant-release"));
                let inspect = as_grant
                    .inspect(&h.r#ref.sandbox_id, &CallOptions::default())
                    .await;
                let release = as_grant
                    .release_unchecked(&release, &CallOptions::default())
                    .await;
                match (inspect, release) {
                    (
                        Err(ProviderCallError::Refused { status: s1, .. }),
                        Err(ProviderCallError::Refused { status: s2, .. }),
                    ) if matches!(s1, 401 | 403) && matches!(s2, 401 | 403) => {
                        Ok(format!("inspect {s1}, release {s2}"))
                    }
                    (i, r) => Err(format!(
                        "a grant as the bearer token was not refused: inspect {:?}, release {:?}",
                        i.map(|_| "accepted"),
                        r.map(|_| "accepted")
                    )),
                }
            }
            Err(x) => Err(e("client", x)),
        };
        self.cleanup(&h).await;
        outcome
    }
}
