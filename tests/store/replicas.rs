//! PostgreSQL only: replicas learn about each other's commits through LISTEN/NOTIFY.

mod postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use sagents::clock::SystemClock;
    use sagents::metrics::Metrics;
    use sagents::notify::{self, ChangeHub};
    use sagents::store::{Backend, Store};
    use tokio::sync::watch;

    use crate::common::db;
    use crate::store::run_cmd;

    /// A safety net only: each wait ends as soon as the notification arrives.
    const LIMIT: Duration = Duration::from_secs(10);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_on_one_replica_wakes_the_others() {
        let (url, _db) = db::fresh_url(Backend::Postgres).await;
        let a = Store::connect(
            &url,
            Arc::new(SystemClock),
            ChangeHub::new(),
            Arc::new(Metrics::default()),
        )
        .await
        .unwrap();
        let hub_b = ChangeHub::new();
        let mut work_b = hub_b.subscribe_work();
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::spawn(notify::run_pg_listener(url, hub_b.clone(), stopped));
        // The listener resyncs its waiters once it is listening.
        tokio::time::timeout(LIMIT, work_b.changed())
            .await
            .expect("the listener connects")
            .unwrap();
        work_b.borrow_and_update();

        let session = a
            .create_session("acme", &serde_json::from_str("{}").unwrap())
            .await
            .unwrap();
        let mut watch_b = hub_b.subscribe_session(session.id.as_str());
        a.create_run("acme", &session.id, &run_cmd(None))
            .await
            .unwrap();
        assert!(
            watch_b.changed(LIMIT).await,
            "the other replica hears of the new revision"
        );
        tokio::time::timeout(LIMIT, work_b.changed())
            .await
            .expect("the other replica hears of the new work")
            .unwrap();

        stop.send(true).unwrap();
        listener.await.unwrap();
        a.close().await;
    }
}
