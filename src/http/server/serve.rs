//! The HTTP/1 server loop: one task per connection, graceful shutdown.
//!
//! Connections are served by hyper's HTTP/1 builder directly. The generic auto-detecting
//! builder first reads a short version preface, which makes hyper grow every connection's
//! read buffer to 16 KiB; held by ten thousand long-polls that is most of the server's
//! memory.

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::Service;

use super::idle::{Activity, Tracked};
use super::side::{beside, Either};
use crate::metrics::Metrics;

/// What one replica's server allows its clients.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A connection that sends no complete request head for this long is closed: a slow
    /// header and an idle keep-alive alike ([`super::idle`]).
    pub idle_timeout: Duration,
    /// Connections served at once; past that, new ones wait in the listen backlog.
    pub max_connections: usize,
}

/// Serves `app` on `listener` until `signal` resolves; then stops accepting, lets every
/// connection finish its in-flight request and returns once all are closed.
pub async fn serve<A, F>(
    listener: TcpListener,
    app: A,
    limits: Limits,
    metrics: Arc<Metrics>,
    signal: F,
) where
    A: App,
    F: Future<Output = ()> + Send + 'static,
{
    let (stop_tx, stop_rx) = watch::channel(());
    let (open_tx, open_rx) = watch::channel(());
    tokio::spawn(async move {
        signal.await;
        drop(stop_rx);
    });
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let slot = tokio::select! {
            slot = take_slot(&slots, &metrics, limits.max_connections) => slot,
            _ = stop_tx.closed() => break,
        };
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
        let open = Open {
            _slot: slot,
            _open: open_rx.clone(),
            metrics: metrics.clone(),
        };
        metrics
            .http
            .connections_open
            .fetch_add(1, Ordering::Relaxed);
        tokio::spawn(connection(
            stream,
            app.clone(),
            limits.idle_timeout,
            stop_tx.clone(),
            open,
        ));
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}

/// A free connection slot; when every slot is taken, says so once and waits for one.
async fn take_slot(slots: &Arc<Semaphore>, metrics: &Metrics, max: usize) -> OwnedSemaphorePermit {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return slot;
    }
    metrics
        .http
        .connection_limit_reached
        .fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        max_connections = max,
        "connection limit reached: new connections wait until one closes"
    );
    match slots.clone().acquire_owned().await {
        Ok(slot) => slot,
        Err(_) => std::future::pending().await,
    }
}

/// Held while a connection is served: its slot, the shutdown's count of open connections,
/// and the open-connections gauge.
struct Open {
    _slot: OwnedSemaphorePermit,
    _open: watch::Receiver<()>,
    metrics: Arc<Metrics>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.metrics
            .http
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a connection calls for each request: always ready (no `poll_ready`).
pub trait App:
    Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + 'static
{
}

impl<S> App for S where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
}

async fn connection<A: App>(
    stream: TcpStream,
    app: A,
    idle_timeout: Duration,
    stop: watch::Sender<()>,
    _open: Open,
) {
    let activity = Activity::new();
    let service = {
        let activity = activity.clone();
        // hyper calls through `&self`: one service per connection, borrowed for each call
        // (never across an await), rather than a clone of the whole stack per request.
        let app = RefCell::new(app);
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let busy = activity.busy();
            let answer = app.borrow_mut().call(req);
            async move {
                let res = answer.await?;
                Ok::<_, Infallible>(res.map(|body| Tracked::new(body, busy)))
            }
        })
    };
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    let mut conn = pin!(conn);
    let mut watchdog = pin!(watchdog(&activity, idle_timeout, &stop, false));
    let served = loop {
        match beside(conn.as_mut(), watchdog.as_mut()).await {
            Either::Main(served) => break served,
            Either::Side(Watchdog::Expired) => {
                tracing::debug!("closed a connection idle for {idle_timeout:?}");
                return;
            }
            Either::Side(Watchdog::Stopping) => {
                conn.as_mut().graceful_shutdown();
                watchdog.set(self::watchdog(&activity, idle_timeout, &stop, true));
            }
        }
    };
    if let Err(e) = served {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

enum Watchdog {
    Expired,
    Stopping,
}

/// Resolves when the connection has idled too long or, until `stopping`, the server stops.
async fn watchdog(
    activity: &Activity,
    idle_timeout: Duration,
    stop: &watch::Sender<()>,
    stopping: bool,
) -> Watchdog {
    if stopping {
        activity.expired(idle_timeout).await;
        return Watchdog::Expired;
    }
    tokio::select! {
        () = activity.expired(idle_timeout) => Watchdog::Expired,
        () = stop.closed() => Watchdog::Stopping,
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
