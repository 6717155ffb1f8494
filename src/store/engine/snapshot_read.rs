//! The snapshot read: three statements and no transaction, checked by the session's revision.

use sqlx::AnyConnection;

use super::error::StoreResult;
use super::rows::{self, INTERACTION_COLS};
use super::visible::find_session;
use crate::domain::session::Session;
use crate::domain::snapshot::{PendingInteraction, Snapshot, SnapshotRun};

/// A snapshot and the tenant that owns it.
pub(in crate::store) struct OwnedSnapshot {
    pub snapshot: Snapshot,
    pub tenant_id: String,
}

/// The snapshot in three statements: the session, its runs, then its pending interactions
/// with its revision again. Every visible change raises the revision in the same
/// transaction, so an unchanged revision means no change landed between the first statement
/// and the last; `None` if one did.
pub(in crate::store) async fn read_snapshot(
    conn: &mut AnyConnection,
    tenant: Option<&str>,
    id: &str,
) -> StoreResult<Option<OwnedSnapshot>> {
    let session = find_session(conn, tenant, id).await?;
    let runs = runs(conn, id).await?;
    let pending = pending_interactions(conn, id).await?;
    Ok(combine(session, runs, pending))
}

async fn runs(conn: &mut AnyConnection, id: &str) -> StoreResult<Vec<SnapshotRun>> {
    sqlx::query(
        "SELECT r.id, r.parent_run_id, r.state, r.created_at, r.updated_at FROM runs r \
         WHERE r.session_id = $1 ORDER BY r.created_at, r.id",
    )
    .bind(id)
    .fetch_all(conn)
    .await?
    .iter()
    .map(rows::snapshot_run)
    .collect()
}

/// The session's revision and its pending interactions; `None` if the session is gone.
async fn pending_interactions(
    conn: &mut AnyConnection,
    id: &str,
) -> StoreResult<Option<(i64, Vec<PendingInteraction>)>> {
    let sql = format!(
        "SELECT s.revision AS session_revision, {INTERACTION_COLS} FROM sessions s \
         LEFT JOIN interactions i ON i.session_id = s.id AND i.status = 'pending' \
         WHERE s.id = $1 ORDER BY i.requested_at, i.id"
    );
    let found = sqlx::query(&sql).bind(id).fetch_all(conn).await?;
    let Some(first) = found.first() else {
        return Ok(None);
    };
    let revision = rows::int(first, "session_revision")?;
    let mut pending = Vec::with_capacity(found.len());
    for row in &found {
        if rows::opt_text(row, "id")?.is_some() {
            pending.push(rows::pending_interaction(row)?);
        }
    }
    Ok(Some((revision, pending)))
}

fn combine(
    session: Session,
    runs: Vec<SnapshotRun>,
    pending: Option<(i64, Vec<PendingInteraction>)>,
) -> Option<OwnedSnapshot> {
    let (revision, pending_interactions) = pending?;
    if revision != session.revision {
        return None;
    }
    let tenant_id = session.tenant_id.clone();
    Some(OwnedSnapshot {
        snapshot: Snapshot {
            session: rows::snapshot_session(session),
            runs,
            pending_interactions,
        },
        tenant_id,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::domain::commands::{CreateRun, CreateSession};
    use crate::metrics::Metrics;
    use crate::notify::ChangeHub;
    use crate::store::engine::{Store, StoreError};

    fn new_run() -> CreateRun {
        CreateRun {
            parent_run_id: None,
            sandbox_spec: None,
            resolved_spec_hash: format!("sha256:{}", "a".repeat(64)),
            input: json!({}),
        }
    }

    #[tokio::test]
    async fn a_write_during_the_read_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let hub = ChangeHub::new();
        let clock = Arc::new(crate::clock::SystemClock);
        let store = Store::connect(&url, clock, hub, Arc::new(Metrics::default()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let session = store
            .create_session(
                "acme",
                &CreateSession {
                    title: None,
                    metadata: json!({}),
                    parent_session_id: None,
                },
            )
            .await
            .unwrap();
        store
            .create_run("acme", &session.id, &new_run())
            .await
            .unwrap();
        let id = session.id.as_str();
        let mut conn = store.inner.read.acquire().await.unwrap();

        let before = find_session(&mut conn, Some("acme"), id).await.unwrap();
        let runs = runs(&mut conn, id).await.unwrap();
        store
            .create_run("acme", &session.id, &new_run())
            .await
            .unwrap();
        let after = pending_interactions(&mut conn, id).await.unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(after.as_ref().map(|a| a.0), Some(before.revision + 1));
        assert!(
            combine(before, runs, after).is_none(),
            "a read that straddles a write is refused"
        );

        let read = read_snapshot(&mut conn, Some("acme"), id)
            .await
            .unwrap()
            .expect("nothing was written during this read");
        assert_eq!(read.snapshot.runs.len(), 2);
        assert_eq!(read.tenant_id, "acme");
        assert!(matches!(
            read_snapshot(&mut conn, Some("globex"), id).await,
            Err(StoreError::NotFound("session"))
        ));
        drop(conn);
        store.close().await;
    }
}
