//! One shutdown signal shared by the server, long-polls and background tasks.

use std::sync::Arc;

use tokio::sync::watch;

/// Fires the shutdown; cheap to clone, idempotent.
#[derive(Debug, Clone)]
pub struct ShutdownTrigger(Arc<watch::Sender<bool>>);

/// Observes the shutdown.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(Arc::new(tx)), Shutdown(rx))
}

impl ShutdownTrigger {
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    pub fn subscribe(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once shutdown has been triggered (or every trigger is gone).
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|stopping| *stopping).await;
    }

    pub fn receiver(&self) -> watch::Receiver<bool> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waiters_wake_on_trigger() {
        let (trigger, shutdown) = channel();
        assert!(!shutdown.is_triggered());
        let waiter = tokio::spawn({
            let s = shutdown.clone();
            async move { s.wait().await }
        });
        trigger.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(shutdown.is_triggered());
    }
}
