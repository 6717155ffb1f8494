//! The HTTP/1 server loop: one task per connection, graceful shutdown.
//!
//! Connections are served by hyper's HTTP/1 builder directly. The generic auto-detecting
//! builder first reads a short version preface, which makes hyper grow every connection's
//! read buffer to 16 KiB; held by ten thousand long-polls that is most of the server's
//! memory.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::Service;

/// Serves `router` on `listener` until `signal` resolves; then stops accepting, lets every
/// connection finish its in-flight request and returns once all are closed.
pub async fn serve<F>(listener: TcpListener, router: Router, signal: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(());
    let (open_tx, open_rx) = watch::channel(());
    tokio::spawn(async move {
        signal.await;
        drop(stop_rx);
    });
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            _ = stop_tx.closed() => break,
        };
        tokio::spawn(connection(
            stream,
            router.clone(),
            stop_tx.clone(),
            open_rx.clone(),
        ));
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// One connection. `_open` is held until the connection is closed.
async fn connection(
    stream: TcpStream,
    router: Router,
    stop: watch::Sender<()>,
    _open: watch::Receiver<()>,
) {
    let service =
        hyper::service::service_fn(move |req: Request<Incoming>| router.clone().call(req));
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut conn = pin!(conn);
    let served = tokio::select! {
        served = conn.as_mut() => served,
        _ = stop.closed() => {
            conn.as_mut().graceful_shutdown();
            conn.as_mut().await
        }
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Out of file descriptors and the like: wait a little rather than spin.
async fn accept_error(e: io::Error) {
    if is_connection_error(&e) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
