//! The HTTP edge: HTTP/1 connections with a header-read timeout and a cap on connections
//! served at once, and a graceful stop.
//!
//! A connection that sends no complete request head within the timeout is closed, whether it
//! is silent, trickles a head byte by byte, or idles between requests (hyper starts the timer
//! whenever it waits for a head). Past the cap, new connections wait in the listen backlog
//! until one closes, so a flood of idle connections delays callers but never exhausts the
//! provider's file descriptors.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tower::Service;

pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

#[derive(Debug, Clone, Copy)]
pub struct EdgeLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
}

/// Held while a connection is served: its slot, and the stop's count of open connections.
type Held = (OwnedSemaphorePermit, mpsc::Sender<()>);

/// Serves `app` on `listener` until `stop` resolves; then stops accepting, lets every
/// connection finish its in-flight request and returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: EdgeLimits,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stopping_tx, stopping_rx) = watch::channel(false);
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    let mut stop = pin!(stop);
    loop {
        let slot = tokio::select! {
            slot = take_slot(&slots, limits.max_connections) => slot,
            () = &mut stop => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        tokio::spawn(connection(
            stream,
            app.clone(),
            limits.header_read_timeout,
            stopping_rx.clone(),
            (slot, open_tx.clone()),
        ));
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    drop(open_tx);
    // Every connection holds a sender: `None` once the last one has closed.
    let _ = open_rx.recv().await;
}

/// A free connection slot; when every slot is taken, says so and waits for one.
async fn take_slot(slots: &Arc<Semaphore>, max: usize) -> OwnedSemaphorePermit {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return slot;
    }
    tracing::warn!(
        max_connections = max,
        "connection limit reached: new connections wait until one closes"
    );
    match slots.clone().acquire_owned().await {
        Ok(slot) => slot,
        // The semaphore is never closed.
        Err(_) => std::future::pending().await,
    }
}

async fn connection(
    stream: TcpStream,
    app: Router,
    header_read_timeout: Duration,
    mut stopping: watch::Receiver<bool>,
    _held: Held,
) {
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let mut app = app.clone();
        async move { Ok::<_, Infallible>(app.call(req).await.unwrap_or_else(|e| match e {})) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    let served = tokio::select! {
        served = conn.as_mut() => served,
        () = stopped => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// Out of file descriptors and the like: wait a little rather than spin.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
