//! Server-sent events, as OpenAI, Azure OpenAI, Anthropic and Gemini stream their answers: the
//! decoder of the WHATWG "server-sent events" format (lines `event:` and `data:`, events ended by a
//! blank line, `\n` or `\r\n` line ends, `:` comments) and the loop that reads an answer's body through
//! it.

use super::http::Http;
use super::turn::ModelError;

/// One event: its `event:` name (empty when the server gave none) and its `data:` lines joined by `\n`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's name.
    pub event: String,
    /// Its data.
    pub data: String,
}

/// Cuts a byte stream into events; bytes may arrive cut anywhere, even inside a character.
#[derive(Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    event: String,
    data: Option<String>,
}

impl SseDecoder {
    /// The events completed by `bytes`.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for byte in bytes {
            if *byte != b'\n' {
                self.line.push(*byte);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(event) = self.line_done(&String::from_utf8_lossy(&line)) {
                events.push(event);
            }
        }
        events
    }

    /// The last event of a stream that ended without its blank line, if any.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&line).trim_end_matches('\r').to_string();
        if !text.is_empty() {
            let _ = self.line_done(&text);
        }
        self.line_done("")
    }

    fn line_done(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            return self.data.take().map(|data| SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_string(),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
        None
    }
}

/// Whether to read on after an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Read the next event.
    Continue,
    /// The answer is complete (OpenAI's `[DONE]`, Anthropic's `message_stop`).
    Done,
}

/// Reads `response`'s body as server-sent events, giving each to `on_event` until it says
/// [`Flow::Done`] or the body ends. Errors: a broken body ([`Http::broken`], transient) and whatever
/// `on_event` returns.
pub async fn read_events(
    http: &Http,
    mut response: reqwest::Response,
    mut on_event: impl FnMut(SseEvent) -> Result<Flow, ModelError>,
) -> Result<(), ModelError> {
    let mut decoder = SseDecoder::default();
    loop {
        let chunk = response.chunk().await.map_err(|e| http.broken(e))?;
        let Some(chunk) = chunk else { break };
        for event in decoder.push(&chunk) {
            if on_event(event)? == Flow::Done {
                return Ok(());
            }
        }
    }
    if let Some(event) = decoder.finish() {
        on_event(event)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into() }
    }

    #[test]
    fn events_are_cut_wherever_the_bytes_are() {
        let stream = "event: message_start\ndata: {\"a\":1}\n\n: a comment\nevent: ping\r\ndata: {}\r\n\r\ndata: first\ndata:second\n\ndata: caf\u{e9}\n\n";
        let expected = vec![
            event("message_start", "{\"a\":1}"),
            event("ping", "{}"),
            event("", "first\nsecond"),
            event("", "caf\u{e9}"),
        ];
        let mut whole = SseDecoder::default();
        assert_eq!(whole.push(stream.as_bytes()), expected);
        for cut in 1..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut events = decoder.push(&stream.as_bytes()[..cut]);
            events.extend(decoder.push(&stream.as_bytes()[cut..]));
            assert_eq!(events, expected, "cut at {cut}");
        }
    }

    #[test]
    fn an_event_without_data_is_no_event_and_a_last_one_without_its_blank_line_is_kept() {
        let mut decoder = SseDecoder::default();
        assert_eq!(decoder.push(b"event: nothing\n\nretry: 10\n\n"), Vec::new());
        assert_eq!(decoder.push(b"data: x\n\n"), vec![event("", "x")], "the name went with its empty event");
        assert_eq!(decoder.push(b"data: [DONE]"), Vec::new());
        assert_eq!(decoder.finish(), Some(event("", "[DONE]")));
        assert_eq!(decoder.finish(), None);
    }
}
