//! Cutting a document's text into passages that keep where they came from.
//!
//! Paragraphs (blocks between blank lines) are packed into passages of at most [`MAX_PASSAGE_CHARS`]
//! characters, never across a Markdown heading, so a passage reads as one piece of one section. A
//! paragraph longer than that is cut at sentence ends (`。！？.!?`), and a sentence longer still at the
//! limit. Lengths count characters, not bytes, so Chinese and English passages hold as much text.

use std::sync::Arc;

use super::extract::ExtractError;

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

/// The longest heading kept at one level, in characters; a longer one is cut.
pub const MAX_HEADING_CHARS: usize = 200;

/// The longest heading path kept (`A › B › C`), in characters; a longer one is cut. Every passage
/// under a heading carries its path, so a bounded path keeps the passages' size near the text's.
pub const MAX_HEADING_PATH_CHARS: usize = 400;

/// The most passages one document is cut into (`max_passages_per_document`): an 8 MiB document of
/// full passages has about 10,500.
pub const MAX_PASSAGES: usize = 20_000;

/// The most bytes one document's passages hold, their texts and heading paths together
/// (`max_document_passage_bytes`, 16 MiB): what cutting a document may allocate, whatever its shape.
pub const MAX_PASSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A paragraph, or a piece of one: its text, its length in characters, its first and last lines and
/// the heading path it is under (shared by every block under it).
struct Block {
    text: String,
    chars: usize,
    lines: (usize, usize),
    heading: Option<Arc<str>>,
}

/// The passages of `text`, in order. `markdown` makes `#` lines headings.
///
/// Blocks are packed as they are read, so the work is one pass over `text` and what it holds is the
/// passages made so far. Errors: [`ExtractError::TooManyPassages`] past [`MAX_PASSAGES`],
/// [`ExtractError::PassagesTooLarge`] past [`MAX_PASSAGE_BYTES`].
pub fn passages(text: &str, markdown: bool) -> Result<Vec<Passage>, ExtractError> {
    let mut packer = Packer::default();
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut heading: Option<Arc<str>> = None;
    let mut open: Option<Block> = None;
    for (at, line) in text.lines().enumerate() {
        let number = at + 1;
        let trimmed = line.trim();
        let level = if markdown { trimmed.chars().take_while(|c| *c == '#').count() } else { 0 };
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            packer.paragraph(open.take())?;
            headings.retain(|(l, _)| *l < level);
            headings.push((level, trimmed[level..].trim().chars().take(MAX_HEADING_CHARS).collect()));
            heading = Some(path(&headings));
            continue;
        }
        if trimmed.is_empty() {
            packer.paragraph(open.take())?;
            continue;
        }
        match &mut open {
            Some(block) => {
                block.text.push('\n');
                block.text.push_str(trimmed);
                block.chars += 1 + trimmed.chars().count();
                block.lines.1 = number;
            }
            None => {
                open = Some(Block {
                    text: trimmed.to_string(),
                    chars: trimmed.chars().count(),
                    lines: (number, number),
                    heading: heading.clone(),
                })
            }
        }
    }
    packer.paragraph(open)?;
    packer.finish()
}

/// The heading path of a stack of headings, cut at [`MAX_HEADING_PATH_CHARS`].
fn path(headings: &[(usize, String)]) -> Arc<str> {
    let joined = headings.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(" › ");
    match joined.char_indices().nth(MAX_HEADING_PATH_CHARS) {
        Some((cut, _)) => Arc::from(&joined[..cut]),
        None => Arc::from(joined),
    }
}

/// Packs blocks into passages as they come, counting what the passages hold.
#[derive(Default)]
struct Packer {
    out: Vec<Passage>,
    open: Option<Block>,
    bytes: usize,
}

impl Packer {
    /// Takes a paragraph (cut into pieces when it is long), packing each piece into the open passage
    /// when it fits under the same heading, or closing that one and opening another.
    fn paragraph(&mut self, block: Option<Block>) -> Result<(), ExtractError> {
        let Some(block) = block else { return Ok(()) };
        for piece in split_long(block) {
            self.open = match self.open.take() {
                Some(mut open)
                    if same(&open.heading, &piece.heading) && open.chars + 2 + piece.chars <= MAX_PASSAGE_CHARS =>
                {
                    open.text.push_str("\n\n");
                    open.text.push_str(&piece.text);
                    open.chars += 2 + piece.chars;
                    open.lines.1 = piece.lines.1;
                    Some(open)
                }
                Some(done) => {
                    self.close(done)?;
                    Some(piece)
                }
                None => Some(piece),
            };
        }
        Ok(())
    }

    fn close(&mut self, block: Block) -> Result<(), ExtractError> {
        if self.out.len() == MAX_PASSAGES {
            return Err(ExtractError::TooManyPassages);
        }
        self.bytes += block.text.len() + block.heading.as_deref().map_or(0, str::len);
        if self.bytes > MAX_PASSAGE_BYTES {
            return Err(ExtractError::PassagesTooLarge);
        }
        let position = self.out.len();
        self.out.push(Passage {
            position,
            heading: block.heading.map(|h| h.to_string()),
            lines: block.lines,
            text: block.text,
        });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Passage>, ExtractError> {
        if let Some(done) = self.open.take() {
            self.close(done)?;
        }
        Ok(self.out)
    }
}

/// Whether two blocks are under the same heading path (the same one shared, most often).
fn same(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        (None, None) => true,
        _ => false,
    }
}

/// A paragraph as pieces of at most [`MAX_PASSAGE_CHARS`], cut at sentence ends where it can be.
fn split_long(block: Block) -> Vec<Block> {
    if block.chars <= MAX_PASSAGE_CHARS {
        return vec![block];
    }
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut piece_chars = 0;
    let mut sentence = String::new();
    let mut sentence_chars = 0;
    let flush = |piece: &mut String, piece_chars: &mut usize, pieces: &mut Vec<String>| {
        if !piece.trim().is_empty() {
            pieces.push(piece.trim().to_string());
        }
        piece.clear();
        *piece_chars = 0;
    };
    for c in block.text.chars() {
        sentence.push(c);
        sentence_chars += 1;
        let ends = matches!(c, '。' | '！' | '？' | '.' | '!' | '?' | '\n');
        if ends || sentence_chars >= MAX_PASSAGE_CHARS {
            if piece_chars + sentence_chars > MAX_PASSAGE_CHARS {
                flush(&mut piece, &mut piece_chars, &mut pieces);
            }
            piece.push_str(&sentence);
            piece_chars += sentence_chars;
            sentence.clear();
            sentence_chars = 0;
        }
    }
    if piece_chars + sentence_chars > MAX_PASSAGE_CHARS {
        flush(&mut piece, &mut piece_chars, &mut pieces);
    }
    piece.push_str(&sentence);
    flush(&mut piece, &mut piece_chars, &mut pieces);
    pieces
        .into_iter()
        .map(|text| Block { chars: text.chars().count(), text, lines: block.lines, heading: block.heading.clone() })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_are_packed_within_a_section_and_keep_their_lines_and_heading() {
        let text = "# Leases\n\nA lease is held.\nIt is renewed.\n\n## Renewal\n\nEvery 10 s.\n\nBy the keeper.\n";
        let passages = passages(text, true).expect("cuts");
        assert_eq!(passages.len(), 2, "{passages:?}");
        assert_eq!(passages[0].text, "A lease is held.\nIt is renewed.");
        assert_eq!((passages[0].heading.as_deref(), passages[0].lines), (Some("Leases"), (3, 4)));
        assert_eq!(passages[1].text, "Every 10 s.\n\nBy the keeper.");
        assert_eq!(passages[1].location(), "Leases › Renewal, lines 8-10");
        assert_eq!(passages[1].position, 1);
    }

    #[test]
    fn plain_text_has_no_headings() {
        let passages = passages("# not a heading\n\nsecond", false).expect("cuts");
        assert_eq!(passages.len(), 1);
        assert_eq!(passages[0].heading, None);
        assert_eq!(passages[0].location(), "lines 1-3");
    }

    #[test]
    fn long_paragraphs_are_cut_at_sentence_ends_within_the_limit_in_characters() {
        let sentence = "租约由守护者每十秒续期一次。";
        let text = sentence.repeat(200);
        let passages = passages(&text, false).expect("cuts");
        assert!(passages.len() > 1);
        for passage in &passages {
            let chars = passage.text.chars().count();
            assert!(chars <= MAX_PASSAGE_CHARS, "{chars}");
            assert!(passage.text.ends_with('。'), "cut mid-sentence: {:?}", &passage.text[passage.text.len() - 6..]);
        }
        let joined: String = passages.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(joined, text, "nothing lost");
        let unbroken = "x".repeat(MAX_PASSAGE_CHARS * 2 + 5);
        let cut = super::passages(&unbroken, false).expect("cuts");
        assert_eq!(cut.iter().map(|p| p.text.chars().count()).collect::<Vec<_>>(), [800, 800, 5]);
    }

    /// Six headings of 200 four-byte characters, then `x` paragraphs: once, every paragraph held its
    /// own copy of the joined heading (256 KiB of input took 609 MB).
    fn deep_headings_then_tiny_paragraphs(paragraphs: usize) -> String {
        let mut text = String::new();
        for level in 1..=6 {
            text.push_str(&format!("{} {}\n", "#".repeat(level), "𝔸".repeat(MAX_HEADING_CHARS)));
        }
        text.push_str(&"x\n\n".repeat(paragraphs));
        text
    }

    #[test]
    fn passages_hold_about_what_the_text_holds_whatever_its_headings() {
        let text = deep_headings_then_tiny_paragraphs(87_000);
        let passages = passages(&text, true).expect("cuts");
        let held: usize = passages.iter().map(|p| p.text.len() + p.heading.as_deref().map_or(0, str::len)).sum();
        assert!(held < 4 * text.len(), "{held} bytes held for {} bytes of text", text.len());
        let heading = passages[0].heading.as_deref().expect("a heading");
        assert_eq!(heading.chars().count(), MAX_HEADING_PATH_CHARS, "the path is cut");
        assert_eq!(passages.iter().map(|p| p.text.matches('x').count()).sum::<usize>(), 87_000, "nothing lost");
    }

    #[test]
    fn a_document_cut_past_its_passage_count_or_bytes_is_refused_naming_the_limit() {
        // A heading of its own before every paragraph: one passage each.
        let many: String = (0..=MAX_PASSAGES).map(|n| format!("# h{n}\nx\n")).collect();
        assert_eq!(passages(&many, true).err(), Some(ExtractError::TooManyPassages));
        assert!(ExtractError::TooManyPassages.to_string().contains("max_passages_per_document"));
        // Long headings before short paragraphs: few passages, each carrying 400 characters of heading.
        let heading = format!("# {}\n", "𝔸".repeat(MAX_HEADING_CHARS));
        let heavy: String =
            (0..MAX_PASSAGES - 1).map(|n| format!("{heading}## {n}{}\nx\n", "𝔸".repeat(MAX_HEADING_CHARS))).collect();
        assert_eq!(passages(&heavy, true).err(), Some(ExtractError::PassagesTooLarge));
        assert!(ExtractError::PassagesTooLarge.to_string().contains("max_document_passage_bytes"));
    }
}
