//! The transport: connections, the envelope every request goes through, the snapshot hot
//! path and the layers around the router. tower-http does CORS ([`cors`]), the request
//! timeout of requests that change something ([`deadline`]), sensitive headers and compression ([`stack`]). What is written
//! here instead, and why; every figure is in `docs/BENCHMARKS.md`, under the benchmark
//! named:
//!
//! - **Connections** ([`serve`], not `axum::serve`): hyper's HTTP/1 builder per connection
//!   under a connection cap (`SAGENTS_MAX_CONNECTIONS`), with graceful shutdown. `axum::serve`
//!   has no connection cap and uses the auto HTTP/1-or-2 builder, which grows every read
//!   buffer to 16 KiB: 24.2 → 15.6 KB per waiting long-poll with this and the envelope
//!   (`scripts/bench-http`, the 10,000 concurrent snapshot long-polls).
//! - **The idle cut-off** ([`idle`], not hyper's `header_read_timeout` nor tower-http's
//!   `TimeoutLayer`): one watchdog per connection instead of a timer armed and cancelled on
//!   the shared wheel for every request head; a per-request timer cannot tell a long-poll
//!   from an idle keep-alive either (`scripts/bench-http`, snapshot `304` and `200`).
//! - **The watchdog beside the connection** ([`side`], not `select!`): `select!` polls the
//!   idle timer and the shutdown signal each time a request wakes the connection; here they
//!   are polled only when their own waker fired (`scripts/bench-http`, snapshot `304`).
//! - **The envelope** ([`envelope`], not tower-http's `TraceLayer`, `CatchPanicLayer` and
//!   `middleware::from_fn`): request id, panic → `500` problem, problem bodies, metrics and
//!   the one request line, in one hand-written future that holds the inner future in place.
//!   A span per request and the `tracing` dispatch of the line cost about 17 % of a `304`'s
//!   CPU, and `from_fn`'s boxed `async` state kept copies of the request in every waiting
//!   long-poll (`scripts/bench-http`, snapshot `304`, and the long-polls' memory).
//! - **The hot path** ([`hot_path`], beside axum's router): the snapshot read, which every
//!   open frontend polls, is matched by hand; routing (matching, decoding, the matched path,
//!   the route clone) was a tenth of a `304`'s CPU: 1.14× the `304` throughput
//!   (`scripts/bench-http`, snapshot `304`). It goes
//!   through the same envelope, CORS and timeout as the router's routes, and
//!   `tests/api/hot_path.rs` asks every case both ways.
//! - **Request ids** ([`request_id`], not tower-http's `SetRequestIdLayer` /
//!   `PropagateRequestIdLayer`): a per-process random prefix and a counter instead of a UUID
//!   that reads the kernel's random source on every request (3.1 % of a `304`,
//!   `scripts/bench-http`); `MakeRequestUuid` plus the two layers cost about 4 µs a request
//!   against 0.4 µs here in a micro-measurement, and the envelope needs the id as its own
//!   value for the log context and problem bodies anyway.
//! - **Strict JSON** ([`strict`]): not a performance piece and nothing tower-http offers:
//!   serde's derived structs also accept an array of their fields and refuse `3.0` for an
//!   integer; the API takes objects only and JSON Schema integers.
//! - **Problem bodies** ([`layers`]): framework errors (`405`, `413`, a timed-out request)
//!   and panics answered in the API's problem shape.

pub mod cors;
pub mod deadline;
pub mod envelope;
pub mod hot_path;
pub mod idle;
pub mod layers;
pub mod request_id;
pub mod serve;
pub mod side;
pub mod stack;
pub mod strict;
