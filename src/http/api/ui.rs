//! The approvals page: static files under `ui/static/`, embedded in the binary, served at `/ui`
//! without authentication (the page asks for a frontend token and calls the API with it).

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::RustEmbed;

use super::state::AppState;
use crate::http::server::layers::fallback;

#[derive(RustEmbed)]
#[folder = "ui/static/"]
struct Assets;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/{*path}", get(asset))
}

async fn index() -> Response {
    match serve("index.html") {
        Some(res) => res,
        None => fallback().await.into_response(),
    }
}

async fn asset(Path(path): Path<String>) -> Response {
    match serve(&path) {
        Some(res) => res,
        None => fallback().await.into_response(),
    }
}

fn serve(path: &str) -> Option<Response> {
    let content_type = content_type(path)?;
    let file = Assets::get(path)?;
    let mut res = (StatusCode::OK, file.data.into_owned()).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; base-uri 'none'; frame-ancestors 'none'"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(res)
}

/// Only the three kinds of file the page is made of; anything else is not served.
fn content_type(path: &str) -> Option<&'static str> {
    match path.rsplit_once('.')?.1 {
        "html" => Some("text/html; charset=utf-8"),
        "js" => Some("text/javascript; charset=utf-8"),
        "css" => Some("text/css; charset=utf-8"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_assets_are_embedded_with_their_types() {
        for (path, ty) in [
            ("index.html", "text/html; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
        ] {
            assert!(Assets::get(path).is_some(), "{path} is embedded");
            assert_eq!(content_type(path), Some(ty));
        }
        assert_eq!(Assets::iter().count(), 3, "only the page is embedded");
        assert_eq!(content_type("secret"), None);
    }
}
