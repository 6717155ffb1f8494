//! The benchmark baseline: the smallest axum server, on the same runtime as the service and
//! the system allocator (the service's jemalloc is set in its binary). Built with the same
//! release profile, alone, so its features never change the service's build:
//! `cargo run --release -p bench-hello -- 127.0.0.1:9000`

use axum::{routing::get, Router};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
