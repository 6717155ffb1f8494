use super::{Store, StoreResult};
use crate::domain::commands::CreateSession;
use crate::domain::session::Session;
use crate::domain::snapshot::Snapshot;
use crate::domain::SessionId;

impl Store {
    /// Creates a session at revision 1. A `parent_session_id` must name a session of the
    /// same tenant (`Invalid` on `parent_session_id` otherwise).
    pub async fn create_session(&self, tenant: &str, cmd: &CreateSession) -> StoreResult<Session> {
        todo!()
    }

    /// `tenant: None` means an admin caller that sees every tenant.
    pub async fn get_session(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<Session> {
        todo!()
    }

    /// The current revision only: the cheap path behind `304 Not Modified`.
    pub async fn session_revision(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<i64> {
        todo!()
    }

    /// The snapshot, read in one consistent read transaction. Runs are ordered by
    /// creation, pending interactions by request time then id.
    pub async fn snapshot(&self, tenant: Option<&str>, id: &SessionId) -> StoreResult<Snapshot> {
        todo!()
    }
}
