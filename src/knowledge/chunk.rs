//! Cutting a document's text into passages that keep where they came from.
//!
//! Paragraphs (blocks between blank lines) are packed into passages of at most [`MAX_PASSAGE_CHARS`]
//! characters, never across a Markdown heading, so a passage reads as one piece of one section. A
//! paragraph longer than that is cut at sentence ends (`。！？.!?`), and a sentence longer still at the
//! limit. Lengths count characters, not bytes, so Chinese and English passages hold as much text.

/// The most characters a passage holds.
pub const MAX_PASSAGE_CHARS: usize = 800;

/// A passage of a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passage {
    /// Its place among the document's passages, from 0.
    pub position: usize,
    /// The heading of the section it is in (`Leases › Renewal` for a `##` under a `#`), when the
    /// document has headings.
    pub heading: Option<String>,
    /// The first and last lines of the document it spans, from 1.
    pub lines: (usize, usize),
    /// Its text.
    pub text: String,
}

impl Passage {
    /// Where it is, as a reader would look for it: `Leases › Renewal, lines 12-20`.
    pub fn location(&self) -> String {
        let lines = if self.lines.0 == self.lines.1 {
            format!("line {}", self.lines.0)
        } else {
            format!("lines {}-{}", self.lines.0, self.lines.1)
        };
        match &self.heading {
            Some(heading) => format!("{heading}, {lines}"),
            None => lines,
        }
    }
}

/// A paragraph: its text and its first and last lines.
struct Block {
    text: String,
    lines: (usize, usize),
    heading: Option<String>,
}

/// The longest heading kept, in characters; a longer one is cut.
pub const MAX_HEADING_CHARS: usize = 200;

/// The passages of `text`, in order. `markdown` makes `#` lines headings.
pub fn passages(text: &str, markdown: bool) -> Vec<Passage> {
    let mut out = Vec::new();
    let mut current: Option<Block> = None;
    for block in blocks(text, markdown) {
        for piece in split_long(block) {
            current = match current.take() {
                Some(mut open)
                    if open.heading == piece.heading
                        && open.text.chars().count() + 2 + piece.text.chars().count() <= MAX_PASSAGE_CHARS =>
                {
                    open.text.push_str("\n\n");
                    open.text.push_str(&piece.text);
                    open.lines.1 = piece.lines.1;
                    Some(open)
                }
                Some(done) => {
                    push(&mut out, done);
                    Some(piece)
                }
                None => Some(piece),
            };
        }
    }
    if let Some(done) = current {
        push(&mut out, done);
    }
    out
}

fn push(out: &mut Vec<Passage>, block: Block) {
    out.push(Passage { position: out.len(), heading: block.heading, lines: block.lines, text: block.text });
}

/// The paragraphs of `text`, each with the heading it is under. Heading lines are not paragraphs.
fn blocks(text: &str, markdown: bool) -> Vec<Block> {
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    let heading_of = |headings: &[(usize, String)]| {
        (!headings.is_empty()).then(|| headings.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(" › "))
    };
    for (at, line) in text.lines().enumerate() {
        let number = at + 1;
        let trimmed = line.trim();
        let level = if markdown { trimmed.chars().take_while(|c| *c == '#').count() } else { 0 };
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            out.extend(open.take());
            headings.retain(|(l, _)| *l < level);
            // A heading's every copy is in every passage under it: a bounded one keeps that linear.
            headings.push((level, trimmed[level..].trim().chars().take(MAX_HEADING_CHARS).collect()));
            continue;
        }
        if trimmed.is_empty() {
            out.extend(open.take());
            continue;
        }
        match &mut open {
            Some(block) => {
                block.text.push('\n');
                block.text.push_str(trimmed);
                block.lines.1 = number;
            }
            None => {
                open =
                    Some(Block { text: trimmed.to_string(), lines: (number, number), heading: heading_of(&headings) })
            }
        }
    }
    out.extend(open);
    out
}

/// A paragraph as pieces of at most [`MAX_PASSAGE_CHARS`], cut at sentence ends where it can be.
fn split_long(block: Block) -> Vec<Block> {
    if block.text.chars().count() <= MAX_PASSAGE_CHARS {
        return vec![block];
    }
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut sentence = String::new();
    let flush = |piece: &mut String, pieces: &mut Vec<String>| {
        if !piece.trim().is_empty() {
            pieces.push(piece.trim().to_string());
        }
        piece.clear();
    };
    for c in block.text.chars() {
        sentence.push(c);
        let ends = matches!(c, '。' | '！' | '？' | '.' | '!' | '?' | '\n');
        if ends || sentence.chars().count() >= MAX_PASSAGE_CHARS {
            if piece.chars().count() + sentence.chars().count() > MAX_PASSAGE_CHARS {
                flush(&mut piece, &mut pieces);
            }
            piece.push_str(&sentence);
            sentence.clear();
        }
    }
    if piece.chars().count() + sentence.chars().count() > MAX_PASSAGE_CHARS {
        flush(&mut piece, &mut pieces);
    }
    piece.push_str(&sentence);
    flush(&mut piece, &mut pieces);
    pieces.into_iter().map(|text| Block { text, lines: block.lines, heading: block.heading.clone() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_are_packed_within_a_section_and_keep_their_lines_and_heading() {
        let text = "# Leases\n\nA lease is held.\nIt is renewed.\n\n## Renewal\n\nEvery 10 s.\n\nBy the keeper.\n";
        let passages = passages(text, true);
        assert_eq!(passages.len(), 2, "{passages:?}");
        assert_eq!(passages[0].text, "A lease is held.\nIt is renewed.");
        assert_eq!((passages[0].heading.as_deref(), passages[0].lines), (Some("Leases"), (3, 4)));
        assert_eq!(passages[1].text, "Every 10 s.\n\nBy the keeper.");
        assert_eq!(passages[1].location(), "Leases › Renewal, lines 8-10");
        assert_eq!(passages[1].position, 1);
    }

    #[test]
    fn plain_text_has_no_headings() {
        let passages = passages("# not a heading\n\nsecond", false);
        assert_eq!(passages.len(), 1);
        assert_eq!(passages[0].heading, None);
        assert_eq!(passages[0].location(), "lines 1-3");
    }

    #[test]
    fn long_paragraphs_are_cut_at_sentence_ends_within_the_limit_in_characters() {
        let sentence = "租约由守护者每十秒续期一次。";
        let text = sentence.repeat(200);
        let passages = passages(&text, false);
        assert!(passages.len() > 1);
        for passage in &passages {
            let chars = passage.text.chars().count();
            assert!(chars <= MAX_PASSAGE_CHARS, "{chars}");
            assert!(passage.text.ends_with('。'), "cut mid-sentence: {:?}", &passage.text[passage.text.len() - 6..]);
        }
        let joined: String = passages.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(joined, text, "nothing lost");
        let unbroken = "x".repeat(MAX_PASSAGE_CHARS * 2 + 5);
        let cut = super::passages(&unbroken, false);
        assert_eq!(cut.iter().map(|p| p.text.chars().count()).collect::<Vec<_>>(), [800, 800, 5]);
    }
}
