//! What a PDF's streams expand to, measured before its parser expands them: the error every PDF check
//! answers with and the measure of one stream, shared by the whole-file reader ([`super::pdf`]) and
//! the checks of its pages and forms ([`super::pdf_forms`]).

use std::io::{self, Read};

use flate2::read::ZlibDecoder;

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

/// The most that one page's content streams may expand to, in bytes (2 MiB): the parser holds a
/// page's operations in memory, at about thirty times their size, while it reads the page.
pub const MAX_PDF_PAGE_CONTENT_BYTES: u64 = 2 * 1024 * 1024;

/// Why an LZW-coded PDF is not read.
pub(super) const LZW: &str = "the PDF uses LZW coding (PDF before 1.2), which is not read here";

/// What `stream` expands to as the parser decodes it. Errors: [`PdfError::Expands`] past `bound`;
/// [`PdfError::Unreadable`] for LZW, or ASCII85 after Flate (a coding that cannot be measured without
/// expanding it first).
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
