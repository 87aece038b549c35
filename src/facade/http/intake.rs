//! How a request's body is taken, in front of every route: the caller is authenticated from the headers
//! first, and only then is a body read, within a size that depends on who sent it and where
//! ([`BodyRule`]), within one deadline from the headers on, and within one budget of bytes held in
//! memory by the whole process ([`Intake::budget`]). A stranger's body is small; a large one
//! (a knowledge base document) is left for its route to take as a stream once it has checked that the
//! caller may write there ([`take_part`]). A one-file upload's form, whatever its size, is read by one
//! rule ([`FileForm`]).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::multipart::{Field, MultipartError, MultipartRejection};
use axum::extract::{FromRef, FromRequestParts, Multipart, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::{Authenticator, ParentCaller, Refused, RunTokens};
use super::error::ApiError;
use super::limits::RETRY_AFTER_SECONDS;

/// The largest body taken from a request that carries no valid credentials (`max_anonymous_body_bytes`,
/// 64 KiB): enough for a login form, nothing to hold a process's memory with.
pub const MAX_ANONYMOUS_BODY_BYTES: usize = 64 * 1024;

/// How the body of a request is taken, by its route and whether its caller is authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyRule {
    /// Read whole before the route runs: at most `max` bytes, past which 413 names `limit`.
    Read {
        /// The most bytes.
        max: usize,
        /// The limit's name in docs/reference/limits.md.
        limit: &'static str,
    },
    /// Left to the route, which reads it as a stream within [`BodyDeadline`] and [`BodyBudget`], after
    /// its own checks: at most `max` bytes (a `Content-Length` past it is refused here at once).
    Streamed {
        /// The most bytes.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
}

/// What the body reader needs: the deadline, the budget, and the authenticators.
#[derive(Clone)]
pub struct Intake {
    /// How long a client may take to send a body, from its headers on.
    pub deadline: Duration,
    /// The bytes of request bodies held in memory at once, as permits of one byte each.
    pub budget: Arc<Semaphore>,
    /// The budget's size, in bytes (for the messages).
    pub budget_bytes: usize,
    /// User tokens.
    pub authenticator: Authenticator,
    /// Run tokens.
    pub run_tokens: RunTokens,
    /// The rule of a request: its method, its path and whether its caller is authenticated.
    pub rule: fn(&Method, &str, bool) -> BodyRule,
}

impl Intake {
    /// An intake of `budget_bytes` bytes in flight.
    pub fn new(
        deadline: Duration,
        budget_bytes: usize,
        authenticator: Authenticator,
        run_tokens: RunTokens,
        rule: fn(&Method, &str, bool) -> BodyRule,
    ) -> Self {
        let budget = Arc::new(Semaphore::new(budget_bytes.min(Semaphore::MAX_PERMITS)));
        Self { deadline, budget, budget_bytes, authenticator, run_tokens, rule }
    }
}

impl FromRef<Intake> for Authenticator {
    fn from_ref(intake: &Intake) -> Self {
        intake.authenticator.clone()
    }
}

impl FromRef<Intake> for RunTokens {
    fn from_ref(intake: &Intake) -> Self {
        intake.run_tokens.clone()
    }
}

/// When a streamed body must have arrived whole (a request extension).
#[derive(Clone, Copy, Debug)]
pub struct BodyDeadline(pub tokio::time::Instant);

/// The process's budget of body bytes in memory (a request extension), for a route that reads its own.
#[derive(Clone)]
pub struct BodyBudget {
    budget: Arc<Semaphore>,
    size: usize,
}

impl BodyBudget {
    /// A place for `bytes` more bytes in memory, given back when the permit drops. Errors: 429 naming
    /// `max_body_bytes_in_flight` while the process holds as many as it may.
    pub fn take(&self, bytes: usize) -> Result<OwnedSemaphorePermit, ApiError> {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.budget.clone().try_acquire_many_owned(bytes).map_err(|_| ApiError::Limited {
            limit: "max_body_bytes_in_flight".into(),
            message: format!(
                "this server holds as many request bodies as it may ({} bytes); try again shortly",
                self.size
            ),
            retry_after: RETRY_AFTER_SECONDS,
        })
    }
}

/// The middleware: authenticates from the headers (the caller is kept for the route's extractors), then
/// takes the body by [`Intake::rule`]. Answers 413 past the size naming its limit, 408 past the deadline,
/// 429 past the budget, however slowly the bytes come.
pub async fn read_body(State(intake): State<Intake>, request: Request, next: Next) -> Response {
    let deadline = tokio::time::Instant::now() + intake.deadline;
    let (mut parts, body) = request.into_parts();
    let authenticated = match ParentCaller::from_request_parts(&mut parts, &intake).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            true
        }
        // The route answers why (401, 503) when it needs a caller.
        Err(why) => {
            parts.extensions.insert(Refused(why));
            false
        }
    };
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = |max: usize, limit: &str| {
        ApiError::TooLarge(format!("the body is larger than {max} bytes ({limit})")).into_response()
    };
    let budget = BodyBudget { budget: intake.budget.clone(), size: intake.budget_bytes };
    match (intake.rule)(&parts.method, parts.uri.path(), authenticated) {
        BodyRule::Streamed { max, limit } => {
            if declared.is_some_and(|n| n > max as u64) {
                return too_large(max, limit);
            }
            parts.extensions.insert(BodyDeadline(deadline));
            parts.extensions.insert(budget);
            next.run(Request::from_parts(parts, body)).await
        }
        BodyRule::Read { max, limit } => {
            if declared.is_some_and(|n| n > max as u64) {
                return too_large(max, limit);
            }
            let mut body = body;
            // A declared length is taken from the budget at once, and room for it made once.
            let declared = declared.map_or(0, |n| n as usize);
            let mut held = match budget.take(declared) {
                Ok(permit) => Some(permit),
                Err(err) => return err.into_response(),
            };
            let mut bytes = Vec::with_capacity(declared);
            loop {
                let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                    Err(_) => {
                        return ApiError::Timeout(format!(
                            "the body did not arrive within {} s",
                            intake.deadline.as_secs_f64()
                        ))
                        .into_response();
                    }
                    Ok(None) => break,
                    Ok(Some(Err(err))) => {
                        return ApiError::BadRequest(format!("cannot read the body: {err}")).into_response();
                    }
                    Ok(Some(Ok(frame))) => frame,
                };
                let Ok(data) = frame.into_data() else { continue };
                if bytes.len() + data.len() > max {
                    return too_large(max, limit);
                }
                let more = (bytes.len() + data.len()).saturating_sub(declared.max(bytes.len()));
                match budget.take(more) {
                    Ok(permit) => match &mut held {
                        Some(all) => all.merge(permit),
                        None => held = Some(permit),
                    },
                    Err(err) => return err.into_response(),
                }
                bytes.extend_from_slice(&data);
            }
            let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
            drop(held);
            response
        }
    }
}

/// A one-file upload as Yuxi's client sends it: a multipart body whose one part is `file`
/// ([`super::body::UploadForm`]). Its part is taken with [`FileForm::file`], and the form ended with
/// [`FileForm::end`], which refuses a part after it.
pub struct FileForm {
    form: Multipart,
    /// When a streamed body must have arrived ([`FileForm::until`]); a body read whole has arrived.
    deadline: Option<tokio::time::Instant>,
}

impl FileForm {
    /// The form of a request's body. Errors: 400 when the body is not multipart.
    pub fn new(form: Result<Multipart, MultipartRejection>) -> Result<Self, ApiError> {
        let form = form.map_err(|e| ApiError::BadRequest(format!("not a multipart body: {}", e.body_text())))?;
        Ok(Self { form, deadline: None })
    }

    /// The form of a streamed body, whose parts' headers and end must arrive by the request's
    /// [`BodyDeadline`] (408 after), as its `file` part's bytes must ([`take_part`]).
    pub fn until(self, deadline: Option<BodyDeadline>) -> Self {
        Self { deadline: deadline.map(|d| d.0), ..self }
    }

    /// The form's first part, which must be `file`. Errors: 422 naming the first part when it is another
    /// (`body` when it has no name), or naming `file` when the body has no part; 400 when the body cannot
    /// be read; 408 past the deadline.
    pub async fn file(&mut self) -> Result<Field<'_>, ApiError> {
        match self.next().await? {
            Some(field) if field.name() == Some("file") => Ok(field),
            Some(field) => {
                Err(ApiError::invalid(field.name().unwrap_or("body").to_string(), "only the part `file` is expected"))
            }
            None => Err(ApiError::invalid("file", "the multipart body has no `file` part")),
        }
    }

    /// Ends the form once its `file` part has been read (or dropped). Errors: 422 naming a part after it
    /// (`body` when it has no name); 400 when the body cannot be read; 408 past the deadline.
    pub async fn end(mut self) -> Result<(), ApiError> {
        match self.next().await? {
            Some(extra) => {
                Err(ApiError::invalid(extra.name().unwrap_or("body").to_string(), "only one part, `file`, is expected"))
            }
            None => Ok(()),
        }
    }

    async fn next(&mut self) -> Result<Option<Field<'_>>, ApiError> {
        let next = self.form.next_field();
        let next = match self.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, next).await.map_err(|_| late())?,
            None => next.await,
        };
        next.map_err(unreadable)
    }
}

/// The bytes of a part of a body read whole before its route ran ([`BodyRule::Read`]); a streamed
/// body's part is taken with [`take_part`]. Errors: 400 when the part cannot be read.
pub async fn read_part(field: Field<'_>) -> Result<axum::body::Bytes, ApiError> {
    field.bytes().await.map_err(unreadable)
}

/// A streamed body still arriving past its deadline, as a 408.
fn late() -> ApiError {
    ApiError::Timeout("the body did not arrive within its deadline".into())
}

/// A multipart body that cannot be read, as a 400 saying why.
fn unreadable(err: MultipartError) -> ApiError {
    ApiError::BadRequest(format!("the multipart body cannot be read: {}", err.body_text()))
}

/// Takes a multipart part of a streamed body to its end: its bytes go to an unnamed file in `dir` as
/// they come, so a slow upload holds no memory, at most `max` of them (413 naming `limit` past it), all
/// within the request's [`BodyDeadline`] (408); then they are read back into memory under the
/// [`BodyBudget`] (429 naming `max_body_bytes_in_flight` when it is spent), whose permit the caller holds
/// while it uses them. Errors: 400 when the part cannot be read, 503 when `dir` cannot be written.
pub async fn take_part(
    field: &mut Field<'_>,
    dir: &std::path::Path,
    (max, limit): (usize, &str),
    deadline: Option<BodyDeadline>,
    budget: Option<BodyBudget>,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), ApiError> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
    let unwritable = |err: std::io::Error| ApiError::Unavailable(format!("the upload cannot be written: {err}"));
    let deadline = deadline.map_or_else(|| tokio::time::Instant::now() + super::limits::BODY_READ_TIMEOUT, |d| d.0);
    let mut file = tokio::fs::File::from_std(tempfile::tempfile_in(dir).map_err(unwritable)?);
    let mut size = 0usize;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, field.chunk()).await {
            Err(_) => return Err(late()),
            Ok(Err(err)) => return Err(unreadable(err)),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        size += chunk.len();
        if size > max {
            return Err(ApiError::TooLarge(format!("the file is larger than {max} bytes ({limit})")));
        }
        file.write_all(&chunk).await.map_err(unwritable)?;
    }
    let permit = budget.map(|b| b.take(size)).transpose()?;
    file.rewind().await.map_err(unwritable)?;
    let mut bytes = Vec::with_capacity(size);
    file.read_to_end(&mut bytes).await.map_err(unwritable)?;
    Ok((bytes, permit))
}

#[cfg(test)]
mod tests {
    use axum::body::{Body, Bytes};
    use axum::extract::{FromRequest, Multipart};
    use futures::StreamExt;

    use super::*;

    fn part(name: &str) -> String {
        format!("--b\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"a.txt\"\r\n\r\nbytes of {name}\r\n")
    }

    async fn form(body: Body) -> FileForm {
        let request = Request::builder().header("content-type", "multipart/form-data; boundary=b").body(body);
        FileForm::new(Multipart::from_request(request.expect("a request"), &()).await).expect("a multipart body")
    }

    /// The status and the field of a refusal.
    fn refused(err: Option<ApiError>) -> (u16, Option<String>) {
        let err = err.expect("refused");
        let field = match &err {
            ApiError::Invalid { field, .. } => Some(field.clone()),
            _ => None,
        };
        (err.status().0.as_u16(), field)
    }

    #[tokio::test]
    async fn a_file_form_is_one_part_named_file_and_a_refusal_names_the_part() {
        let mut one = form(Body::from(format!("{}--b--\r\n", part("file")))).await;
        let bytes = read_part(one.file().await.expect("the part")).await.expect("its bytes");
        assert_eq!(&bytes[..], b"bytes of file");
        one.end().await.expect("nothing after it");

        let mut other = form(Body::from(format!("{}--b--\r\n", part("image")))).await;
        assert_eq!(refused(other.file().await.err()), (422, Some("image".into())));
        let mut two = form(Body::from(format!("{}{}--b--\r\n", part("file"), part("extra")))).await;
        read_part(two.file().await.expect("the part")).await.expect("its bytes");
        assert_eq!(refused(two.end().await.err()), (422, Some("extra".into())));
        let mut cut = form(Body::from("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nno end")).await;
        let read = match cut.file().await {
            Ok(field) => read_part(field).await.err(),
            Err(err) => Some(err),
        };
        assert_eq!(refused(read).0, 400);

        let plain = Request::builder().header("content-type", "text/plain").body(Body::from("file")).expect("request");
        assert_eq!(refused(FileForm::new(Multipart::from_request(plain, &()).await).err()), (400, None));
    }

    #[tokio::test]
    async fn a_streamed_form_whose_part_stops_arriving_answers_408_at_its_deadline() {
        // The first part's headers never end, and the client never closes.
        let head = Bytes::from_static(b"--b\r\nContent-Disposition: form-data; na");
        let stalled = futures::stream::iter([Ok::<_, std::io::Error>(head)]).chain(futures::stream::pending());
        let deadline = BodyDeadline(tokio::time::Instant::now() + Duration::from_millis(200));
        let mut stalled = form(Body::from_stream(stalled)).await.until(Some(deadline));
        let answer = tokio::time::timeout(Duration::from_secs(10), stalled.file()).await.expect("answers in time");
        assert_eq!(refused(answer.err()), (408, None));
    }
}
