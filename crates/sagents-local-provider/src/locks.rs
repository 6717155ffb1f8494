//! Locks by name: holders of one name wait for each other, holders of other names do not (a
//! restore of one run never waits on another run's archive being unpacked).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use tokio::sync::{Mutex, OwnedMutexGuard};

#[derive(Default)]
pub struct NamedLocks {
    held: std::sync::Mutex<HashMap<String, Weak<Mutex<()>>>>,
}

impl NamedLocks {
    pub async fn lock(&self, name: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.retain(|_, l| l.strong_count() > 0);
            match held.get(name).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(Mutex::new(()));
                    held.insert(name.to_owned(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_name_waits_and_another_does_not() {
        let locks = Arc::new(NamedLocks::default());
        let held = locks.lock("a").await;
        let other = tokio::time::timeout(Duration::from_secs(5), locks.lock("b")).await;
        assert!(other.is_ok(), "another name is not held up");
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { locks.lock("a").await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the same name waits");
        drop(held);
        let _again = waiter.await.unwrap();
        drop(other);
        assert!(locks.held.lock().unwrap().len() <= 2);
    }
}
