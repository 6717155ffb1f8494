//! The architecture's one hard rule: imports point down the layers that `ARCHITECTURE.md`
//! names. A `crate::` path from a lower layer to a higher one fails this test.
#![allow(clippy::unwrap_used, reason = "a test stops at the first surprise")]

use std::path::Path;

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

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level module a file under `src/` belongs to (`src/store/x.rs` → `store`).
fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every top-level module named by a `crate::` path in the code (comments skipped).
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((n + 1, name));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_point_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut upward = vec![];
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let module = module_of(rel);
        if matches!(module.as_str(), "lib" | "main" | "bin") {
            continue;
        }
        let from = layer_of(&module)
            .unwrap_or_else(|| panic!("module `{module}` is in no layer: add it to LAYERS"));
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in crate_paths(&text) {
            let to = layer_of(&target).unwrap_or_else(|| {
                panic!(
                    "`crate::{target}` ({}:{line}) is in no layer",
                    rel.display()
                )
            });
            if to > from {
                upward.push(format!("{}:{line}: {module} -> {target}", rel.display()));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that point up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_checker_sees_upward_paths() {
    let found = crate_paths("use crate::store::Store; // crate::http\nlet x = crate::app::f();");
    let names: Vec<_> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["store", "app"]);
    assert!(layer_of("domain") < layer_of("store"));
}
