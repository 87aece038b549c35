//! `GET /api/agent/runs`: the caller's runs (a superadmin's, with `scope=all`, everyone's), newest
//! first, filtered by agent, kind, status, time and text, a page at a time
//! ([`crate::facade::services::run_list`]).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::read::RunItem;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::run_list::{RunFilter, Whose, find};
use crate::facade::services::state::FacadeState;
use crate::run::RunStatus;
use crate::run::thread_id::is_valid_id;
use crate::store::run_list::RunCursor;

/// The most runs one page holds.
pub const MAX_LIMIT: usize = 100;
/// The most characters of `q`.
pub const MAX_QUERY_CHARS: usize = 200;

/// `GET /api/agent/runs` query. Every filter given must hold.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `mine` (the default) or `all` (a superadmin's alone; 403 naming `scope` for anyone else).
    #[serde(default)]
    #[param(pattern = "^(mine|all)?$")]
    scope: Option<String>,
    /// Runs of this agent only.
    #[serde(default)]
    agent_slug: Option<String>,
    /// Runs of this thread only (a conversation's runs: `run_type=chat` leaves out its subagents').
    #[serde(default)]
    thread_id: Option<String>,
    /// `chat` (runs a user started) or `subagent` (delegated runs) only.
    #[serde(default)]
    #[param(pattern = "^(chat|subagent)?$")]
    run_type: Option<String>,
    /// Statuses, comma-separated (`failed,interrupted`); `active` stands for every status that has not
    /// ended.
    #[serde(default)]
    #[param(
        pattern = "^((active|pending|running|cancel_requested|waiting|completed|failed|cancelled|interrupted)(,(active|pending|running|cancel_requested|waiting|completed|failed|cancelled|interrupted))*)?$"
    )]
    status: Option<String>,
    /// Created at or after this time, RFC 3339.
    #[serde(default)]
    #[param(format = DateTime)]
    since: Option<String>,
    /// Created before this time, RFC 3339.
    #[serde(default)]
    #[param(format = DateTime)]
    until: Option<String>,
    /// Words (at most 200 characters) that must each appear, in any case, in the run's id, thread, agent,
    /// input or error.
    #[serde(default)]
    #[param(max_length = 200)]
    q: Option<String>,
    /// Runs in a page, 1 to 100 (default 50).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    limit: Option<usize>,
    /// Where to go on: the `next_cursor` of the page before.
    #[serde(default)]
    #[param(pattern = "^([0-9]{1,18}\\.[A-Za-z0-9][A-Za-z0-9._-]{0,252})?$")]
    cursor: Option<String>,
}

/// A page of runs.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RunList {
    /// The runs, newest first.
    pub runs: Vec<RunItem>,
    /// The cursor of the next page; `null` at the end. A page may hold fewer than `limit` runs and still
    /// have a next one: one search reads at most 2,000 runs.
    pub next_cursor: Option<String>,
}

fn time(field: &str, text: Option<&str>) -> Result<Option<i64>, ApiError> {
    text.map(|t| {
        t.parse::<jiff::Timestamp>()
            .map(|at| at.as_millisecond())
            .map_err(|_| ApiError::invalid(format!("query.{field}"), format!("{t:?} is not an RFC 3339 time")))
    })
    .transpose()
}

fn statuses(text: &str) -> Result<Vec<RunStatus>, ApiError> {
    let mut out = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word == "active" {
            out.extend(RunStatus::ALL.into_iter().filter(|s| !s.is_terminal()));
            continue;
        }
        match RunStatus::ALL.into_iter().find(|s| s.as_str() == word) {
            Some(status) => out.push(status),
            None => return Err(ApiError::invalid("query.status", format!("{word:?} is not a run status"))),
        }
    }
    Ok(out)
}

/// The filter, the scope, the limit and the cursor a query asks for; 422 naming the field that is wrong.
fn parsed(query: ListQuery) -> Result<(RunFilter, Whose, usize, Option<RunCursor>), ApiError> {
    let whose = match query.scope.as_deref() {
        None | Some("" | "mine") => Whose::Mine,
        Some("all") => Whose::Everyone,
        Some(other) => return Err(ApiError::invalid("query.scope", format!("{other:?} is neither mine nor all"))),
    };
    let subagent = match query.run_type.as_deref() {
        None | Some("") => None,
        Some("chat") => Some(false),
        Some("subagent") => Some(true),
        Some(other) => {
            return Err(ApiError::invalid("query.run_type", format!("{other:?} is neither chat nor subagent")));
        }
    };
    let q = query.q.unwrap_or_default();
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid("query.q", format!("longer than {MAX_QUERY_CHARS} characters")));
    }
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid("query.limit", format!("{limit} is not between 1 and {MAX_LIMIT}")));
    }
    let cursor = query.cursor.filter(|c| !c.is_empty()).map(|c| cursor_of(&c)).transpose()?;
    let filter = RunFilter {
        agent_slug: query.agent_slug.filter(|s| !s.is_empty()),
        thread_id: query.thread_id.filter(|s| !s.is_empty()),
        subagent,
        statuses: statuses(query.status.as_deref().unwrap_or_default())?,
        since_ms: time("since", query.since.as_deref())?,
        until_ms: time("until", query.until.as_deref())?,
        words: q.split_whitespace().map(str::to_lowercase).collect(),
    };
    Ok((filter, whose, limit, cursor))
}

/// A cursor as a page gives it: `<milliseconds>.<run id>`.
fn cursor_text(cursor: &RunCursor) -> String {
    format!("{}.{}", cursor.created_ms, cursor.run_id)
}

fn cursor_of(text: &str) -> Result<RunCursor, ApiError> {
    let bad = || ApiError::invalid("query.cursor", "not a cursor this list gave");
    let (millis, run_id) = text.split_once('.').ok_or_else(bad)?;
    let created_ms = millis.parse::<i64>().map_err(|_| bad())?;
    if !is_valid_id(run_id) {
        return Err(bad());
    }
    Ok(RunCursor { created_ms, run_id: run_id.to_string() })
}

/// `GET /api/agent/runs`: `{runs, next_cursor}`.
#[utoipa::path(
    get,
    path = "/api/agent/runs",
    operation_id = "list_runs",
    tag = "runs",
    params(ListQuery),
    responses(
        (status = 200, description = "a page of runs, newest first", body = RunList),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "`scope=all` asked by someone other than a superadmin", body = ErrorBody),
        (status = 422, description = "a filter, the limit or the cursor is not valid (the field is named)", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<RunList>, ApiError> {
    let (filter, whose, limit, cursor) = parsed(query)?;
    let found = find(state.store()?, &who, whose, &filter, cursor, limit).await?;
    Ok(Json(RunList {
        runs: found.runs.into_iter().map(RunItem::of).collect(),
        next_cursor: found.next.as_ref().map(cursor_text),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(text: &str) -> ListQuery {
        serde_urlencoded::from_str(text).expect("a query")
    }

    fn field_of(text: &str) -> String {
        match parsed(query(text)) {
            Err(ApiError::Invalid { field, .. }) => field,
            other => panic!("{text}: {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn each_wrong_field_is_named() {
        assert_eq!(field_of("scope=others"), "query.scope");
        assert_eq!(field_of("run_type=robot"), "query.run_type");
        assert_eq!(field_of("status=done"), "query.status");
        assert_eq!(field_of("since=yesterday"), "query.since");
        assert_eq!(field_of("until=2026-13-01"), "query.until");
        assert_eq!(field_of("until="), "query.until");
        assert_eq!(field_of(&format!("q={}", "x".repeat(201))), "query.q");
        assert_eq!(field_of("limit=0"), "query.limit");
        assert_eq!(field_of("limit=101"), "query.limit");
        assert_eq!(field_of("cursor=12"), "query.cursor");
        assert_eq!(field_of("cursor=12.a%2Fb"), "query.cursor");
    }

    #[test]
    fn a_query_becomes_its_filter_and_a_cursor_reads_back_as_given() {
        let (filter, whose, limit, cursor) =
            parsed(query("scope=all&agent_slug=helper&run_type=subagent&status=active,failed&q=Quota%20Rust&limit=10&since=2026-12-05T00:00:00Z&cursor=1800000000000.run1"))
                .map_err(|_| ())
                .expect("valid");
        assert_eq!(whose, Whose::Everyone);
        assert_eq!(limit, 10);
        assert_eq!(filter.agent_slug.as_deref(), Some("helper"));
        assert_eq!(filter.subagent, Some(true));
        assert_eq!(filter.statuses.len(), 5, "the four unended statuses and failed: {:?}", filter.statuses);
        assert_eq!(filter.words, ["quota", "rust"]);
        assert_eq!(filter.since_ms, Some(1_796_428_800_000));
        let cursor = cursor.expect("a cursor");
        assert_eq!(cursor_of(&cursor_text(&cursor)).map_err(|_| ()), Ok(cursor));
    }
}
