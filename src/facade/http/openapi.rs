//! What the OpenAPI document states about every route at once, applied after the routes' own
//! annotations ([`complete`]), so that a route added or changed elsewhere is covered without an edit here:
//! the statuses every route can answer whatever its handler: 400, 408 and 413 from the body reader in
//! front of every route ([`super::intake::read_body`]), and 429 on every route with a body when the
//! process holds as many bodies as it may (`max_body_bytes_in_flight`); 401 on every route
//! that takes a bearer token; 422 on every route with a JSON body (a body of the wrong shape, naming the
//! field, from [`super::body::JsonBody`]) (a malformed query is a 400, from [`super::body::QueryParams`]);
//! and the shape of a server-sent event stream.
//!
//! What names particular routes and schemas (the agent body's rules, the links from a run's start to the
//! routes that take its id) is in the facade's root `openapi.rs`, beside the router.

use utoipa::openapi::path::Operation;
use utoipa::openapi::{OpenApi, Ref, RefOr, ResponseBuilder};

/// Adds the common statuses to `document`, once its paths are in.
pub fn complete(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        for operation in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.options,
            &mut item.head,
            &mut item.trace,
        ]
        .into_iter()
        .flatten()
        {
            common_statuses(operation);
            server_sent_events(operation);
        }
    }
}

/// The statuses of the module doc, each added where the route's annotation does not already state it.
fn common_statuses(operation: &mut Operation) {
    let has_body = operation.request_body.is_some();
    let has_token = operation.security.as_ref().is_some_and(|s| !s.is_empty());
    let mut statuses = vec![
        ("400", "the body cannot be read or is not JSON, or the query is malformed"),
        ("408", "the body did not arrive within the body deadline"),
        ("413", "the body is larger than the facade accepts"),
    ];
    if has_token {
        statuses.push(("401", "no token, or one that names nobody"));
    }
    if has_body {
        statuses.push(("422", "the body breaks a rule or is of the wrong shape; `field` names the field"));
        statuses.push(("429", "a limit is reached (`field` names it), such as the request bodies this server holds at once (`max_body_bytes_in_flight`)"));
    }
    for (status, description) in statuses {
        operation.responses.responses.entry(status.to_string()).or_insert_with(|| error_response(description));
    }
}

/// A `text/event-stream` answer whose schema is its events' data becomes, as OpenAPI 3.1 reads an event
/// stream's schema, the schema of one event: the stream `id`, the `event` name, and the `data`, a JSON
/// text of the schema the route named.
fn server_sent_events(operation: &mut Operation) {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    for response in operation.responses.responses.values_mut() {
        let RefOr::T(response) = response else { continue };
        let Some(RefOr::T(content)) = response.content.get_mut("text/event-stream") else { continue };
        let Some(data) = content.schema.take() else { continue };
        let event = ObjectBuilder::new()
            .description(Some("one server-sent event (heartbeats are comments, not events)"))
            .property(
                "id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some("^([0-9]+-[0-9]+|t1\\.[A-Za-z0-9_-]*)$"))
                    .description(Some(
                        "the event's stream id (a tree cursor `t1.…` for a run tree's stream), to resume after with `Last-Event-ID`",
                    )),
            )
            .property("event", ObjectBuilder::new().schema_type(Type::String).description(Some("the event's name")))
            .property(
                "data",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .content_media_type("application/json")
                    .content_schema(Some(data))
                    .description(Some("the event, as JSON")),
            )
            .required("id")
            .required("event")
            .required("data");
        content.schema = Some(event.build().into());
    }
}

/// An error answer: `ErrorBody` as JSON.
fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            utoipa::openapi::ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
        )
        .build()
        .into()
}
