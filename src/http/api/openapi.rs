//! The OpenAPI document: tags and security here, paths from the handlers, and the problem
//! responses every operation shares added in one place.

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, ObjectBuilder, OpenApi as OpenApiDoc, Ref, RefOr, Required, Response,
    ResponseBuilder, Type,
};
use utoipa::{Modify, OpenApi};

use super::error::{FieldError, Problem, PROBLEM_JSON};

pub const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "SAgents lifecycle service",
        description = "Durable sessions, snapshots and fenced sandbox lifecycle for AI-agent runs. \
            Errors are RFC 9457 `application/problem+json` documents with a stable `code`."
    ),
    modifiers(&SecurityAddon),
    components(schemas(Problem, FieldError)),
    tags(
        (name = "sessions", description = "Frontend: sessions, snapshots and events"),
        (name = "interactions", description = "Frontend: replies to pending interactions"),
        (name = "runs", description = "Runs: created by the runtime, cancelled or resumed by the frontend, driven by the lease holder"),
        (name = "runtime", description = "Runtime workers: claims and leases"),
        (name = "jobs", description = "Runtime: background jobs of a run"),
        (name = "admin", description = "Operator: tokens, providers, execution resources and metrics"),
        (name = "audit", description = "The audit trail: hash-chained records of decisions, expiries, cancels and operators' changes"),
        (name = "health", description = "Liveness and readiness (no token)"),
    )
)]
pub struct ApiDoc;

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut OpenApiDoc) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("opaque token (sag_…)")
                    .description(Some(
                        "A token created with `sagents token create` or `POST /v1/admin/tokens`.",
                    ))
                    .build(),
            ),
        );
    }
}

fn problem(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        PROBLEM_JSON,
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    )
}

/// Adds `description` to the operation's response for `status`, creating it if needed.
fn add_problem(op: &mut Operation, status: &str, description: &str) {
    match op.responses.responses.get_mut(status) {
        Some(RefOr::T(existing)) => {
            if !existing.description.contains(description) {
                existing.description = format!("{}; {description}", existing.description);
            }
        }
        Some(RefOr::Ref(_)) => {}
        None => {
            let mut res: Response = problem(description).build();
            if status == "401" {
                res.headers.insert(
                    "WWW-Authenticate".into(),
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::String))
                        .description(Some("`Bearer`"))
                        .build(),
                );
            }
            if status == "503" {
                res.headers.insert(
                    "Retry-After".into(),
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::Integer))
                        .description(Some("Seconds to wait before retrying"))
                        .build(),
                );
            }
            op.responses.responses.insert(status.into(), RefOr::T(res));
        }
    }
}

fn idempotency_key_param() -> utoipa::openapi::path::Parameter {
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes the request safe to retry: a replay with the same key and body returns the \
             stored response (header `Idempotent-Replayed: true`).",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(255))
                .pattern(Some("^[!-~]+$")),
        ))
        .build()
}

/// Adds what every operation of its kind answers: auth problems on secured operations,
/// body problems where there is a JSON body, the idempotency contract on POST.
pub fn complete(mut doc: OpenApiDoc) -> OpenApiDoc {
    for item in doc.paths.paths.values_mut() {
        let post = item.post.as_mut().map(|op| (op, true));
        let others = [
            item.get.as_mut(),
            item.patch.as_mut(),
            item.delete.as_mut(),
            item.put.as_mut(),
        ]
        .into_iter()
        .flatten()
        .map(|op| (op, false));
        for (op, is_post) in post.into_iter().chain(others) {
            let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
            if secured {
                add_problem(
                    op,
                    "401",
                    "`auth.unauthorized`: missing, unknown or revoked token",
                );
                add_problem(
                    op,
                    "403",
                    "`auth.forbidden`: the token's role may not call this",
                );
            }
            if op.request_body.is_some() {
                add_problem(
                    op,
                    "400",
                    "`request.malformed_json`: the body is not valid JSON",
                );
                add_problem(
                    op,
                    "413",
                    "`request.too_large`: the body exceeds the size limit",
                );
                add_problem(
                    op,
                    "415",
                    "`request.unsupported_media_type`: the body must be `application/json`",
                );
                add_problem(
                    op,
                    "422",
                    "`request.invalid`: a field is unknown, missing, of the wrong type or refused (see `errors`)",
                );
            }
            if is_post {
                op.parameters
                    .get_or_insert_with(Vec::new)
                    .push(idempotency_key_param());
                add_problem(
                    op,
                    "400",
                    "`idempotency.key_invalid`: malformed Idempotency-Key",
                );
                add_problem(
                    op,
                    "409",
                    "`idempotency.in_flight`: the first request with this key is still running",
                );
                add_problem(
                    op,
                    "422",
                    "`idempotency.key_reused`: the key was used for a different request",
                );
            }
            if secured {
                add_problem(
                    op,
                    "503",
                    "`service.unavailable`: the database is unavailable",
                );
            }
        }
    }
    super::openapi_contract::add_links(&mut doc);
    super::openapi_contract::describe_event_streams(&mut doc);
    super::openapi_contract::parameters_are_not_null(&mut doc);
    doc
}
