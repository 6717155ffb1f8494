//! What the handlers' attributes cannot say, added to the document in one place: links from
//! the responses that create an id to the operations that take it, each server-sent event's
//! shape, and the configured long-poll bound.

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{Object, ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{OpenApi as OpenApiDoc, RefOr};
use utoipa::Number;

/// `(source operation, status, link name, target operation, [(parameter, expression)])`.
type LinkSpec = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

const SESSION: &[(&str, &str)] = &[("session_id", "$response.body#/id")];
const RUN: &[(&str, &str)] = &[("run_id", "$response.body#/id")];
const RUN_IN_SESSION: &[(&str, &str)] = &[
    ("session_id", "$response.body#/session_id"),
    ("run_id", "$response.body#/id"),
];
const CLAIMED_RUN: &[(&str, &str)] = &[("run_id", "$response.body#/claims/0/run/id")];
const CLAIMED_LEASE: &[(&str, &str)] = &[("lease_id", "$response.body#/claims/0/lease/lease_id")];
const JOB: &[(&str, &str)] = &[
    ("run_id", "$response.body#/run_id"),
    ("job_id", "$response.body#/id"),
];

const LINKS: &[LinkSpec] = &[
    (
        "create_session",
        "201",
        "GetSnapshot",
        "get_snapshot",
        SESSION,
    ),
    (
        "create_session",
        "201",
        "ListEvents",
        "list_events",
        SESSION,
    ),
    (
        "create_session",
        "201",
        "StreamEvents",
        "stream_events",
        SESSION,
    ),
    ("create_session", "201", "CreateRun", "create_run", SESSION),
    ("create_run", "201", "ReadBackRun", "read_back_run", RUN),
    (
        "create_run",
        "201",
        "CancelRun",
        "cancel_run",
        RUN_IN_SESSION,
    ),
    (
        "create_run",
        "201",
        "ResumeRun",
        "resume_run",
        RUN_IN_SESSION,
    ),
    ("create_run", "201", "ListJobs", "list_jobs", RUN),
    (
        "create_run",
        "201",
        "ExecutionResource",
        "execution_resource",
        RUN,
    ),
    ("claim_runs", "200", "Heartbeat", "heartbeat", CLAIMED_LEASE),
    (
        "claim_runs",
        "200",
        "SuspendRun",
        "suspend_run",
        CLAIMED_RUN,
    ),
    (
        "claim_runs",
        "200",
        "ConfirmResumed",
        "confirm_resumed",
        CLAIMED_RUN,
    ),
    (
        "claim_runs",
        "200",
        "CompleteRun",
        "complete_run",
        CLAIMED_RUN,
    ),
    ("claim_runs", "200", "FailRun", "fail_run", CLAIMED_RUN),
    ("claim_runs", "200", "CreateJob", "create_job", CLAIMED_RUN),
    ("create_job", "201", "UpdateJob", "update_job", JOB),
    (
        "create_token",
        "201",
        "RevokeToken",
        "revoke_token",
        &[("token_id", "$response.body#/id")],
    ),
];

fn operations_mut(doc: &mut OpenApiDoc) -> impl Iterator<Item = &mut Operation> {
    doc.paths.paths.values_mut().flat_map(|item| {
        [
            item.get.as_mut(),
            item.post.as_mut(),
            item.patch.as_mut(),
            item.delete.as_mut(),
            item.put.as_mut(),
        ]
        .into_iter()
        .flatten()
    })
}

pub fn add_links(doc: &mut OpenApiDoc) {
    for op in operations_mut(doc) {
        let Some(id) = op.operation_id.clone() else {
            continue;
        };
        for (source, status, name, target, params) in LINKS {
            if *source != id {
                continue;
            }
            let Some(RefOr::T(res)) = op.responses.responses.get_mut(*status) else {
                continue;
            };
            // utoipa's `Link` writes `operation_id` as is, not `operationId`: set it by name.
            let target = Extensions::from_iter([("operationId", *target)]);
            let link = params
                .iter()
                .fold(LinkBuilder::new().extensions(Some(target)), |b, (p, e)| {
                    b.parameter(*p, *e)
                })
                .build();
            res.links.insert((*name).to_owned(), RefOr::T(link));
        }
    }
}

/// Each event of a `text/event-stream` response, as OpenAPI 3.1 describes one by `schema`.
pub fn sse_event_schema() -> Schema {
    let text = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
    };
    Schema::Object(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "id",
                text("The event's sequence, as `Last-Event-ID` takes it").pattern(Some("^[0-9]+$")),
            )
            .property("event", text("The event's type"))
            .property(
                "data",
                text("The event as JSON, as `GET /v1/sessions/{session_id}/events` lists it"),
            )
            .required("id")
            .required("event")
            .required("data")
            .build(),
    )
}

/// Sets the bound of every `wait_seconds` (query parameters and the claim body) to `max`.
pub fn set_long_poll_limit(doc: &mut OpenApiDoc, max: u64) {
    let bound = Number::UInt(usize::try_from(max).unwrap_or(usize::MAX));
    let set = |schema: &mut RefOr<Schema>| {
        if let RefOr::T(Schema::Object(obj)) = schema {
            obj.maximum = Some(bound.clone());
        }
    };
    for op in operations_mut(doc) {
        for param in op.parameters.iter_mut().flatten() {
            if param.name == "wait_seconds" {
                if let Some(schema) = param.schema.as_mut() {
                    set(schema);
                }
            }
        }
    }
    let claim = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("ClaimRequest"));
    if let Some(RefOr::T(Schema::Object(Object { properties, .. }))) = claim {
        if let Some(wait) = properties.get_mut("wait_seconds") {
            set(wait);
        }
    }
}

/// Replaces the event stream's `string` body with the shape of each event.
pub fn describe_event_streams(doc: &mut OpenApiDoc) {
    for op in operations_mut(doc) {
        for res in op.responses.responses.values_mut() {
            let RefOr::T(res) = res else { continue };
            if let Some(content) = res.content.get_mut("text/event-stream") {
                content.schema = Some(RefOr::T(sse_event_schema()));
            }
        }
    }
}

/// A header or query value is text, never JSON `null`: an optional one is absent instead.
pub fn parameters_are_not_null(doc: &mut OpenApiDoc) {
    for op in operations_mut(doc) {
        for param in op.parameters.iter_mut().flatten() {
            let Some(RefOr::T(Schema::Object(obj))) = param.schema.as_mut() else {
                continue;
            };
            if let SchemaType::Array(types) = &obj.schema_type {
                let kept: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                obj.schema_type = match kept.as_slice() {
                    [one] => SchemaType::Type(one.clone()),
                    _ => SchemaType::Array(kept),
                };
            }
        }
    }
}
