//! `GET /api/agent/runs/{run_id}/trace`: the timeline of a run and every run under it, built from the
//! runs' own records ([`crate::run::timeline`]), so it answers without a tracing backend; with one, its
//! trace id and a link to it (`--trace-link`). A run of another user answers as a missing one. Bounded:
//! at most [`MAX_TRACE_RUNS`] runs and [`MAX_TRACE_EVENTS`] events are read, and a tree larger than
//! that answers what was read with `truncated: true`.

use std::collections::{HashMap, VecDeque};

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::owned_runs::mine;
use crate::facade::services::state::FacadeState;
use crate::run::timeline::{TimelineSpan, run_spans};
use crate::run::trace::TraceParent;
use crate::store::Store;

/// The most runs one answer reads (the run and its descendants).
pub const MAX_TRACE_RUNS: usize = 200;
/// The most events one answer reads, over all its runs.
pub const MAX_TRACE_EVENTS: usize = 50_000;
/// Events read from a run's stream per request to the store.
const PAGE: usize = 1_000;

/// The answer of `GET /api/agent/runs/{run_id}/trace`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TraceAnswer {
    /// The run asked for, the root of the answer's tree.
    pub run_id: String,
    /// The W3C trace id the run's spans were exported under, when traces are exported (or its caller
    /// sent a `traceparent`); `null` otherwise.
    pub trace_id: Option<String>,
    /// The trace in the tracing backend (`--trace-link` with `{trace_id}` filled in), when both exist.
    pub trace_url: Option<String>,
    /// Langfuse's name for [`TraceAnswer::trace_url`], as Yuxi's client reads it.
    pub langfuse_url: Option<String>,
    /// The spans, each run's own first, then its model and tool calls, then its children's.
    pub spans: Vec<TimelineSpan>,
    /// Whether the tree was larger than one answer reads ([`MAX_TRACE_RUNS`], [`MAX_TRACE_EVENTS`]).
    pub truncated: bool,
}

/// `GET /api/agent/runs/{run_id}/trace`: the run tree's timeline.
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}/trace",
    operation_id = "get_run_trace",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run tree's spans", body = TraceAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn trace(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<TraceAnswer>, ApiError> {
    let store = state.store()?;
    let root = mine(store, &who, &run_id).await?;
    let trace_id = root.request.traceparent.as_deref().and_then(TraceParent::parse).map(|t| t.trace_id_hex());
    let trace_url = match (&state.trace_link, &trace_id) {
        (Some(link), Some(id)) => Some(link.replace("{trace_id}", id)),
        _ => None,
    };
    let mut spans = Vec::new();
    let mut truncated = false;
    let mut budget = MAX_TRACE_EVENTS;
    let mut runs = 0;
    let mut queue = VecDeque::from([(root, None::<String>)]);
    while let Some((record, parent)) = queue.pop_front() {
        if runs == MAX_TRACE_RUNS || budget == 0 {
            truncated = true;
            break;
        }
        runs += 1;
        let (events, cut) = events_of(store, &record.run_id, &mut budget).await?;
        truncated |= cut;
        let (run, under): (Vec<TimelineSpan>, HashMap<String, String>) = run_spans(&record, &events, parent);
        let run_span = record.run_id.clone();
        spans.extend(run);
        let mut children = store.children(&record.run_id).await?;
        children.sort();
        for child in children {
            // A child is its parent's user's; one that is not (a record written otherwise) is left out.
            let Some(child_record) = store.run_record(&child).await?.filter(|c| c.uid == record.uid) else {
                continue;
            };
            let parent = under.get(&child).cloned().unwrap_or_else(|| run_span.clone());
            queue.push_back((child_record, Some(parent)));
        }
    }
    Ok(Json(TraceAnswer { run_id, trace_id, langfuse_url: trace_url.clone(), trace_url, spans, truncated }))
}

/// The run's events, at most `budget` of them (counted down); whether some were left unread.
async fn events_of(
    store: &Store,
    run_id: &str,
    budget: &mut usize,
) -> Result<(Vec<crate::run::StoredEvent>, bool), ApiError> {
    let mut events = Vec::new();
    let mut after = "0-0".to_string();
    loop {
        let page = store.read_events(run_id, &after, PAGE.min(*budget)).await?;
        let full = page.len() == PAGE.min(*budget);
        *budget -= page.len();
        if let Some(last) = page.last() {
            after = last.seq.clone();
        }
        events.extend(page);
        if !full {
            return Ok((events, false));
        }
        if *budget == 0 {
            return Ok((events, true));
        }
    }
}
