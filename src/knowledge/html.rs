//! HTML read as the text a reader sees, in one pass of the HTML tokenizer.
//!
//! No document tree is built: a tree builder re-creates open formatting elements inside every later
//! block (the HTML standard's "reconstruct the active formatting elements"), so a page of a few
//! kilobytes can make it build millions of nodes. The tokenizer's work is linear in the input, and
//! the text kept is bounded by the caller's limit.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts};

/// The text of `source` with tags, scripts, styles and templates dropped, white space collapsed as a
/// browser does outside `<pre>`, a line per line break, list item or table row and a blank line
/// around paragraphs, headings and other blocks.
///
/// Errors: `Err(kept)` when the text would pass `limit` bytes (`kept` is how much was kept).
pub(super) fn text(source: &str, limit: usize) -> Result<String, usize> {
    let reader = Reader { state: RefCell::new(State { limit, ..State::default() }) };
    let tokenizer = Tokenizer::new(reader, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(source));
    // The sink never answers `Script`, so one feed reads the whole input.
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    let state = tokenizer.sink.state.into_inner();
    if state.over {
        return Err(state.out.len());
    }
    Ok(state.out.trim().to_string())
}

#[derive(Default)]
struct State {
    out: String,
    limit: usize,
    over: bool,
    /// Inside an element whose content is not shown (`script`, `style`, `template`, ...): its name
    /// and how many of it are open.
    hidden: Option<(String, usize)>,
    /// How many `<pre>` are open: their white space is kept.
    pre: usize,
    /// White space was seen since the last character kept.
    space: bool,
}

struct Reader {
    state: RefCell<State>,
}

/// Elements whose content a reader never sees, and the tokenizer state their content is read in
/// (`None`: ordinary markup, skipped to the matching end tag).
fn hidden(name: &str) -> Option<Option<RawKind>> {
    match name {
        "script" => Some(Some(RawKind::ScriptData)),
        "style" | "xmp" | "iframe" | "noembed" | "noframes" => Some(Some(RawKind::Rawtext)),
        "template" | "svg" | "math" | "object" | "select" => Some(None),
        _ => None,
    }
}

/// How many line breaks an element's start and end make: 2 for a paragraph-like block, 1 for a line.
fn breaks(name: &str) -> usize {
    match name {
        "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "blockquote" | "pre" | "table" | "ul" | "ol" | "dl"
        | "section" | "article" | "header" | "footer" | "main" | "nav" | "aside" | "figure" | "form" | "fieldset"
        | "details" | "address" | "hr" | "title" => 2,
        "br" | "div" | "li" | "tr" | "dt" | "dd" | "caption" | "figcaption" | "summary" | "option" => 1,
        _ => 0,
    }
}

impl State {
    fn push_str(&mut self, text: &str) {
        if self.over {
            return;
        }
        if self.out.len() + text.len() > self.limit {
            self.over = true;
            return;
        }
        self.out.push_str(text);
    }

    fn characters(&mut self, text: &str) {
        if self.pre > 0 {
            self.push_str(text);
            self.space = false;
            return;
        }
        for c in text.chars() {
            if c.is_ascii_whitespace() || c == '\u{a0}' {
                self.space = true;
                continue;
            }
            if self.space && !self.out.is_empty() && !self.out.ends_with(['\n', ' ']) {
                self.push_str(" ");
            }
            self.space = false;
            self.push_str(c.encode_utf8(&mut [0; 4]));
        }
    }

    /// Ends the line `count` times over (at most 2 trailing line breaks, which the limit lets pass:
    /// the final text is trimmed).
    fn line_breaks(&mut self, count: usize) {
        if count == 0 {
            return;
        }
        self.space = false;
        if self.out.is_empty() || self.over {
            return;
        }
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        let have = self.out.len() - self.out.trim_end_matches('\n').len();
        for _ in have..count {
            self.out.push('\n');
        }
    }
}

impl TokenSink for Reader {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                if let Some((open, depth)) = state.hidden.as_mut() {
                    if open == name {
                        match tag.kind {
                            TagKind::StartTag if !tag.self_closing => *depth += 1,
                            TagKind::EndTag => *depth -= 1,
                            TagKind::StartTag => {}
                        }
                        if *depth == 0 {
                            state.hidden = None;
                        }
                    }
                    return TokenSinkResult::Continue;
                }
                if tag.kind == TagKind::StartTag
                    && let Some(raw) = hidden(name)
                {
                    if let Some(raw) = raw {
                        state.hidden = Some((name.to_string(), 1));
                        return TokenSinkResult::RawData(raw);
                    }
                    if !tag.self_closing {
                        state.hidden = Some((name.to_string(), 1));
                    }
                    return TokenSinkResult::Continue;
                }
                match (tag.kind, name) {
                    (TagKind::StartTag, "td" | "th") => state.space = true,
                    (TagKind::StartTag, "textarea" | "title") => {
                        let count = breaks(name);
                        state.line_breaks(count);
                        return TokenSinkResult::RawData(RawKind::Rcdata);
                    }
                    (TagKind::StartTag, "plaintext") => {
                        state.line_breaks(1);
                        state.pre += 1;
                        return TokenSinkResult::Plaintext;
                    }
                    (TagKind::StartTag, "pre") => {
                        state.line_breaks(2);
                        if !tag.self_closing {
                            state.pre += 1;
                        }
                    }
                    (TagKind::EndTag, "pre") => {
                        state.pre = state.pre.saturating_sub(1);
                        state.line_breaks(2);
                    }
                    (_, name) => {
                        let count = breaks(name);
                        state.line_breaks(count);
                    }
                }
            }
            Token::CharacterTokens(text) if state.hidden.is_none() => state.characters(&text),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_scripts_and_styles_are_dropped_and_blocks_break_lines() {
        let html = "<html><head><title>T</title><style>p{color:red}</style></head><body>\
            <script>if (a < b) { alert('</p>') }</script><h1>Title</h1><p>The  <b>lease</b>\n is \
            renewed&nbsp;&amp; kept.</p><ul><li>one</li><li>two</li></ul><template><p>hidden</p></template>\
            <table><tr><td>a</td><td>b</td></tr></table></body></html>";
        assert_eq!(text(html, 1 << 20).unwrap(), "T\n\nTitle\n\nThe lease is renewed & kept.\n\none\ntwo\n\na b");
    }

    #[test]
    fn pre_keeps_its_white_space() {
        let html = "<p>before</p><pre>  x = 1\n  y = 2</pre><p>after</p>";
        assert_eq!(text(html, 1 << 20).unwrap(), "before\n\n  x = 1\n  y = 2\n\nafter");
    }

    #[test]
    fn text_past_the_limit_is_refused_saying_how_much_was_kept() {
        assert_eq!(text("<p>0123456789</p>", 5), Err(5));
        assert_eq!(text("<p>ab cd</p>", 5), Ok("ab cd".to_string()));
    }

    #[test]
    fn formatting_elements_a_tree_builder_would_multiply_are_read_once() {
        // 1,000 unclosed formatting elements, then 1,000 blocks: a tree builder re-opens every one of
        // the former inside each of the latter (a million elements); the tokenizer reads each tag once.
        let source = format!(
            "<div>{}</div>{}",
            (0..1000).map(|i| format!("<b id={i}>")).collect::<String>(),
            "<div>x</div>".repeat(1000)
        );
        let read = text(&source, 1 << 20).unwrap();
        assert_eq!(read.lines().filter(|line| *line == "x").count(), 1000);
    }
}
