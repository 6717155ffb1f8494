//! Operator records: providers, tokens, settings, tenant policies, idempotency keys.

pub(in crate::store) mod audit;
pub(in crate::store) mod idempotency;
pub(in crate::store) mod providers;
pub(in crate::store) mod settings;
pub(in crate::store) mod tenant_policies;
pub(in crate::store) mod tokens;
