//! The OpenAPI document of the provider's plugin API v3 (`openapi/provider-v3.json`). Each
//! operation below describes the route of the same name in `routes.rs`.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use sagents_plugin_api::wire::{
    AttachRequest, Capabilities, CheckpointDeleteReceipt, CheckpointPage, ExecRequest,
    ExecResponse, InventoryPage, OperationPending, ProviderError, ProvisionRequest, ReleaseRequest,
    RestoreRequest, SandboxHandle, SandboxInfo, SandboxReleaseReceipt,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "SAgents sandbox provider plugin API",
        version = "3",
        description = "What a sandbox provider serves to the SAgents lifecycle service, as the reference provider (`sagents-local-provider`) implements it. Every route takes the provider's service token as `Authorization: Bearer`, except exec, which takes a grant for the sandbox and nothing else (see docs/GRANTS.md). Errors are `{code, category, message, retryable}`. Terminal errors (the sandbox or checkpoint is broken for good) are `500` with category `sandbox_failure`, `retryable: false` and one of the codes `sandbox.lost`, `sandbox.kill_failed`, `checkpoint.missing`, `checkpoint.corrupt`; every other error says nothing about the sandbox's fate. Only `404 sandbox.not_found` in this body says a sandbox is gone. Release and restore are operations that outlive the request: a repeat of the idempotency key joins the running operation, and a call that waits longer than the provider's bound answers `202 operation.in_progress` with `Retry-After`; ask again with the same key. See docs/PLUGIN_API.md."
    ),
    paths(
        capabilities, provision, list_sandboxes, inspect, attach, release, exec, restore,
        list_checkpoints, delete_checkpoint
    ),
    components(schemas(ProviderError, OperationPending)),
    modifiers(&Schemes),
    tags((name = "sandboxes"), (name = "checkpoints"), (name = "exec"))
)]
struct ProviderApi;

struct Schemes;

impl Modify for Schemes {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        let mut service = Http::new(HttpAuthScheme::Bearer);
        service.description =
            Some("The provider's service token, held by the lifecycle service only.".into());
        components.add_security_scheme("service_token", SecurityScheme::Http(service));
        let mut grant = Http::new(HttpAuthScheme::Bearer);
        grant.bearer_format = Some("sgr2 (Ed25519) or sgr1 (HMAC) grant".into());
        grant.description = Some(
            "A grant for one sandbox generation, minted by the lifecycle service and handed to the runtime with its claim; renewed by each lease heartbeat.".into(),
        );
        components.add_security_scheme("grant", SecurityScheme::Http(grant));
    }
}

/// The document, as committed in `openapi/provider-v3.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    ProviderApi::openapi()
}

const CURSOR: &str = "Opaque cursor from the previous page's `next_cursor`";
const LIMIT: &str = "Page size, 1 to 500 (default 100)";

#[utoipa::path(get, path = "/v3/capabilities", tag = "sandboxes",
    responses(
        (status = 200, description = "What the provider offers", body = Capabilities),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn capabilities() {}

#[utoipa::path(post, path = "/v3/sandboxes", tag = "sandboxes", request_body = ProvisionRequest,
    responses(
        (status = 201, description = "Provisioned", body = SandboxHandle),
        (status = 200, description = "Already provisioned with this idempotency key: the same sandbox", body = SandboxHandle),
        (status = 400, description = "`request.malformed`", body = ProviderError),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`: a grant was sent in place of the service token", body = ProviderError),
        (status = 409, description = "`idempotency.conflict` and other refusals; nothing was done", body = ProviderError),
        (status = 422, description = "`validation.failed` (impossible `resources` included), `sandbox.spec_unsupported`, `sandbox.host_network_refused` (the provider does not allow `network: host`), `sandbox.resources_unenforceable`: the spec sets a limit this host gives the provider no cgroup controller to enforce", body = ProviderError),
        (status = 503, description = "`provider.internal`, `sandbox.capacity` (every sandbox uid is in use) and other retryable failures", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn provision() {}

#[utoipa::path(get, path = "/v3/sandboxes", tag = "sandboxes",
    params(("cursor" = Option<String>, Query, description = CURSOR),
           ("limit" = Option<u32>, Query, description = LIMIT)),
    responses(
        (status = 200, description = "One page of the sandboxes the provider holds", body = InventoryPage),
        (status = 400, description = "`validation.failed` (limit), `request.malformed` (cursor, unknown field)", body = ProviderError),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn list_sandboxes() {}

#[utoipa::path(get, path = "/v3/sandboxes/{sandbox_id}", tag = "sandboxes",
    params(("sandbox_id" = String, Path)),
    responses(
        (status = 200, description = "The sandbox's state", body = SandboxInfo),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`sandbox.not_found`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn inspect() {}

#[utoipa::path(post, path = "/v3/sandboxes/{sandbox_id}/attach", tag = "sandboxes",
    params(("sandbox_id" = String, Path)), request_body = AttachRequest,
    responses(
        (status = 200, description = "Attached", body = SandboxHandle),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`sandbox.not_found`", body = ProviderError),
        (status = 409, description = "`sandbox.not_running`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn attach() {}

#[utoipa::path(post, path = "/v3/sandboxes/{sandbox_id}/release", tag = "sandboxes",
    params(("sandbox_id" = String, Path)), request_body = ReleaseRequest,
    responses(
        (status = 200, description = "The release receipt (`duplicate: true` for a repeated idempotency key, or a call that joined the running release). It names every checkpoint that exists: if the kill after a saved archive failed, `compute_released` is `false`, `state` is what the sandbox is (`suspended` while its processes exist) and `checkpoint` is set; a repeat of the key tries the kill again and answers `compute_released: true` with the same checkpoint once it succeeds", body = SandboxReleaseReceipt),
        (status = 202, description = "`operation.in_progress`: the release runs on under its key (the first call of a `(sandbox_id, idempotency_key)` starts it, a repeat joins it, a dropped connection never abandons it); ask again with the same key after `Retry-After`. Not a failure", body = OperationPending,
            headers(("Retry-After" = u64, description = "Seconds to wait before asking again"))),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`sandbox.not_found`: the provider knows no such sandbox (the only evidence that it is gone)", body = ProviderError),
        (status = 409, description = "Refused; nothing was done (`idempotency.key_reused`: the key was used for another disposition; `sandbox.revision_conflict`, `sandbox.terminated`)", body = ProviderError),
        (status = 422, description = "`validation.failed`, `release.disposition_unsupported`", body = ProviderError),
        (status = 500, description = "Terminal, category `sandbox_failure`, `retryable: false`: `sandbox.lost` (its processes are gone, or a failed snapshot could not be resumed: the message names both causes), `sandbox.kill_failed`; the sandbox is reported `lost` and the same error is answered again for the key; only `terminate` applies", body = ProviderError),
        (status = 503, description = "Recoverable, `retryable: true`: the sandbox runs (`ready`) as before the call, resumed if the release had paused it (`sandbox.snapshot_failed`, also when the provider could not save its own state), or the provider failed before touching it (`provider.internal`); a repeat of the key tries again", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn release() {}

#[utoipa::path(post, path = "/v3/sandboxes/{sandbox_id}/exec", tag = "exec",
    params(("sandbox_id" = String, Path)), request_body = ExecRequest,
    responses(
        (status = 200, description = "The command ran (see `exit_code`, `timed_out`)", body = ExecResponse),
        (status = 401, description = "`grant.required`: no bearer token", body = ProviderError),
        (status = 403, description = "`grant.required`: the service token was sent, which does not authorize exec; `grant.invalid`: the grant is for another provider, sandbox or generation, expired, or not signed by the service; `grant.refused`: the compute was terminated", body = ProviderError),
        (status = 404, description = "`sandbox.not_found`", body = ProviderError),
        (status = 409, description = "`sandbox.not_running`, `sandbox.disk_quota_exceeded`", body = ProviderError),
        (status = 422, description = "`validation.failed`, `exec.cwd_invalid`, `exec.failed`", body = ProviderError),
        (status = 429, description = "`exec.too_many`: the sandbox already runs as many commands as the provider allows at once; retryable", body = ProviderError),
    ),
    security(("grant" = [])))]
#[allow(dead_code)]
fn exec() {}

#[utoipa::path(post, path = "/v3/restores", tag = "checkpoints", request_body = RestoreRequest,
    responses(
        (status = 201, description = "Restored into a fresh sandbox", body = SandboxHandle),
        (status = 200, description = "Already restored with this idempotency key (or a call that joined the running restore)", body = SandboxHandle),
        (status = 202, description = "`operation.in_progress`: the restore runs on under its key (a repeat joins it; a provider restart removes what an unfinished one made, and the next call of the key restores again under the same sandbox id); ask again with the same key after `Retry-After`. Not a failure", body = OperationPending,
            headers(("Retry-After" = u64, description = "Seconds to wait before asking again"))),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`checkpoint.not_found`", body = ProviderError),
        (status = 409, description = "Refused; nothing was done (`idempotency.key_reused`: the key was used for another restore)", body = ProviderError),
        (status = 422, description = "`validation.failed` (impossible `resources` included), `sandbox.spec_unsupported`, `sandbox.host_network_refused` (the provider does not allow `network: host`), `sandbox.resources_unenforceable`: the spec sets a limit this host gives the provider no cgroup controller to enforce", body = ProviderError),
        (status = 500, description = "Terminal, category `sandbox_failure`, `retryable: false`: `checkpoint.missing` (its archive is gone), `checkpoint.corrupt` (its archive does not match its digest)", body = ProviderError),
        (status = 503, description = "Retryable failure (`sandbox.capacity`: every sandbox uid is in use; `provider.internal`)", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn restore() {}

#[utoipa::path(get, path = "/v3/checkpoints", tag = "checkpoints",
    params(("cursor" = Option<String>, Query, description = CURSOR),
           ("limit" = Option<u32>, Query, description = LIMIT)),
    responses(
        (status = 200, description = "One page of the checkpoints the provider keeps", body = CheckpointPage),
        (status = 400, description = "`validation.failed`, `request.malformed`", body = ProviderError),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn list_checkpoints() {}

#[utoipa::path(delete, path = "/v3/checkpoints/{checkpoint_id}", tag = "checkpoints",
    params(("checkpoint_id" = String, Path)),
    responses(
        (status = 200, description = "Deleted (`deleted: false` when it was already gone)", body = CheckpointDeleteReceipt),
        (status = 400, description = "`request.malformed`", body = ProviderError),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
    ),
    security(("service_token" = [])))]
#[allow(dead_code)]
fn delete_checkpoint() {}

#[cfg(test)]
mod tests {
    use sagents_plugin_api::codes::{OPERATION_IN_PROGRESS, SANDBOX_FAILURE, TERMINAL_CODES};

    #[test]
    fn the_document_names_every_terminal_code_and_the_202() {
        let doc = serde_json::to_string(&super::document()).unwrap();
        for code in TERMINAL_CODES
            .iter()
            .chain([&SANDBOX_FAILURE, &OPERATION_IN_PROGRESS])
        {
            assert!(doc.contains(&format!("`{code}`")), "{code}");
        }
        assert!(doc.contains("Retry-After"));
    }
}
