//! A PDF's text layer, read within bounds on what its compressed streams expand to and on the text
//! kept.
//!
//! A PDF's streams are mostly Flate-compressed, and deflate expands up to about a thousand times: a
//! 60 KB upload can hold 50 MB of page content, which the parser would decompress into memory and
//! then interpret glyph by glyph. So the streams' expanded size is measured first, by decompressing
//! each into nothing and stopping at the bound, before the parser sees the file.

use std::io::{self, Read, Write};

use flate2::read::ZlibDecoder;

use super::pdf_streams::{LZW, MAX_PDF_PAGE_CONTENT_BYTES, PdfError, stream_size};

/// The most that a PDF's Flate-compressed streams may expand to in all, in bytes (64 MiB).
pub const MAX_PDF_EXPANDED_BYTES: u64 = 64 * 1024 * 1024;

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

    #[test]
    fn a_pdf_whose_form_draws_itself_is_refused_before_the_parser_recurses() {
        use pdf_extract::content::{Content, Operation};
        use pdf_extract::{Dictionary, Object, Stream};
        let draws = |name: &str| {
            let op = Operation::new("Do", vec![Object::Name(name.as_bytes().to_vec())]);
            String::from_utf8(Content { operations: vec![op] }.encode().expect("encodes")).expect("ASCII")
        };
        let page = Stream::new(Dictionary::new(), draws("A").into_bytes());
        let mut doc = one_page(page, &[("A", &draws("B")), ("B", &draws("A"))]);
        let mut file = Vec::new();
        doc.save_to(&mut file).expect("saves");
        let read = text(&file, usize::MAX);
        assert!(matches!(&read, Err(PdfError::Unreadable(m)) if m.contains("draws itself")), "{read:?}");
    }
}
