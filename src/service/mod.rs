//! Use cases that are more than one store call: long-polls, token rules, shared caches.

pub mod audit;
pub mod claims;
pub mod event_stream;
pub mod grants;
pub mod inbox;
pub mod providers;
pub mod runs;
pub mod shutdown;
pub mod snapshot;
pub mod stream_limits;
pub mod token_cache;
pub mod tokens;
