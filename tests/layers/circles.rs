//! Import circles between the files of one folder: the file → file graph of what each file
//! names, and its strongly connected parts.

use std::collections::{BTreeMap, BTreeSet};

use crate::source::{Source, Target};

/// File → the files it imports, for the files under `folder` (`store/`). A module's own
/// descendants are not its imports (it declares them); a file naming an item its parent
/// defines imports the parent, one the parent re-exports imports the file that defines it.
pub fn import_graph(src: &Source, folder: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in src.files.keys().filter(|f| f.starts_with(folder)) {
        let edges = graph.entry(file.clone()).or_default();
        let own = &src.modules[file];
        for n in src.named(file) {
            let Target::Crate(path) = src.resolve(&n) else {
                continue;
            };
            let Some(to) = src.file_of_path(&path) else {
                continue;
            };
            let below = src.modules[&to].starts_with(own);
            if to != *file && to.starts_with(folder) && !below {
                edges.insert(to);
            }
        }
    }
    graph
}

/// Every circle: each set of two or more files that all reach each other, with the imports
/// between them.
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(f) = todo.pop() {
            for to in graph.get(&f).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|f| (f, reach(f))).collect();
    let mut done = BTreeSet::new();
    let mut out = vec![];
    for f in graph.keys() {
        if done.contains(f) || !reaches[f].contains(f) {
            continue;
        }
        let part: Vec<String> = reaches[f]
            .iter()
            .filter(|g| reaches.get(g).is_some_and(|r| r.contains(f)))
            .cloned()
            .collect();
        done.extend(part.iter().cloned());
        out.push(part);
    }
    out
}

/// A circle as a reader fixes it: its files, then each import inside it.
pub fn describe(graph: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> String {
    let mut s = format!("{} files: {}", circle.len(), circle.join(", "));
    for from in circle {
        for to in graph[from].iter().filter(|t| circle.contains(t)) {
            s.push_str(&format!("\n    {from} -> {to}"));
        }
    }
    s
}
