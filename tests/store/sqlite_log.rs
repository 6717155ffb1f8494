//! SQLite's writer leaves the write-ahead log to grow to `WRITER_CHECKPOINT_PAGES` before it
//! copies it into the database file: a checkpoint syncs both to disk and stalls the writes
//! queued behind it, so it runs a quarter as often as SQLite's default (1,000 pages).

use std::sync::Arc;

use sagents::clock::SystemClock;
use sagents::domain::commands::CreateSession;
use sagents::metrics::Metrics;
use sagents::notify::ChangeHub;
use sagents::store::{Backend, Store, WRITER_CHECKPOINT_PAGES};
use serde_json::json;

use crate::common::db;

/// A log frame: its header and one 4 KiB page.
const FRAME_BYTES: u64 = 24 + 4096;

#[tokio::test]
async fn the_writer_checkpoints_only_after_its_page_count() {
    let (url, _db) = db::fresh_url(Backend::Sqlite).await;
    let file = std::path::PathBuf::from(url.trim_start_matches("sqlite://"));
    let wal = file.with_extension("db-wal");
    let store = Store::connect(
        &url,
        Arc::new(SystemClock),
        ChangeHub::new(),
        Arc::new(Metrics::default()),
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let size = |path: &std::path::Path| std::fs::metadata(path).map_or(0, |m| m.len());
    let file_before = size(&file);
    let session = CreateSession {
        title: Some("a page of its own".into()),
        metadata: json!({ "padding": "x".repeat(3_000) }),
        parent_session_id: None,
    };
    // Past SQLite's default threshold, short of ours: nothing is copied into the file yet.
    let default_threshold = 1_000 * FRAME_BYTES;
    while size(&wal) < default_threshold + 200 * FRAME_BYTES && size(&file) == file_before {
        store.create_session("acme", &session).await.unwrap();
    }
    assert_eq!(size(&file), file_before, "the log was checkpointed early");
    // Past ours: the writer's next commit copies the log into the file.
    let threshold = u64::from(WRITER_CHECKPOINT_PAGES) * FRAME_BYTES;
    let mut sessions = 0;
    while size(&file) == file_before {
        store.create_session("acme", &session).await.unwrap();
        sessions += 1;
        assert!(
            size(&wal) < threshold + 400 * FRAME_BYTES,
            "no checkpoint after {sessions} more sessions"
        );
    }
    store.close().await;
}
