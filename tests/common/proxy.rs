//! A reverse proxy in front of a provider, switchable at run time: it passes calls through,
//! or answers every call itself as a broken ingress would (an HTML 404 or 502 page), or as a
//! provider's JSON 500 with a code plugin API v3 does not call terminal.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    PassThrough = 0,
    Html404 = 1,
    Html502 = 2,
    /// `500 {"code":"vendor.oops", …, "retryable": false}`: not a terminal code.
    Json500Unknown = 3,
    /// Passes every call through but `GET …/v3/capabilities`, answered with an HTML 404.
    CapabilitiesHtml404 = 4,
}

#[derive(Clone)]
struct Shared {
    target: String,
    mode: Arc<AtomicU8>,
    answered: Arc<AtomicUsize>,
    http: reqwest::Client,
}

pub struct Proxy {
    pub base_url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `target` (a base URL).
    pub async fn start(target: &str) -> Proxy {
        let shared = Shared {
            target: target.trim_end_matches('/').to_owned(),
            mode: Arc::new(AtomicU8::new(Mode::PassThrough as u8)),
            answered: Arc::new(AtomicUsize::new(0)),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        };
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Proxy {
            base_url: format!("http://{addr}"),
            shared,
            server,
        }
    }

    pub fn set(&self, mode: Mode) {
        self.shared.mode.store(mode as u8, Ordering::SeqCst);
    }

    /// Calls the proxy answered itself (not passed through).
    pub fn answered_itself(&self) -> usize {
        self.shared.answered.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn html(status: StatusCode, title: &str) -> Response {
    let page = format!(
        "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    );
    (status, [("content-type", "text/html")], page).into_response()
}

async fn handle(State(s): State<Shared>, req: Request) -> Response {
    let mode = s.mode.load(Ordering::SeqCst);
    if !matches!(mode, 0 | 4) {
        s.answered.fetch_add(1, Ordering::SeqCst);
    }
    match mode {
        m if m == Mode::Html404 as u8 => return html(StatusCode::NOT_FOUND, "404 Not Found"),
        m if m == Mode::Html502 as u8 => return html(StatusCode::BAD_GATEWAY, "502 Bad Gateway"),
        m if m == Mode::Json500Unknown as u8 => {
            let body = serde_json::json!({
                "code": "vendor.oops", "category": "internal",
                "message": "something went wrong", "retryable": false,
            });
            return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response();
        }
        m if m == Mode::CapabilitiesHtml404 as u8
            && req.uri().path().ends_with("/v3/capabilities") =>
        {
            return html(StatusCode::NOT_FOUND, "404 Not Found");
        }
        _ => {}
    }
    let (parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let body = to_bytes(body, 64 * 1024 * 1024).await.unwrap();
    let mut out = s
        .http
        .request(parts.method, format!("{}{path}", s.target))
        .body(body);
    for (name, value) in &parts.headers {
        if !is_hop(name) {
            out = out.header(name, value);
        }
    }
    let resp = match out.send().await {
        Ok(resp) => resp,
        Err(_) => return html(StatusCode::BAD_GATEWAY, "502 Bad Gateway"),
    };
    let mut answer = Response::builder().status(resp.status());
    for (name, value) in resp.headers() {
        if !is_hop(name) {
            answer = answer.header(name, value);
        }
    }
    let bytes = resp.bytes().await.unwrap_or_default();
    answer.body(Body::from(bytes)).unwrap()
}

fn is_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host" | "connection" | "keep-alive" | "transfer-encoding" | "content-length" | "upgrade"
    )
}
