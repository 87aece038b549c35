//! The cursor of a run tree's event stream: where a reader is in each run of the tree (the run itself
//! and every descendant), as one opaque string, so that `GET /api/agent/runs/{id}/events?tree=true` and
//! `subagent_events` with `tree: true` resume with one `Last-Event-ID` / `after_seq`, losing and
//! repeating nothing (docs/concepts/delegation.md#one-stream-for-a-run-tree).
//!
//! The form: `t1.` then the URL-safe base64 (no padding) of `run_id=seq` pairs joined by `,`, sorted by
//! run id. A run absent from the cursor is read from its start (`0-0`). A plain stream id such as `0-0`
//! is also taken, as the position of the tree's root.

use std::collections::BTreeMap;

use base64::Engine;

use super::wire::is_stream_id;
use crate::run::thread_id::is_valid_id;

/// The most runs a tree stream follows (the root and its descendants); the cursor holds at most as many.
pub const MAX_TREE_RUNS: usize = 256;

/// The prefix of a tree cursor, with its version.
const PREFIX: &str = "t1.";

/// Where a reader is in each run of a tree: run id → the stream id of the last event read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeCursor(BTreeMap<String, String>);

/// A cursor that cannot be read; the message says why.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct BadCursor(String);

impl TreeCursor {
    /// The cursor at the start of every run, with `root` at `root_seq`.
    pub fn at_root(root: &str, root_seq: &str) -> Self {
        let mut cursor = TreeCursor::default();
        cursor.advance(root, root_seq);
        cursor
    }

    /// Reads `text`: a tree cursor this module wrote, or a plain stream id taken as `root`'s position.
    ///
    /// Errors: [`BadCursor`] for anything else: not base64, a pair that is not `run_id=seq`, an invalid
    /// run id or stream id, more than [`MAX_TREE_RUNS`] runs.
    pub fn parse(text: &str, root: &str) -> Result<Self, BadCursor> {
        if is_stream_id(text) {
            return Ok(Self::at_root(root, text));
        }
        let bad = |why: &str| BadCursor(format!("{text:?} is not a stream id such as 0-0 nor a tree cursor: {why}"));
        let encoded = text.strip_prefix(PREFIX).ok_or_else(|| bad("it does not start with t1."))?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded).map_err(|_| bad("not base64"))?;
        let pairs = String::from_utf8(bytes).map_err(|_| bad("not text"))?;
        let mut cursor = TreeCursor::default();
        for pair in pairs.split(',').filter(|p| !p.is_empty()) {
            let (run, seq) = pair.split_once('=').ok_or_else(|| bad("a position is not run_id=seq"))?;
            if !is_valid_id(run) || !is_stream_id(seq) {
                return Err(bad("a run id or stream id is not valid"));
            }
            cursor.0.insert(run.to_string(), seq.to_string());
        }
        if cursor.0.len() > MAX_TREE_RUNS {
            return Err(bad(&format!("it holds more than {MAX_TREE_RUNS} runs")));
        }
        Ok(cursor)
    }

    /// The stream id after which `run` is read next (`0-0` for a run not read yet).
    pub fn position(&self, run: &str) -> &str {
        self.0.get(run).map_or("0-0", String::as_str)
    }

    /// Moves `run`'s position to `seq` (a start, `0-0`, is not written down).
    pub fn advance(&mut self, run: &str, seq: &str) {
        if seq == "0-0" {
            self.0.remove(run);
        } else {
            self.0.insert(run.to_string(), seq.to_string());
        }
    }

    /// The cursor as text ([`TreeCursor::parse`] reads it back).
    pub fn encode(&self) -> String {
        let pairs: Vec<String> = self.0.iter().map(|(run, seq)| format!("{run}={seq}")).collect();
        format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pairs.join(",")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_a_plain_stream_id_is_the_roots_position() {
        let mut cursor = TreeCursor::at_root("root", "0-0");
        cursor.advance("root", "17-0");
        cursor.advance("child-a", "18-2");
        let text = cursor.encode();
        assert!(text.starts_with("t1."), "{text}");
        let back = TreeCursor::parse(&text, "root").expect("parses");
        assert_eq!(back, cursor);
        assert_eq!((back.position("root"), back.position("child-a"), back.position("new")), ("17-0", "18-2", "0-0"));
        let plain = TreeCursor::parse("5-1", "root").expect("a stream id");
        assert_eq!((plain.position("root"), plain.position("child-a")), ("5-1", "0-0"));
    }

    #[test]
    fn bad_cursors_are_refused_saying_why() {
        let encode = |text: &str| format!("t1.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text));
        for (text, why) in [
            ("x1.abc".to_string(), "does not start with t1."),
            ("t1.***".to_string(), "not base64"),
            (encode("run"), "not run_id=seq"),
            (encode("../x=1-0"), "not valid"),
            (encode("run=1"), "not valid"),
        ] {
            let err = TreeCursor::parse(&text, "root").expect_err(&text);
            assert!(err.to_string().contains(why), "{text}: {err}");
        }
        let many: Vec<String> = (0..=MAX_TREE_RUNS).map(|i| format!("r{i}=1-0")).collect();
        assert!(TreeCursor::parse(&encode(&many.join(",")), "root").is_err());
    }
}
