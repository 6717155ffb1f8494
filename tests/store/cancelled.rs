//! PostgreSQL only: a caller dropped while its transaction begins (its client gone, a
//! timeout) hands back no connection with a transaction open. Such a connection made every
//! later user of it fail, for as long as it lived.

mod postgres {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use sagents::clock::SystemClock;
    use sagents::domain::RunId;
    use sagents::metrics::Metrics;
    use sagents::notify::ChangeHub;
    use sagents::store::{Backend, Store, StoreError};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::watch;

    use crate::common::db;

    /// A safety net only: each wait ends as soon as its condition holds.
    const LIMIT: Duration = Duration::from_secs(10);

    /// A TCP proxy to PostgreSQL that, once a client has sent a `BEGIN`, holds every answer
    /// of the server until `open` is set.
    struct Proxy {
        port: u16,
        begun: watch::Receiver<bool>,
        open: watch::Sender<bool>,
    }

    impl Proxy {
        async fn start(upstream: String) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (begun_tx, begun) = watch::channel(false);
            let (open, open_rx) = watch::channel(false);
            let begun_tx = Arc::new(begun_tx);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let server = TcpStream::connect(&upstream).await.unwrap();
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let seen = begun_tx.clone();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = cr.read(&mut buf).await {
                            if sw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                            if buf[..n].windows(5).any(|w| w == b"BEGIN") {
                                seen.send_replace(true);
                            }
                        }
                    });
                    let (seen, mut open) = (begun_tx.subscribe(), open_rx.clone());
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n @ 1..) = sr.read(&mut buf).await {
                            if *seen.borrow() {
                                let _ = open.wait_for(|o| *o).await;
                            }
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            Proxy { port, begun, open }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_dropped_while_its_transaction_begins_leaves_no_transaction_open() {
        let (url, _db) = db::fresh_url(Backend::Postgres).await;
        let mut via = url::Url::parse(&url).unwrap();
        let upstream = format!("{}:{}", via.host_str().unwrap(), via.port().unwrap());
        let mut proxy = Proxy::start(upstream).await;
        via.set_port(Some(proxy.port)).unwrap();
        let store = Store::connect(
            via.as_str(),
            Arc::new(SystemClock),
            ChangeHub::new(),
            Arc::new(Metrics::default()),
        )
        .await
        .unwrap();

        let read = tokio::spawn({
            let store = store.clone();
            async move { store.list_jobs(Some("acme"), &RunId::new()).await }
        });
        tokio::time::timeout(LIMIT, proxy.begun.wait_for(|b| *b))
            .await
            .expect("the read begins its transaction")
            .unwrap();
        read.abort();
        assert!(read.await.unwrap_err().is_cancelled());
        proxy.open.send_replace(true);

        let direct = sqlx::PgPool::connect(&url).await.unwrap();
        let deadline = Instant::now() + LIMIT;
        loop {
            let open: Vec<String> = sqlx::query_scalar(
                "SELECT state FROM pg_stat_activity WHERE datname = current_database() \
                 AND pid <> pg_backend_pid() AND state <> 'idle'",
            )
            .fetch_all(&direct)
            .await
            .unwrap();
            if open.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a connection was handed back with its transaction open: {open:?}"
            );
            tokio::task::yield_now().await;
        }
        let after = store.list_jobs(Some("acme"), &RunId::new()).await;
        assert!(
            matches!(after, Err(StoreError::NotFound(_))),
            "the next read runs as usual: {after:?}"
        );
    }
}
