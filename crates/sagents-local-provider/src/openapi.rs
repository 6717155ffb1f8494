//! The OpenAPI document of the provider's plugin API v3 (`openapi/provider-v3.json`). Each
//! operation below describes the route of the same name in `routes.rs`.

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use sagents_plugin_api::wire::{
    AttachRequest, Capabilities, CheckpointDeleteReceipt, CheckpointPage, ExecRequest,
    ExecResponse, InventoryPage, ProviderError, ProvisionRequest, ReleaseRequest, RestoreRequest,
    SandboxHandle, SandboxInfo, SandboxReleaseReceipt,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "SAgents sandbox provider plugin API",
        version = "3",
        description = "What a sandbox provider serves to the SAgents lifecycle service, as the reference provider (`sagents-local-provider`) implements it. Every route takes the provider's service token as `Authorization: Bearer`, except exec, which takes a grant for the sandbox and nothing else (see docs/GRANTS.md). Errors are `{code, category, message, retryable}`."
    ),
    paths(
        capabilities, provision, list_sandboxes, inspect, attach, release, exec, restore,
        list_checkpoints, delete_checkpoint
    ),
    components(schemas(ProviderError)),
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
        (status = 200, description = "The release receipt (`duplicate: true` for a repeated idempotency key)", body = SandboxReleaseReceipt),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`sandbox.not_found`", body = ProviderError),
        (status = 409, description = "Refused; nothing was done", body = ProviderError),
        (status = 422, description = "`validation.failed`", body = ProviderError),
        (status = 500, description = "`sandbox_failure`: the sandbox is broken (terminal)", body = ProviderError),
        (status = 503, description = "Retryable failure; the sandbox is unchanged", body = ProviderError),
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
        (status = 200, description = "Already restored with this idempotency key", body = SandboxHandle),
        (status = 401, description = "`auth.unauthorized`", body = ProviderError),
        (status = 403, description = "`grant.not_accepted`", body = ProviderError),
        (status = 404, description = "`checkpoint.not_found`", body = ProviderError),
        (status = 409, description = "Refused; nothing was done", body = ProviderError),
        (status = 422, description = "`validation.failed` (impossible `resources` included), `sandbox.spec_unsupported`, `sandbox.host_network_refused` (the provider does not allow `network: host`), `sandbox.resources_unenforceable`: the spec sets a limit this host gives the provider no cgroup controller to enforce", body = ProviderError),
        (status = 503, description = "Retryable failure (`sandbox.capacity`: every sandbox uid is in use)", body = ProviderError),
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
