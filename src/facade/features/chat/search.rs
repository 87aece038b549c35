//! `GET /api/chat/threads/search?q=`: the caller's conversations that mention `q` (case aside), in
//! their titles or in what was said (the user's and the assistant's words; tool results and system
//! prompts are not searched), most recently updated first, each with up to three snippets around its
//! matches, in Yuxi's `ThreadSearchResponse` shape. Only the caller's own conversations are searched; the
//! words of the [`MAX_SEARCHED_HISTORIES`] most recently updated ones, the titles of all (a user's list
//! keeps 1,000).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::threads::{ThreadView, view};
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::message_id;
use crate::facade::services::state::FacadeState;
use crate::run::message::Message;

/// The longest `q`, in characters (Yuxi: 200).
pub const MAX_QUERY_CHARS: usize = 200;
/// How many of the caller's conversations, the most recently updated, have their words searched.
pub const MAX_SEARCHED_HISTORIES: usize = 100;
/// The most snippets an item shows.
const MAX_SNIPPETS: usize = 3;
/// The characters a snippet shows on each side of its match.
const SNIPPET_SIDE_CHARS: usize = 40;

/// The query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// What to look for: 1 to 200 characters, not only spaces, case aside (required).
    #[serde(default)]
    #[param(required = true, value_type = String, min_length = 1, max_length = 200, pattern = "\\S")]
    q: Option<String>,
    /// Only the conversations with this agent.
    #[serde(default)]
    #[param(max_length = 80)]
    agent_id: Option<String>,
    /// How many, 1 to 50 (default 20).
    #[serde(default)]
    #[param(minimum = 1, maximum = 50)]
    limit: Option<u32>,
    /// How many to skip (default 0; at most 1000).
    #[serde(default)]
    #[param(minimum = 0, maximum = 1000)]
    offset: Option<u32>,
}

/// Where a conversation mentions the query.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadSnippet {
    /// The message's id in the history.
    pub message_id: Option<u64>,
    /// Its words around the match.
    pub content: String,
    /// Always `null`: messages carry no time here.
    pub created_at: Option<String>,
}

/// One conversation found (Yuxi's `ThreadSearchItem`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadFound {
    /// The conversation.
    #[serde(flatten)]
    pub thread: ThreadView,
    /// How many places mention the query (its title counts as one).
    pub matched_count: usize,
    /// The first message that mentions it, if one does.
    pub message_id: Option<u64>,
    /// Always `null`: messages carry no time here.
    pub latest_match_at: Option<String>,
    /// Up to three snippets.
    pub snippets: Vec<ThreadSnippet>,
}

/// The answer (Yuxi's `ThreadSearchResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadSearchAnswer {
    /// The conversations found, most recently updated first.
    pub items: Vec<ThreadFound>,
    /// Whether more are found past this page.
    pub has_more: bool,
    /// The page's size.
    pub limit: u32,
    /// Its start.
    pub offset: u32,
}

/// The words of `text` around the first place it contains `needle` (lowercase), or `None`.
fn snippet(text: &str, needle: &str) -> Option<String> {
    let lower: Vec<char> = text.chars().flat_map(char::to_lowercase).collect();
    let chars: Vec<char> = text.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    // Lowercasing may change the length of a few characters; match on the lowercase text, cut the
    // original where the two still align (the same length), else the lowercase text.
    let source = if lower.len() == chars.len() { &chars } else { &lower };
    let at = lower.windows(needle.len()).position(|w| w == needle.as_slice())?;
    let start = at.saturating_sub(SNIPPET_SIDE_CHARS);
    let end = (at + needle.len() + SNIPPET_SIDE_CHARS).min(source.len());
    let mut out: String = source[start..end].iter().collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        out.insert_str(0, "...");
    }
    if end < source.len() {
        out.push_str("...");
    }
    Some(out)
}

/// `GET /api/chat/threads/search`.
#[utoipa::path(
    get,
    path = "/api/chat/threads/search",
    operation_id = "search_chat_threads",
    tag = "chat",
    params(SearchQuery),
    responses(
        (status = 200, description = "the caller's conversations that mention `q`", body = ThreadSearchAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 422, description = "`query.q` empty or too long, `query.limit` or `query.offset` out of range", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn search(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<SearchQuery>,
) -> Result<Json<ThreadSearchAnswer>, ApiError> {
    let store = state.store()?;
    let q = query.q.as_deref().map(str::trim).unwrap_or_default();
    if q.is_empty() || q.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid("query.q", format!("must be 1 to {MAX_QUERY_CHARS} characters")));
    }
    let limit = query.limit.unwrap_or(20);
    if !(1..=50).contains(&limit) {
        return Err(ApiError::invalid("query.limit", "must be 1 to 50"));
    }
    let offset = query.offset.unwrap_or(0);
    if offset > 1000 {
        return Err(ApiError::invalid("query.offset", "must be 0 to 1000"));
    }
    let needle = q.to_lowercase();
    let (mut found, mut skip, mut from, mut has_more) = (Vec::new(), offset as usize, 0, false);
    'pages: loop {
        let page = store.user_conversations(&who.uid, from, 100).await?;
        if page.is_empty() {
            break;
        }
        for conversation in page {
            let searched = from;
            from += 1;
            if query.agent_id.as_deref().is_some_and(|agent| agent != conversation.agent_slug) {
                continue;
            }
            let mut matched = usize::from(conversation.title.to_lowercase().contains(&needle));
            let (mut snippets, mut first) = (Vec::new(), None);
            if searched < MAX_SEARCHED_HISTORIES {
                for (index, message) in store.thread_messages(&conversation.thread_id).await?.iter().enumerate() {
                    let text = match message {
                        Message::User { content } => content.as_str(),
                        Message::Assistant { content: Some(content), .. } => content.as_str(),
                        _ => continue,
                    };
                    let Some(words) = snippet(text, &needle) else { continue };
                    let id = message_id(index).parse().ok();
                    matched += 1;
                    first = first.or(id);
                    if snippets.len() < MAX_SNIPPETS {
                        snippets.push(ThreadSnippet { message_id: id, content: words, created_at: None });
                    }
                }
            }
            if matched == 0 {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if found.len() == limit as usize {
                has_more = true;
                break 'pages;
            }
            let thread = view(store, conversation).await?;
            found.push(ThreadFound {
                thread,
                matched_count: matched,
                message_id: first,
                latest_match_at: None,
                snippets,
            });
        }
    }
    Ok(Json(ThreadSearchAnswer { items: found, has_more, limit, offset }))
}

#[cfg(test)]
mod tests {
    use super::snippet;

    #[test]
    fn a_snippet_shows_the_words_around_the_match() {
        assert_eq!(snippet("Perovskite notes", "perovskite").as_deref(), Some("Perovskite notes"));
        let long = format!("{} the perovskite cells {}", "a ".repeat(40), "b ".repeat(40));
        let cut = snippet(&long, "perovskite").expect("found");
        assert!(cut.starts_with("...") && cut.ends_with("...") && cut.contains("the perovskite cells"), "{cut}");
        assert_eq!(snippet("nothing here", "perovskite"), None);
        assert_eq!(snippet("钙钛矿电池", "钙钛矿").as_deref(), Some("钙钛矿电池"));
    }
}
