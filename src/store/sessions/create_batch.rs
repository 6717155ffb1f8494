//! Sessions created in groups: each checked on its own, all inserted in one statement.

use std::collections::HashMap;

use serde_json::json;

use crate::clock::to_millis;
use crate::domain::commands::CreateSession;
use crate::domain::decide::create;
use crate::domain::session::Session;
use crate::domain::SessionId;
use crate::store::admin::idempotency::IdempotencyClaim;
use crate::store::engine::group::{Answers, GroupedWrite};
use crate::store::engine::params::{pairs, params};
use crate::store::engine::tx::WriteTx;
use crate::store::engine::visible::sees;
use crate::store::engine::{rows, Store, StoreResult};

/// One queued session creation, with the id it will get.
#[derive(Debug)]
pub(in crate::store) struct SessionItem {
    pub id: SessionId,
    pub tenant: String,
    pub cmd: CreateSession,
    /// The `Idempotency-Key` the request runs under, if any.
    pub key: Option<IdempotencyClaim>,
}

/// The status a creation answers with.
pub(in crate::store) const CREATED: u16 = 201;

/// Columns bound per inserted session.
const SESSION_PARAMS: usize = 5;

impl GroupedWrite for SessionItem {
    type Answer = Session;
    const ORDER: u8 = 1;
    const TRANSACTION: u8 = 0;

    fn key(&self) -> &str {
        self.id.as_str()
    }

    async fn write_batch<'a>(
        store: &'a Store,
        tx: &'a mut WriteTx,
        items: &'a [&'a Self],
    ) -> StoreResult<Answers<Session>> {
        let answers = store.create_sessions_in(tx, items).await?;
        Ok(answers.into_iter().map(Some).collect())
    }
}

impl Store {
    /// The sessions of `items` in `tx`: each one's answer, in order.
    pub(in crate::store) async fn create_sessions_in(
        &self,
        tx: &mut WriteTx,
        items: &[&SessionItem],
    ) -> StoreResult<Vec<StoreResult<Session>>> {
        let parents = self.session_owners(tx, items).await?;
        let mut answers = Vec::with_capacity(items.len());
        let mut created = Vec::new();
        for item in items {
            let parent_seen = item.cmd.parent_session_id.as_ref().is_none_or(|p| {
                parents
                    .get(p.as_str())
                    .is_some_and(|found| sees(Some(&item.tenant), &found.tenant))
            });
            if let Err(refusal) = create::session(&item.cmd, parent_seen) {
                answers.push(Err(refusal.into()));
                continue;
            }
            let session = Session {
                id: item.id.clone(),
                tenant_id: item.tenant.clone(),
                title: item.cmd.title.clone(),
                metadata: item.cmd.metadata.clone(),
                parent_session_id: item.cmd.parent_session_id.clone(),
                revision: 1,
                created_at: tx.now,
                updated_at: tx.now,
            };
            created.push(session.clone());
            answers.push(Ok(session));
        }
        if created.is_empty() {
            return Ok(answers);
        }
        let sql = format!(
            "INSERT INTO sessions (id, tenant_id, title, metadata, parent_session_id, revision, \
             event_seq, created_at, updated_at) VALUES {}",
            (0..created.len())
                .map(|r| format!("({}, 1, 0, $1, $1)", params(2 + r * SESSION_PARAMS, 5)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut insert = sqlx::query(&sql).bind(to_millis(tx.now));
        for s in &created {
            insert = insert
                .bind(s.id.as_str())
                .bind(s.tenant_id.as_str())
                .bind(s.title.as_deref())
                .bind(rows::to_json(&s.metadata)?)
                .bind(s.parent_session_id.as_ref().map(|p| p.as_str()));
        }
        insert.execute(tx.conn()).await?;
        for s in &created {
            tx.event(
                s.id.as_str(),
                "session.created",
                json!({ "session_id": s.id }),
            );
        }
        let keyed: Vec<(&IdempotencyClaim, &Session)> = items
            .iter()
            .zip(&answers)
            .filter_map(|(item, answer)| Some((item.key.as_ref()?, answer.as_ref().ok()?)))
            .collect();
        self.idempotency_answer_in(tx, CREATED, &keyed).await?;
        Ok(answers)
    }

    /// Every parent session the items name that exists, by id.
    async fn session_owners(
        &self,
        tx: &mut WriteTx,
        items: &[&SessionItem],
    ) -> StoreResult<HashMap<String, Owned>> {
        let mut ids: Vec<&str> = items
            .iter()
            .filter_map(|i| i.cmd.parent_session_id.as_ref().map(SessionId::as_str))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        owners_of(tx, &ids).await
    }
}

/// A session's tenant and its own parent session.
#[derive(Debug, Clone)]
pub(in crate::store) struct Owned {
    pub tenant: String,
    pub parent: Option<SessionId>,
}

/// The tenant and parent of each session among `ids` that exists, by id.
pub(in crate::store) async fn owners_of(
    tx: &mut WriteTx,
    ids: &[&str],
) -> StoreResult<HashMap<String, Owned>> {
    let sql = format!(
        "SELECT id, tenant_id, parent_session_id FROM sessions WHERE id IN ({})",
        params(1, ids.len())
    );
    pairs(tx.conn(), &sql, ids, |row| {
        let owned = Owned {
            tenant: rows::text(row, "tenant_id")?,
            parent: rows::opt_text(row, "parent_session_id")?.map(SessionId::from_trusted),
        };
        Ok((rows::text(row, "id")?, owned))
    })
    .await
}
