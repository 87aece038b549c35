//! A PDF's text layer, read within bounds on what its compressed streams expand to and on the text
//! kept.
//!
//! A PDF's streams are mostly Flate-compressed, and deflate expands up to about a thousand times: a
//! 60 KB upload can hold 50 MB of page content, which the parser would decompress into memory and
//! then interpret glyph by glyph. So the streams' expanded size is measured first, by decompressing
//! each into nothing and stopping at the bound, before the parser sees the file.

use std::io::{self, Read, Write};

use flate2::read::ZlibDecoder;

/// The most that a PDF's Flate-compressed streams may expand to in all, in bytes (64 MiB).
pub const MAX_PDF_EXPANDED_BYTES: u64 = 64 * 1024 * 1024;

/// Why a PDF was not read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PdfError {
    /// Its streams expand to more than [`MAX_PDF_EXPANDED_BYTES`].
    Expands,
    /// A page's content streams expand to more than [`MAX_PDF_PAGE_CONTENT_BYTES`].
    PageExpands,
    /// Its text passes the caller's limit.
    TooMuchText,
    /// The parser could not read it (the message says why).
    Unreadable(String),
}

/// The text layer of the PDF `bytes`, at most `limit` bytes of it.
///
/// Errors: [`PdfError`]. The parser panics on some malformed files; a panic is caught and answered
/// as [`PdfError::Unreadable`].
pub(super) fn text(bytes: &[u8], limit: usize) -> Result<String, PdfError> {
    // The parser expands object streams while it loads the file: those are measured in the raw bytes
    // (LZW, which cannot be measured there, is refused wherever a name spells it).
    if names_lzw(bytes) {
        return Err(PdfError::Unreadable(LZW.into()));
    }
    if expanded_size(bytes, MAX_PDF_EXPANDED_BYTES) > MAX_PDF_EXPANDED_BYTES {
        return Err(PdfError::Expands);
    }
    let read = std::panic::catch_unwind(|| {
        let mut out = Bounded { out: Vec::new(), limit, over: false };
        let outcome = (|| {
            let mut doc =
                pdf_extract::Document::load_mem(bytes).map_err(|err| PdfError::Unreadable(err.to_string()))?;
            if doc.is_encrypted() {
                // Readable without a password, as a viewer opens it, or not at all.
                doc.decrypt("").map_err(|err| PdfError::Unreadable(err.to_string()))?;
            }
            super::pdf_forms::check_page_tree(&doc)?;
            // Loaded (and decrypted), every stream is measured again as the parser will decode it.
            loaded_size(&doc, MAX_PDF_EXPANDED_BYTES)?;
            // And the content the parser will interpret, each form once per drawing.
            super::pdf_forms::interpreted_size(&doc, MAX_PDF_EXPANDED_BYTES)?;
            let writer: &mut dyn Write = &mut out;
            let mut output = pdf_extract::PlainTextOutput::new(writer);
            pdf_extract::output_doc(&doc, &mut output).map_err(|err| PdfError::Unreadable(err.to_string()))
        })();
        (outcome, out)
    });
    match read {
        Err(_) => Err(PdfError::Unreadable("the PDF is malformed".to_string())),
        Ok((_, out)) if out.over => Err(PdfError::TooMuchText),
        Ok((Err(err), _)) => Err(err),
        Ok((Ok(()), out)) => {
            String::from_utf8(out.out).map_err(|_| PdfError::Unreadable("its text is not UTF-8".into()))
        }
    }
}

const LZW: &str = "the PDF uses LZW coding (PDF before 1.2), which is not read here";

/// Whether a PDF name in `bytes` spells LZW (`/LZWDecode`, or `/LZW` of an inline image), with its
/// `#xx` escapes read.
fn names_lzw(bytes: &[u8]) -> bool {
    let mut unescaped = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b))) {
            (b'#', Some(high), Some(low)) => {
                unescaped.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                unescaped.push(byte);
                i += 1;
            }
        }
    }
    find(&unescaped, b"/LZW").is_some()
}

/// The most that one page's content streams may expand to, in bytes (2 MiB): the parser holds a
/// page's operations in memory, at about thirty times their size, while it reads the page.
pub const MAX_PDF_PAGE_CONTENT_BYTES: u64 = 2 * 1024 * 1024;

/// What the streams of the loaded `doc` expand to as its parser decodes them, in all. Errors:
/// [`PdfError::Expands`] past `bound`, [`PdfError::PageExpands`] when a page's content streams pass
/// [`MAX_PDF_PAGE_CONTENT_BYTES`]; [`PdfError::Unreadable`] for LZW, or ASCII85 after Flate (a coding
/// that cannot be measured without expanding it first).
fn loaded_size(doc: &pdf_extract::Document, bound: u64) -> Result<u64, PdfError> {
    let mut total = 0u64;
    for object in doc.objects.values() {
        let pdf_extract::Object::Stream(stream) = object else { continue };
        total += stream_size(stream, bound - total)?;
    }
    for page in doc.get_pages().into_values() {
        let mut page_total = 0u64;
        for id in doc.get_page_contents(page) {
            let Ok(pdf_extract::Object::Stream(stream)) = doc.get_object(id) else { continue };
            page_total += stream_size(stream, MAX_PDF_PAGE_CONTENT_BYTES - page_total)
                .map_err(|err| if err == PdfError::Expands { PdfError::PageExpands } else { err })?;
        }
    }
    Ok(total)
}

/// What `stream` expands to as the parser decodes it. Errors: as [`loaded_size`]'s, `Expands` past
/// `bound`.
pub(super) fn stream_size(stream: &pdf_extract::Stream, bound: u64) -> Result<u64, PdfError> {
    let within = |size: u64| if size > bound { Err(PdfError::Expands) } else { Ok(size) };
    let Ok(filters) = stream.filters() else {
        return within(stream.content.len() as u64);
    };
    // Leading ASCII85 steps shrink the data (5 characters to 4 bytes): decoded as they are.
    let ascii = filters.iter().take_while(|f| *f == b"ASCII85Decode").count();
    let mut input = stream.content.clone();
    if ascii > 0 {
        let mut first = stream.clone();
        first.dict.set("Filter", pdf_extract::Object::Name(b"ASCII85Decode".to_vec()));
        for _ in 0..ascii {
            first.content = input;
            input = first.decompressed_content().map_err(|err| PdfError::Unreadable(err.to_string()))?;
        }
    }
    let rest = &filters[ascii..];
    if rest.contains(&&b"LZWDecode"[..]) {
        return Err(PdfError::Unreadable(LZW.into()));
    }
    let flate = rest.iter().take_while(|f| *f == b"FlateDecode").count();
    if flate == 0 {
        // Nothing the parser expands (an image's own coding, or none), counted as it is.
        return within(input.len() as u64);
    }
    if rest[flate..].contains(&&b"ASCII85Decode"[..]) {
        return Err(PdfError::Unreadable(
            "the PDF codes a stream as Flate, then ASCII85, which is not read here".into(),
        ));
    }
    let mut reader: Box<dyn Read> = Box::new(io::Cursor::new(input));
    for _ in 0..flate {
        reader = Box::new(ZlibDecoder::new(reader));
    }
    let (mut total, mut sink) = (0u64, [0u8; 64 * 1024]);
    loop {
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => return Ok(total),
            Ok(n) => {
                total += n as u64;
                if total > bound {
                    return Err(PdfError::Expands);
                }
            }
        }
    }
}

/// A writer that keeps at most `limit` bytes and fails the write that would pass it.
struct Bounded {
    out: Vec<u8>,
    limit: usize,
    over: bool,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len() + buf.len() > self.limit {
            self.over = true;
            return Err(io::Error::other("the text limit is reached"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What the zlib streams that follow a `stream` keyword in `bytes` expand to in all, counted up to
/// just past `bound` (decompressing stops there). Data that is not zlib after a keyword (an image's
/// own coding, or no compression) counts nothing: the parser does not expand it.
fn expanded_size(bytes: &[u8], bound: u64) -> u64 {
    const KEYWORD: &[u8] = b"stream";
    let mut total = 0u64;
    let mut sink = [0u8; 64 * 1024];
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], KEYWORD) {
        let mut start = from + at + KEYWORD.len();
        from = start;
        // The keyword is followed by an end of line (CR LF or LF) before the data; `endstream` is
        // not a start.
        if from >= KEYWORD.len() + 3 && &bytes[from - KEYWORD.len() - 3..from - KEYWORD.len()] == b"end" {
            continue;
        }
        match bytes.get(start..start + 2) {
            Some(b"\r\n") => start += 2,
            Some([b'\n', _]) => start += 1,
            _ => continue,
        }
        let mut decoder = ZlibDecoder::new(&bytes[start..]);
        loop {
            match decoder.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n as u64;
                    if total > bound {
                        return total;
                    }
                }
            }
        }
    }
    total
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knowledge::test_pdf::{flate_stream, one_page, zlib};

    fn with_stream(data: &[u8]) -> Vec<u8> {
        let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Filter /FlateDecode >>\nstream\r\n".to_vec();
        pdf.extend(zlib(data));
        pdf.extend(b"\nendstream\nendobj\n");
        pdf
    }

    #[test]
    fn compressed_streams_are_measured_by_what_they_expand_to() {
        let pdf = with_stream(&vec![b'A'; 1_000_000]);
        assert!(pdf.len() < 5_000, "deflate shrinks it: {}", pdf.len());
        assert_eq!(expanded_size(&pdf, u64::MAX), 1_000_000);
        // Counting stops just past the bound.
        assert!(expanded_size(&pdf, 100_000) <= 100_000 + 64 * 1024);
        // Two streams add up; data that is not zlib counts nothing.
        let mut two = pdf.clone();
        two.extend(with_stream(b"hello"));
        two.extend(b"2 0 obj\n<< >>\nstream\nnot zlib\nendstream\n");
        assert_eq!(expanded_size(&two, u64::MAX), 1_000_005);
    }

    #[test]
    fn a_pdf_whose_streams_expand_past_the_bound_is_refused_before_it_is_parsed() {
        let bomb = with_stream(&vec![b'A'; MAX_PDF_EXPANDED_BYTES as usize + 1]);
        assert!(bomb.len() < 200_000, "{}", bomb.len());
        assert_eq!(text(&bomb, usize::MAX), Err(PdfError::Expands));
    }

    #[test]
    fn lzw_is_refused_however_its_name_is_spelled() {
        assert!(names_lzw(b"<< /Filter /LZWDecode >>"));
        assert!(names_lzw(b"<< /Filter /L#5AWDecode >>"));
        assert!(!names_lzw(b"<< /Filter /FlateDecode >> (LZW in a text)"));
        assert!(
            matches!(text(b"%PDF-1.4\n<< /Filter /LZW#44ecode >>", usize::MAX), Err(PdfError::Unreadable(m)) if m.contains("LZW"))
        );
    }

    #[test]
    fn streams_the_raw_scan_cannot_see_are_measured_once_loaded() {
        // Flate twice: the raw scan sees the outer stream's small expansion only.
        let inner = zlib(&vec![b'A'; 4 * 1024 * 1024]);
        let twice = zlib(&inner);
        let mut doc = pdf_extract::Document::with_version("1.5");
        let mut dict = pdf_extract::Dictionary::new();
        dict.set(
            "Filter",
            pdf_extract::Object::Array(vec![
                pdf_extract::Object::Name(b"FlateDecode".to_vec()),
                pdf_extract::Object::Name(b"FlateDecode".to_vec()),
            ]),
        );
        doc.add_object(pdf_extract::Object::Stream(pdf_extract::Stream::new(dict, twice)));
        assert_eq!(loaded_size(&doc, u64::MAX), Ok(4 * 1024 * 1024));
        assert_eq!(loaded_size(&doc, 1024 * 1024), Err(PdfError::Expands));
    }

    #[test]
    fn a_page_whose_content_expands_past_its_bound_is_refused() {
        let page_with = |content: &[u8]| one_page(flate_stream(content), &[]);
        let small = page_with(b"BT (hello) Tj ET");
        assert_eq!(small.get_pages().len(), 1);
        assert!(loaded_size(&small, u64::MAX).is_ok());
        let large = page_with(&vec![b' '; MAX_PDF_PAGE_CONTENT_BYTES as usize + 1]);
        assert_eq!(loaded_size(&large, u64::MAX), Err(PdfError::PageExpands));
    }

    #[test]
    fn streams_without_compression_count_against_the_bound_too() {
        let mut doc = pdf_extract::Document::with_version("1.5");
        for _ in 0..3 {
            let plain = pdf_extract::Stream::new(pdf_extract::Dictionary::new(), vec![b' '; 10]);
            doc.add_object(pdf_extract::Object::Stream(plain));
        }
        assert_eq!(loaded_size(&doc, 30), Ok(30));
        assert_eq!(loaded_size(&doc, 25), Err(PdfError::Expands));
    }

    #[test]
    fn text_past_the_limit_is_refused() {
        let pdf = include_bytes!("../../tests/fixtures/knowledge/lease-renewal.pdf");
        let whole = text(pdf, usize::MAX).expect("reads");
        assert!(whole.contains("renews its lease every ten seconds"), "{whole}");
        assert_eq!(text(pdf, whole.len()), Ok(whole.clone()));
        assert_eq!(text(pdf, whole.len() / 2), Err(PdfError::TooMuchText));
    }
}
