//! The architecture's hard rules, read from the source: imports point down the layers that
//! `ARCHITECTURE.md` names, `sqlx` stays in the store, wire types stay where the doc lets
//! them, and no file of `src/store` imports a file that imports it back. Every import is
//! read: `crate::`, `self::` and `super::` paths, grouped and nested `use` trees.
#![allow(clippy::unwrap_used, reason = "a test stops at the first surprise")]

#[path = "layers/circles.rs"]
mod circles;
#[path = "layers/source.rs"]
mod source;

use std::path::Path;

use source::{Named, Source, Target};

/// Bottom to top; a module may use its own layer and every layer below it.
const LAYERS: &[&[&str]] = &[
    &["domain", "typed_id"],
    &[
        "clock",
        "config",
        "metrics",
        "notify",
        "snapshot_cache",
        "telemetry",
    ],
    &["store"],
    &["providers"],
    &["service"],
    &["lifecycle"],
    &["scheduler"],
    &["http"],
    &["app"],
];

/// Where `sqlx` may be named: the store, and the listener (`notify::run_pg_listener`).
const SQLX_HOMES: &[&str] = &["store/", "notify.rs"];

/// Where the plugin API's wire types may be named (`ARCHITECTURE.md`, "Crates"): the
/// `providers` module, provider registration (capabilities) and the lifecycle.
const WIRE_HOMES: &[&str] = &["providers/", "service/providers.rs", "lifecycle/"];

/// A use outside its homes that is allowed by name: (file or folder, the path, why).
type Exception = (&'static str, &'static str, &'static str);

const SQLX_EXCEPTIONS: &[Exception] = &[(
    "http/",
    "sqlx::Error::PoolClosed",
    "a unit test builds `StoreError::Database` to check that it maps to a 500",
)];

const WIRE_EXCEPTIONS: &[Exception] = &[(
    "service/runs.rs",
    "crate::providers::wire::Capabilities",
    "run creation checks the spec against the capabilities the provider advertised",
)];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn real_source() -> Source {
    Source::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// `file:line: path` for a report.
fn at(file: &str, n: &Named) -> String {
    format!("{file}:{}: {}", n.line, n.path.join("::"))
}

fn excepted(exceptions: &[Exception], file: &str, n: &Named) -> bool {
    let path = n.path.join("::");
    exceptions
        .iter()
        .any(|(place, p, _)| file.starts_with(place) && path == *p)
}

/// Every import from a lower layer to a higher one.
fn upward_imports(src: &Source) -> Vec<String> {
    let mut upward = vec![];
    for file in src.files.keys() {
        let Some(module) = src.modules[file].first() else {
            continue; // the crate roots
        };
        if file == "main.rs" || file.starts_with("bin/") {
            continue;
        }
        let from = layer_of(module)
            .unwrap_or_else(|| panic!("module `{module}` is in no layer: add it to LAYERS"));
        for n in src.named(file) {
            let Target::Crate(path) = src.resolve(&n) else {
                continue;
            };
            let Some(target) = path.first().filter(|t| *t != "*") else {
                continue;
            };
            let to = layer_of(target)
                .unwrap_or_else(|| panic!("`crate::{target}` ({}) is in no layer", at(file, &n)));
            if to > from {
                upward.push(format!("{}: {module} -> {target}", at(file, &n)));
            }
        }
    }
    upward
}

/// Every path to `sqlx` outside its homes.
fn sqlx_outside_the_store(src: &Source) -> Vec<String> {
    let mut found = vec![];
    for file in src.files.keys() {
        if SQLX_HOMES.iter().any(|h| file.starts_with(h)) {
            continue;
        }
        for n in src.named(file) {
            if n.path[0] == "sqlx" && !excepted(SQLX_EXCEPTIONS, file, &n) {
                found.push(at(file, &n));
            }
        }
    }
    found
}

/// Whether a path names the plugin API's wire types or wire spec.
fn names_wire(path: &[String]) -> bool {
    let wire = |s: &String| matches!(s.as_str(), "wire" | "wire_spec");
    path.windows(2).any(|w| w[0] == "providers" && wire(&w[1]))
        || (path.len() > 1
            && path[0] == "sagents_plugin_api"
            && matches!(path[1].as_str(), "wire" | "spec"))
}

/// Every path to a wire type outside its homes.
fn wire_outside_its_homes(src: &Source) -> Vec<String> {
    let mut found = vec![];
    for file in src.files.keys() {
        if WIRE_HOMES.iter().any(|h| file.starts_with(h)) {
            continue;
        }
        for n in src.named(file) {
            let resolved = match src.resolve(&n) {
                Target::Crate(p) => [vec!["crate".to_string()], p].concat(),
                Target::Extern(p) => p,
            };
            let wire = names_wire(&n.path) || names_wire(&resolved);
            if wire && !excepted(WIRE_EXCEPTIONS, file, &n) {
                found.push(at(file, &n));
            }
        }
    }
    found
}

fn synthetic(files: &[(&str, &str)]) -> Source {
    Source::new(files.iter().map(|(f, t)| (f.to_string(), t.to_string())))
}

#[test]
fn imports_point_down_the_layers() {
    let upward = upward_imports(&real_source());
    assert!(
        upward.is_empty(),
        "imports that point up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn sqlx_stays_in_the_store() {
    let found = sqlx_outside_the_store(&real_source());
    assert!(
        found.is_empty(),
        "`sqlx` outside `src/store/` and the listener (keep SQL in the store):\n{}",
        found.join("\n")
    );
}

#[test]
fn wire_types_stay_where_the_architecture_says() {
    let found = wire_outside_its_homes(&real_source());
    assert!(
        found.is_empty(),
        "wire types outside `providers`, `service::providers` and `lifecycle` \
         (convert them in `providers::map`):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_upward_paths() {
    let src = synthetic(&[(
        "domain/x.rs",
        "use crate::store::Store; // crate::http\nlet x = crate::app::f();\nlet s = \"crate::http\";",
    )]);
    let found = upward_imports(&src);
    assert_eq!(
        found,
        [
            "domain/x.rs:1: crate::store::Store: domain -> store",
            "domain/x.rs:2: crate::app::f: domain -> app"
        ]
    );
    assert!(layer_of("domain") < layer_of("store"));
}

#[test]
fn the_checker_reads_grouped_and_relative_imports() {
    let src = synthetic(&[
        (
            "store/engine/tx.rs",
            "use crate::{store::Store, domain::{X, y::{self, Z}}};\n\
             use super::super::lifecycle::Plan;\n\
             use super::super::super::http as web;\n\
             pub(crate) use self::inner::W;\n\
             mod tests { use super::*; }",
        ),
        ("store/engine/mod.rs", "use super::super::app::App;"),
    ]);
    let resolved = |file: &str| -> Vec<String> {
        src.named(file)
            .iter()
            .map(|n| match src.resolve(n) {
                Target::Crate(p) => format!("crate::{}", p.join("::")),
                Target::Extern(p) => p.join("::"),
            })
            .collect()
    };
    assert_eq!(
        resolved("store/engine/tx.rs"),
        [
            "crate::store::Store",
            "crate::domain::X",
            "crate::domain::y",
            "crate::domain::y::Z",
            // `super` of `store::engine::tx` is `store::engine`.
            "crate::store::lifecycle::Plan",
            "crate::http",
            "crate::store::engine::tx::inner::W",
            "crate::store::engine::tx::*",
        ]
    );
    assert_eq!(resolved("store/engine/mod.rs"), ["crate::app::App"]);
    let up = upward_imports(&src);
    assert_eq!(up.len(), 2, "{up:?}");
    assert!(up[0].starts_with("store/engine/mod.rs:1:") && up[0].ends_with("store -> app"));
    assert!(up[1].starts_with("store/engine/tx.rs:3:") && up[1].ends_with("store -> http"));
}

#[test]
fn the_checker_sees_sqlx_outside_the_store() {
    let src = synthetic(&[
        ("store/rows.rs", "use sqlx::Row;"),
        (
            "notify.rs",
            "let l = sqlx::postgres::PgListener::connect(u);",
        ),
        ("telemetry/mod.rs", "const F: &str = \"info,sqlx=warn\";"),
        (
            "service/x.rs",
            "use sqlx::{AnyPool, Row};\nfn f(e: sqlx::Error) {}",
        ),
        ("http/error.rs", "let e = sqlx::Error::PoolClosed;"),
    ]);
    assert_eq!(
        sqlx_outside_the_store(&src),
        [
            "service/x.rs:1: sqlx::AnyPool",
            "service/x.rs:1: sqlx::Row",
            "service/x.rs:2: sqlx::Error"
        ]
    );
}

#[test]
fn the_checker_sees_wire_types_elsewhere() {
    let src = synthetic(&[
        (
            "providers/mod.rs",
            "pub use sagents_plugin_api::{grant, spec as wire_spec, wire};",
        ),
        (
            "lifecycle/x.rs",
            "use crate::providers::wire::ReleaseRequest;",
        ),
        (
            "service/providers.rs",
            "use crate::providers::wire::Capabilities;",
        ),
        (
            "http/x.rs",
            "use crate::providers::{grant::G, wire::{SandboxRef}};\n\
             use sagents_plugin_api::spec::Spec;\n\
             let d = crate::providers::wire_spec::ReleaseDisposition::Detach;",
        ),
        (
            "store/x.rs",
            "use crate::providers;\nfn f(r: providers::wire::SandboxRef) {}",
        ),
    ]);
    assert_eq!(
        wire_outside_its_homes(&src),
        [
            "http/x.rs:1: crate::providers::wire::SandboxRef",
            "http/x.rs:2: sagents_plugin_api::spec::Spec",
            "http/x.rs:3: crate::providers::wire_spec::ReleaseDisposition::Detach",
            "store/x.rs:2: providers::wire::SandboxRef",
        ]
    );
}

#[test]
fn the_circle_finder_sees_circles() {
    let src = synthetic(&[
        (
            "store/mod.rs",
            "mod a; mod b; mod c; mod d; mod e; pub use e::E;\npub struct Store;",
        ),
        // a -> b -> c -> a, through a group, a `super::` path in code and a re-export.
        ("store/a.rs", "use super::{Store, b::{self, B}};"),
        ("store/b.rs", "fn f() { super::c::g() }"),
        ("store/c.rs", "use crate::store::a::A;\nuse super::E;"),
        // d <-> e, e by its re-export in the parent.
        ("store/d.rs", "use super::E;"),
        (
            "store/e.rs",
            "use super::d::D; mod inner; mod tests { use super::*; }",
        ),
        // A child naming its parent is not a circle; nor is the parent declaring it.
        ("store/e/inner.rs", "use super::E;"),
        ("http/x.rs", "use crate::store::a::A;"),
    ]);
    let graph = circles::import_graph(&src, "store/");
    assert!(!graph.contains_key("http/x.rs"));
    assert_eq!(
        graph["store/a.rs"].iter().collect::<Vec<_>>(),
        ["store/b.rs", "store/mod.rs"]
    );
    let found = circles::circles(&graph);
    assert_eq!(
        found,
        [
            vec!["store/a.rs", "store/b.rs", "store/c.rs"],
            vec!["store/d.rs", "store/e.rs"],
        ]
    );
    assert_eq!(
        circles::describe(&graph, &found[1]),
        "2 files: store/d.rs, store/e.rs\n    store/d.rs -> store/e.rs\n    store/e.rs -> store/d.rs"
    );
}

#[test]
fn the_store_has_no_import_circles() {
    let src = real_source();
    let graph = circles::import_graph(&src, "store/");
    let found: Vec<String> = circles::circles(&graph)
        .iter()
        .map(|c| circles::describe(&graph, c))
        .collect();
    assert!(
        found.is_empty(),
        "files of `src/store` that import each other, in a circle:\n{}",
        found.join("\n")
    );
}
