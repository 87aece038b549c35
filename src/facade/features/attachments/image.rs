//! `POST /api/chat/image/upload`: an image for a message, as Yuxi's client uploads it (multipart, one
//! part `file`) before sending it with the message as the run's `image_content` (base64). The image is
//! read here, checked to be a PNG, JPEG, GIF or WebP image of at most [`MAX_IMAGE_BYTES`], measured, and
//! answered base64 in Yuxi's `ImageUploadResponse` shape; it is not kept (it comes back with the
//! message). No model a run starts here is given images yet: a run sent with `image_content` answers
//! 422 naming its model (the run's input is text; docs/reference/facade-api.md).

use axum::Json;
use axum::extract::Multipart;
use base64::Engine;
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::body::UploadForm;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::http::intake::{FileForm, read_part};

/// The largest image, in bytes: its base64 must fit, with the rest of the message, in a run's body
/// (1 MiB).
pub const MAX_IMAGE_BYTES: usize = 640 * 1024;

/// The answer (Yuxi's `ImageUploadResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct UploadedImage {
    /// Always true (a failure is a 4xx).
    pub success: bool,
    /// The image, base64.
    pub image_content: String,
    /// The same image, base64 (images are not resized here).
    pub thumbnail_content: String,
    /// Its width in pixels, when its header says.
    pub width: Option<u32>,
    /// Its height in pixels, when its header says.
    pub height: Option<u32>,
    /// `PNG`, `JPEG`, `GIF` or `WEBP`.
    pub format: &'static str,
    /// Its media type.
    pub mime_type: &'static str,
    /// Its size, in bytes.
    pub size_bytes: usize,
    /// Always `null`.
    pub error: Option<String>,
}

/// An image's format, media type and size (width, height) when its header says.
type Measured = (&'static str, &'static str, Option<(u32, u32)>);

/// The format, media type and size (width, height) of the image `bytes`, by its first bytes; `None` for
/// anything but a PNG, JPEG, GIF or WebP image.
fn measure(bytes: &[u8]) -> Option<Measured> {
    let be16 = |at: usize| bytes.get(at..at + 2).map(|b| u32::from(u16::from_be_bytes([b[0], b[1]])));
    let le16 = |at: usize| bytes.get(at..at + 2).map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])));
    let be32 = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(("PNG", "image/png", be32(16).zip(be32(20))));
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some(("GIF", "image/gif", le16(6).zip(le16(8))));
    }
    if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        let size = match bytes.get(12..16) {
            Some(b"VP8 ") => le16(26).zip(le16(28)).map(|(w, h)| (w & 0x3fff, h & 0x3fff)),
            Some(b"VP8L") => bytes.get(21..25).map(|b| {
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
            }),
            Some(b"VP8X") => bytes.get(24..30).map(|b| {
                let w = u32::from_le_bytes([b[0], b[1], b[2], 0]) + 1;
                let h = u32::from_le_bytes([b[3], b[4], b[5], 0]) + 1;
                (w, h)
            }),
            _ => None,
        };
        return Some(("WEBP", "image/webp", size));
    }
    if bytes.starts_with(b"\xff\xd8\xff") {
        // The first start-of-frame segment (SOF0..SOF15 but DHT, JPG and DAC) gives the size.
        let mut at = 2;
        let mut size = None;
        while at + 4 <= bytes.len() && bytes[at] == 0xff {
            let marker = bytes[at + 1];
            let Some(length) = be16(at + 2) else { break };
            if (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc) {
                size = be16(at + 7).zip(be16(at + 5));
                break;
            }
            at += 2 + length as usize;
        }
        return Some(("JPEG", "image/jpeg", size));
    }
    None
}

/// `POST /api/chat/image/upload`.
#[utoipa::path(
    post,
    path = "/api/chat/image/upload",
    operation_id = "upload_image",
    tag = "chat",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "the image, base64, measured", body = UploadedImage),
        (status = 400, description = "not a multipart body", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 413, description = "`max_image_bytes`: the image is larger than the limit", body = ErrorBody),
        (status = 422, description = "`file`: missing, or not a PNG, JPEG, GIF or WebP image; or a part besides it, named", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn upload_image(
    Caller(_): Caller,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<UploadedImage>, ApiError> {
    let mut form = FileForm::new(form)?;
    let bytes = read_part(form.file().await?).await?;
    form.end().await?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ApiError::TooLarge(format!(
            "max_image_bytes: the image has {} bytes; at most {MAX_IMAGE_BYTES}",
            bytes.len()
        )));
    }
    let Some((format, mime_type, size)) = measure(&bytes) else {
        return Err(ApiError::invalid("file", "is not a PNG, JPEG, GIF or WebP image"));
    };
    let image_content = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(Json(UploadedImage {
        success: true,
        thumbnail_content: image_content.clone(),
        image_content,
        width: size.map(|s| s.0),
        height: size.map(|s| s.1),
        format,
        mime_type,
        size_bytes: bytes.len(),
        error: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::measure;

    #[test]
    fn an_image_is_known_by_its_first_bytes_and_measured_by_its_header() {
        let png = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
        )
        .expect("base64");
        assert_eq!(measure(&png), Some(("PNG", "image/png", Some((1, 1)))));
        let gif = b"GIF89a\x0a\x00\x05\x00rest";
        assert_eq!(measure(gif), Some(("GIF", "image/gif", Some((10, 5)))));
        // SOI, an APP0 segment of 16 bytes, then SOF0 with height 3 and width 4.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10];
        jpeg.extend([0u8; 14]);
        jpeg.extend([0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x03, 0x00, 0x04]);
        assert_eq!(measure(&jpeg), Some(("JPEG", "image/jpeg", Some((4, 3)))));
        let mut webp = b"RIFF\x00\x00\x00\x00WEBPVP8X".to_vec();
        webp.extend([0u8; 8]);
        webp.extend([0x09, 0x00, 0x00, 0x04, 0x00, 0x00]);
        assert_eq!(measure(&webp), Some(("WEBP", "image/webp", Some((10, 5)))));
        assert_eq!(measure(b"not an image"), None);
        assert_eq!(measure(b"\x89PNG\r\n\x1a\n"), Some(("PNG", "image/png", None)));
    }
}
