//! A connection's watchdog beside its connection, polled only when the watchdog's own waker
//! fired.
//!
//! `select!` polls every branch each time the task wakes: a busy connection, woken for each
//! request, would poll its idle timer and the shutdown signal on every request too.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// Which of the two finished first.
pub enum Either<M, S> {
    Main(M),
    Side(S),
}

/// Polls `main` on each wake-up of the task and `side` on its first poll and after its own
/// wake-ups only.
pub struct Beside<'a, M, S> {
    main: Pin<&'a mut M>,
    side: Pin<&'a mut S>,
    signal: Arc<Signal>,
}

pub fn beside<'a, M: Future, S: Future>(
    main: Pin<&'a mut M>,
    side: Pin<&'a mut S>,
) -> Beside<'a, M, S> {
    Beside {
        main,
        side,
        signal: Arc::new(Signal {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        }),
    }
}

struct Signal {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<M: Future, S: Future> Future for Beside<'_, M, S> {
    type Output = Either<M::Output, S::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.signal.task.register(cx.waker());
        if this.signal.woken.swap(false, Ordering::AcqRel) {
            let waker = Waker::from(this.signal.clone());
            if let Poll::Ready(out) = this.side.as_mut().poll(&mut Context::from_waker(&waker)) {
                return Poll::Ready(Either::Side(out));
            }
        }
        this.main.as_mut().poll(cx).map(Either::Main)
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// `inner`, counting its polls.
    struct Counted<F> {
        polls: Arc<AtomicUsize>,
        inner: Pin<Box<F>>,
    }

    impl<F: Future> Future for Counted<F> {
        type Output = F::Output;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.inner.as_mut().poll(cx)
        }
    }

    fn counted<F: Future>(inner: F) -> (Counted<F>, Arc<AtomicUsize>) {
        let polls = Arc::new(AtomicUsize::new(0));
        let counted = Counted {
            polls: polls.clone(),
            inner: Box::pin(inner),
        };
        (counted, polls)
    }

    #[tokio::test]
    async fn the_side_is_not_polled_when_only_the_main_future_woke() {
        let main = pin!(async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            "main"
        });
        let (side, polls) = counted(std::future::pending::<()>());
        let side = pin!(side);
        let Either::Main(out) = beside(main, side).await else {
            panic!("the side never finishes");
        };
        assert_eq!(out, "main");
        assert_eq!(polls.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn the_side_finishes_first_when_its_waker_fires() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let (side, polls) = counted(rx);
        let (main, side) = (pin!(std::future::pending::<()>()), pin!(side));
        tokio::spawn(async move { tx.send(7) });
        let Either::Side(Ok(7)) = beside(main, side).await else {
            panic!("the side should have finished with 7");
        };
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }
}
