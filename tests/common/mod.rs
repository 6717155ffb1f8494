//! Shared test harness: throwaway databases and a spawned app per test.
#![allow(dead_code)]

pub mod app;
pub mod db;
pub mod own_pg;
pub mod pg;
pub mod proxy;

/// `on_both_backends!(a, b)` runs `async fn a(backend: Backend)` once per backend, as
/// `<suite>::<file>::sqlite::a` and `<suite>::<file>::postgres::a`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(sagents::store::Backend::Sqlite).await
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(sagents::store::Backend::Postgres).await
                }
            )+
        }
    };
}
