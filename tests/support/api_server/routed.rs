//! A stand-in for the Kubernetes API server that answers by route rather than by a fixed order: for tests
//! of watchers and controllers, whose requests interleave. Every request is recorded.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::Value;

/// One request as the stand-in saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `GET`, `POST`...
    pub method: String,
    /// The path and query.
    pub path_and_query: String,
    /// The JSON body, `Null` when there is none.
    pub body: Value,
}

/// An answer: a status and a JSON body, or a watch stream of these events (then the stream ends).
pub enum Answer {
    /// A JSON body.
    Json(u16, Value),
    /// A watch response: one JSON event per line, after a pause of this many milliseconds.
    Watch(u64, Vec<Value>),
}

/// A client of a stand-in API server that answers each request with `route(seen, earlier)` (`earlier`:
/// the requests before it) and records them all.
pub fn routed(
    route: impl Fn(&Seen, &[Seen]) -> Answer + Send + Sync + 'static,
) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let log = seen.clone();
    let route = Arc::new(route);
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (log, route) = (log.clone(), route.clone());
            tokio::spawn(async move {
                let method = request.method().to_string();
                let path_and_query = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let this = Seen { method, path_and_query, body };
                let earlier = log.lock().expect("log").clone();
                log.lock().expect("log").push(this.clone());
                let (status, text) = match route(&this, &earlier) {
                    Answer::Json(status, value) => (status, value.to_string()),
                    Answer::Watch(pause, events) => {
                        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                        (200, events.iter().map(|e| format!("{e}\n")).collect())
                    }
                };
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(text.into_bytes()))
                    .expect("response");
                send.send_response(response);
            });
        }
    });
    (kube::Client::new(service, "default"), seen)
}
