//! The history of confirmed releases: one row each, written with the record's move to
//! `released`, so latency and attempts cover every release, restored runs' too.

use crate::clock::to_millis;
use crate::domain::decide::resources::ReleaseTaken;
use crate::store::engine::params::value_rows;
use crate::store::engine::tx::WriteTx;
use crate::store::engine::{Store, StoreResult};

/// Columns bound per release row.
const RELEASE_COLS: usize = 5;

impl Store {
    /// Appends each `(run, record version, what it took)` to the release history.
    pub(in crate::store) async fn record_releases(
        &self,
        tx: &mut WriteTx,
        confirmed: &[(&str, i64, ReleaseTaken)],
    ) -> StoreResult<()> {
        if confirmed.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "INSERT INTO resource_releases (run_id, version, released_at, latency_ms, attempts) \
             VALUES {}",
            value_rows(1, confirmed.len(), RELEASE_COLS)
        );
        let mut insert = sqlx::query(&sql);
        for (run_id, version, taken) in confirmed {
            insert = insert
                .bind(*run_id)
                .bind(*version)
                .bind(to_millis(taken.released_at))
                .bind(taken.latency_ms)
                .bind(taken.attempts);
        }
        insert.execute(tx.conn()).await?;
        Ok(())
    }
}
