//! One Store API over SQLite and PostgreSQL.
//!
//! Every use case is one method and one transaction. Both backends run the same SQL through
//! sqlx's `Any` driver (`$n` placeholders, BIGINT epoch-millisecond timestamps, JSON as TEXT);
//! the few dialect differences (claiming, the fencing-token source, notifications,
//! transaction start) live in `engine/dialect.rs`.
//!
//! Each aggregate has its folder (`sessions`, `runs`, `interactions`, `resources`, `claims`,
//! `admin`) with its `impl Store` methods; all of them write through `engine` (transactions,
//! the group commit, row decoding, the row types), which imports no aggregate.

mod admin;
mod claims;
mod engine;
mod interactions;
mod resources;
mod runs;
mod sessions;

pub use admin::audit::MAX_AUDIT_PAGE;
pub use admin::idempotency::{stored_answer, IdempotencyBegin, IdempotencyClaim};
pub use admin::tokens::TokenReplay;
pub use claims::runtime::LeaseRenewal;
pub use engine::error::{StoreError, StoreResult};
pub use engine::handle::{Backend, Store};
pub use engine::records::{ProviderRecord, ReplyOutcome, ResourceEvent, SessionEvent};
pub use resources::attention::AttentionItem;
pub use resources::reconcile::RunView;
pub use sessions::inbox::{BadCursor, InboxCursor, InboxItem};
