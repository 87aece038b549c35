//! The web console at `/console`: the static files of the front end in `console/` (built by `make
//! console` into `console/dist/`, checked in), embedded in the binary so the facade serves them with no
//! other server and no files beside the binary. The console speaks only the facade's public API, with the
//! user's bearer token (`docs/how-to/use-the-console.md`).
//!
//! Every answer carries a strict Content-Security-Policy ([`assets::CONTENT_SECURITY_POLICY`]: scripts, styles
//! and connections to this origin only, no inline script, no framing). The built files under `assets/`
//! have their content's hash in their names and are cached for a year as immutable; `index.html` is
//! revalidated on every load (`no-cache`, with an `ETag`), so a new binary's console is picked up at once.
//!
//! The files and their headers are in [`assets`]; this module serves them at [`CONSOLE_PATH`].

pub mod assets;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console";

/// The console's routes: `/console` redirects to `/console/`, which serves `index.html`, and
/// `/console/{path}` serves the built file of that path or answers 404.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(CONSOLE_PATH, get(|| async { assets::redirect_to_index() }))
        .route("/console/", get(|headers: HeaderMap| async move { assets::file("index.html", &headers) }))
        .route(
            "/console/{*path}",
            get(|axum::extract::Path(path): axum::extract::Path<String>, headers: HeaderMap| async move {
                assets::file(&path, &headers)
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::assets::{CONTENT_SECURITY_POLICY, IMMUTABLE, assets_with};
    use super::*;

    /// The routes as a browser reaches them, over HTTP.
    #[tokio::test]
    async fn routes_redirect_serve_the_index_and_assets_and_404_the_rest() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app: Router = routes();
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        crate::tls::install_crypto_provider();
        let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

        let redirect = client.get(format!("{base}/console")).send().await.unwrap();
        assert_eq!(redirect.status(), 308);
        assert_eq!(redirect.headers()["location"], "/console/");

        let index = client.get(format!("{base}/console/")).send().await.unwrap();
        assert_eq!(index.status(), 200);
        assert_eq!(index.headers()["content-security-policy"], CONTENT_SECURITY_POLICY);
        let html = index.text().await.unwrap();
        assert!(html.contains("<div id=\"app\">"), "{html}");

        let script = &assets_with(".js")[0];
        let asset = client.get(format!("{base}/console/{script}")).send().await.unwrap();
        assert_eq!(asset.status(), 200);
        assert_eq!(asset.headers()["cache-control"], IMMUTABLE);
        assert_eq!(asset.headers()["content-type"], "text/javascript; charset=utf-8");

        let head = client.head(format!("{base}/console/index.html")).send().await.unwrap();
        assert_eq!(head.status(), 200);

        for missing in ["/console/assets/missing.js", "/console/agents", "/console/nope/index.html"] {
            let answer = client.get(format!("{base}{missing}")).send().await.unwrap();
            assert_eq!(answer.status(), 404, "{missing}");
        }
        server.abort();
    }
}
