//! The idle cut-off of a connection: one that sends no complete request head for the idle
//! timeout is closed, whether it is silent, trickles a head, or idles between requests.
//!
//! Instead of a timer armed and cancelled for every request head (hyper's
//! `header_read_timeout`), each connection keeps when it last became idle, and one watchdog
//! per connection wakes only when that could have run out. A request marks the connection
//! busy from its head until its response body is dropped (written out, or the connection
//! gone), so a long-poll or a live-event stream is never cut off while it is answered.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Instant;

/// When one connection was last busy.
#[derive(Debug)]
pub struct Activity {
    opened: Instant,
    /// Requests being answered (one at a time on HTTP/1, kept as a count all the same).
    busy: AtomicU32,
    /// Microseconds from `opened` to when the last answer ended.
    idle_since: AtomicU64,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            opened: Instant::now(),
            busy: AtomicU32::new(0),
            idle_since: AtomicU64::new(0),
        })
    }

    /// Marks the connection busy until the returned guard is dropped.
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// When the connection became idle, or `None` while a request is answered.
    fn idle_since(&self) -> Option<Instant> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let micros = self.idle_since.load(Ordering::Acquire);
        Some(self.opened + Duration::from_micros(micros))
    }

    /// Resolves once the connection has been idle for `timeout`.
    pub async fn expired(&self, timeout: Duration) {
        let mut due = self.opened + timeout;
        loop {
            tokio::time::sleep_until(due).await;
            let now = Instant::now();
            match self.idle_since() {
                Some(since) if since + timeout <= now => return,
                Some(since) => due = since + timeout,
                // Busy: the answer's end re-arms nothing, so look again a timeout later.
                None => due = now + timeout,
            }
        }
    }
}

/// A request being answered; dropping it makes the connection idle from that moment.
#[derive(Debug)]
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let a = &self.0;
        let micros = a.opened.elapsed().as_micros();
        a.idle_since
            .store(u64::try_from(micros).unwrap_or(u64::MAX), Ordering::Release);
        a.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its connection busy until it is dropped.
pub struct Tracked<B> {
    inner: B,
    _busy: Busy,
}

impl<B> Tracked<B> {
    pub fn new(inner: B, busy: Busy) -> Self {
        Self { inner, _busy: busy }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_expires_a_timeout_after_its_last_answer() {
        let activity = Activity::new();
        let timeout = Duration::from_secs(10);
        let expired = activity.expired(timeout);
        tokio::pin!(expired);
        tokio::time::advance(Duration::from_secs(4)).await;
        let busy = activity.busy();
        // Busy past the first deadline: not expired.
        tokio::time::advance(Duration::from_secs(8)).await;
        assert!(futures::poll!(expired.as_mut()).is_pending());
        drop(busy);
        let ended = Instant::now();
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(futures::poll!(expired.as_mut()).is_pending());
        expired.await;
        assert_eq!(Instant::now().duration_since(ended), timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_sends_expires_a_timeout_after_it_opened() {
        let activity = Activity::new();
        let opened = Instant::now();
        activity.expired(Duration::from_secs(3)).await;
        assert_eq!(opened.elapsed(), Duration::from_secs(3));
    }
}
