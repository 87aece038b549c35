//! The console's built files (`console/dist/`), embedded in the binary, and how each is answered:
//! its content type, its caching (hashed assets immutable for a year, `index.html` revalidated with an
//! `ETag`), and the security headers every answer carries ([`CONTENT_SECURITY_POLICY`]).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The Content-Security-Policy of every console answer: everything from this origin only, no inline
/// script or style, no plugins, no `<base>`, forms posting here only, and no page may frame the console.
/// Images may also be `blob:`: the console shows a run's image from the bytes it fetched with the
/// user's token (an image runs no script).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' blob:; font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// How long a hashed asset may be cached: a year, never revalidated (its name changes with its content).
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The built console, `console/dist/` at build time.
#[derive(rust_embed::Embed)]
#[folder = "console/dist"]
struct Assets;

/// Whether the console's files are in this binary: false for a binary built before `console/dist/` held
/// a build (then `/console/` answers 404).
pub fn is_built() -> bool {
    Assets::get("index.html").is_some()
}

pub(super) fn redirect_to_index() -> Response {
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/console/"));
    secure(response)
}

/// The answer for the console file at `path` (relative to `console/dist/`), given the request's headers:
/// the file with its content type and caching, 304 when `If-None-Match` names its current `ETag`, or 404.
pub fn file(path: &str, request: &HeaderMap) -> Response {
    let Some(file) = Assets::get(path) else {
        return secure((StatusCode::NOT_FOUND, "no such file in the console").into_response());
    };
    let etag = format!("\"{}\"", hex(&file.metadata.sha256_hash()[..16]));
    let cache = if is_hashed(path) { IMMUTABLE } else { "no-cache" };
    let matches = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag || tag.trim() == "*"));
    let mut response =
        if matches { StatusCode::NOT_MODIFIED.into_response() } else { file.data.into_owned().into_response() };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type(path));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::ETAG, HeaderValue::from_str(&etag).expect("hex is a valid header value"));
    secure(response)
}

/// Whether `path` is one of the build's content-hashed files (Vite writes them under `assets/`).
fn is_hashed(path: &str) -> bool {
    path.starts_with("assets/")
}

/// The content type of a console file, from its extension; text types say UTF-8.
fn content_type(path: &str) -> HeaderValue {
    let kind = match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    };
    HeaderValue::from_static(kind)
}

/// Adds the console's security headers to an answer.
fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The built assets' paths, `assets/...` (hashed names change with each build); for the tests.
#[cfg(test)]
pub(super) fn assets_with(ext: &str) -> Vec<String> {
    Assets::iter().filter(|p| p.starts_with("assets/") && p.ends_with(ext)).map(|p| p.into_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(response: &Response, name: header::HeaderName) -> &str {
        response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    #[test]
    fn the_build_is_embedded_with_its_scripts_and_styles() {
        assert!(is_built(), "console/dist/index.html is embedded");
        assert!(!assets_with(".js").is_empty(), "a script");
        assert!(!assets_with(".css").is_empty(), "a style sheet");
    }

    #[test]
    fn index_html_is_html_revalidated_each_time_and_under_the_policy() {
        let response = file("index.html", &HeaderMap::new());
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, header::CONTENT_TYPE), "text/html; charset=utf-8");
        assert_eq!(header(&response, header::CACHE_CONTROL), "no-cache");
        assert_eq!(header(&response, header::CONTENT_SECURITY_POLICY), CONTENT_SECURITY_POLICY);
        assert_eq!(header(&response, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert!(header(&response, header::ETAG).starts_with('"'));
    }

    #[test]
    fn the_policy_allows_this_origin_only_and_no_inline_script() {
        let directives: Vec<&str> = CONTENT_SECURITY_POLICY.split(';').map(str::trim).collect();
        for expected in ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
            assert!(directives.contains(&expected), "{expected} in {CONTENT_SECURITY_POLICY}");
        }
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-eval"));
    }

    #[test]
    fn the_index_has_no_inline_script_or_style() {
        let index = String::from_utf8(Assets::get("index.html").unwrap().data.into_owned()).unwrap();
        for tag in index.match_indices("<script").map(|(at, _)| &index[at..]) {
            let open = &tag[..tag.find('>').unwrap()];
            assert!(open.contains("src=\"/console/assets/"), "a script with a source under /console/: {open}");
        }
        assert!(!index.contains("<style"), "no inline style sheet");
        assert!(!index.contains(" style="), "no inline style");
    }

    #[test]
    fn hashed_assets_have_their_content_type_and_are_immutable() {
        for (ext, kind) in [(".js", "text/javascript; charset=utf-8"), (".css", "text/css; charset=utf-8")] {
            for path in assets_with(ext) {
                let response = file(&path, &HeaderMap::new());
                assert_eq!(response.status(), StatusCode::OK, "{path}");
                assert_eq!(header(&response, header::CONTENT_TYPE), kind, "{path}");
                assert_eq!(header(&response, header::CACHE_CONTROL), IMMUTABLE, "{path}");
            }
        }
    }

    #[test]
    fn an_unknown_file_is_404_under_the_policy() {
        for path in ["assets/nothing-here.js", "../Cargo.toml", "index.htm", ""] {
            let response = file(path, &HeaderMap::new());
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path:?}");
            assert_eq!(header(&response, header::CONTENT_SECURITY_POLICY), CONTENT_SECURITY_POLICY);
        }
    }

    #[test]
    fn a_matching_etag_answers_304_and_another_the_file() {
        let etag = file("index.html", &HeaderMap::new()).headers()[header::ETAG].clone();
        let mut request = HeaderMap::new();
        request.insert(header::IF_NONE_MATCH, etag.clone());
        let response = file("index.html", &request);
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(response.headers()[header::ETAG], etag);
        request.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"stale\""));
        assert_eq!(file("index.html", &request).status(), StatusCode::OK);
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type("a.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("assets/a-1.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("assets/a-1.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("a.svg"), "image/svg+xml");
        assert_eq!(content_type("a.unknown"), "application/octet-stream");
        assert_eq!(content_type("no-extension"), "application/octet-stream");
    }
}
