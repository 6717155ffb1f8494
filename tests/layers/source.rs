//! The crate's source as the checks read it: files mapped to modules, every path the code
//! names (each `use` leaf, grouped and nested imports expanded, and every other `a::b` path),
//! resolved from the file's own module (`crate::`, `self::`, `super::` chains).

use std::collections::BTreeMap;
use std::path::Path;

/// A token of Rust code; comments, strings, chars and numbers are dropped.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Punct(char),
}

fn tokens(text: &str) -> Vec<(usize, Tok)> {
    let c: Vec<char> = text.chars().collect();
    let (mut i, mut line, mut out) = (0, 1, vec![]);
    let ident = |ch: char| ch.is_ascii_alphanumeric() || ch == '_';
    // Skips to just past `end`, counting lines.
    let skip_to = |i: &mut usize, line: &mut usize, end: &str| {
        let end: Vec<char> = end.chars().collect();
        while *i < c.len() && !c[*i..].starts_with(&end) {
            if c[*i] == '\\' && end == ['"'] {
                *i += 1;
            }
            if c.get(*i) == Some(&'\n') {
                *line += 1;
            }
            *i += 1;
        }
        *i += end.len();
    };
    while i < c.len() {
        let ch = c[i];
        let raw_hashes = |from: usize| {
            let n = c[from..].iter().take_while(|&&h| h == '#').count();
            (c.get(from + n) == Some(&'"')).then_some(n)
        };
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if c[i..].starts_with(&['/', '/']) {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i..].starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < c.len() {
                if c[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    i += 2;
                } else if c[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            skip_to(&mut i, &mut line, "\"");
        } else if (ch == 'r' || (ch == 'b' && c.get(i + 1) == Some(&'r')))
            && raw_hashes(i + 1 + usize::from(ch == 'b')).is_some()
        {
            let from = i + 1 + usize::from(ch == 'b');
            let n = raw_hashes(from).unwrap_or(0);
            i = from + n + 1;
            skip_to(&mut i, &mut line, &format!("\"{}", "#".repeat(n)));
        } else if ch == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                skip_to(&mut i, &mut line, "'");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1; // a lifetime
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident(c[i]) {
                i += 1;
            }
        } else if ident(ch) {
            if c[i..].starts_with(&['r', '#']) && c.get(i + 2).is_some_and(|&x| ident(x)) {
                i += 2;
            }
            let start = i;
            while i < c.len() && ident(c[i]) {
                i += 1;
            }
            out.push((line, Tok::Ident(c[start..i].iter().collect())));
        } else if c[i..].starts_with(&[':', ':']) {
            out.push((line, Tok::Colons));
            i += 2;
        } else {
            if !ch.is_whitespace() {
                out.push((line, Tok::Punct(ch)));
            }
            i += 1;
        }
    }
    out
}

/// One path the code names, as written.
#[derive(Debug, Clone)]
pub struct Named {
    pub line: usize,
    /// The module the path is written in, inline `mod x { }` blocks included.
    pub module: Vec<String>,
    pub path: Vec<String>,
    /// A `pub use`: the name it binds, re-exported from the module.
    pub reexport: Option<String>,
}

/// Expands one `use` tree from `t[*j]`, pushing one `(path, alias)` per leaf.
fn use_tree(
    t: &[(usize, Tok)],
    j: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    loop {
        match t.get(*j).map(|x| &x.1) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *j += 1;
                if t.get(*j).map(|x| &x.1) == Some(&Tok::Colons) {
                    *j += 1;
                    continue;
                }
                break;
            }
            Some(Tok::Colons) => *j += 1,
            Some(Tok::Punct('*')) => {
                path.push("*".into());
                *j += 1;
                break;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                while let Some((_, tok)) = t.get(*j) {
                    match tok {
                        Tok::Punct('}') => {
                            *j += 1;
                            return;
                        }
                        Tok::Punct(',') => *j += 1,
                        _ => use_tree(t, j, path.clone(), out),
                    }
                }
                return;
            }
            _ => break,
        }
    }
    let mut alias = None;
    if let (Some((_, Tok::Ident(a))), Some((_, Tok::Ident(name)))) = (t.get(*j), t.get(*j + 1)) {
        if a == "as" {
            alias = Some(name.clone());
            *j += 2;
        }
    }
    if path.last().is_some_and(|l| l == "self") {
        path.pop();
    }
    out.push((path, alias));
}

/// Every path named in `text`, a file of module `module`.
pub fn named_paths(text: &str, module: &[String]) -> Vec<Named> {
    let t = tokens(text);
    let mut out = vec![];
    let mut inline: Vec<(String, usize)> = vec![];
    let mut depth = 0;
    let mut i = 0;
    let here = |inline: &[(String, usize)]| {
        let mut m = module.to_vec();
        m.extend(inline.iter().map(|(n, _)| n.clone()));
        m
    };
    while i < t.len() {
        let (line, tok) = &t[i];
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some((_, Tok::Ident(name))), Some((_, Tok::Punct('{')))) =
                    (t.get(i + 1), t.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(k) if k == "use" => {
                let public = t[..i]
                    .iter()
                    .rev()
                    .take(5)
                    .take_while(|(_, x)| !matches!(x, Tok::Punct(';' | '{' | '}' | ']')))
                    .any(|(_, x)| *x == Tok::Ident("pub".into()));
                let mut leaves = vec![];
                let mut j = i + 1;
                use_tree(&t, &mut j, vec![], &mut leaves);
                for (path, alias) in leaves.into_iter().filter(|(p, _)| !p.is_empty()) {
                    let bound = alias.or_else(|| path.last().cloned());
                    out.push(Named {
                        line: *line,
                        module: here(&inline),
                        path,
                        reexport: if public { bound } else { None },
                    });
                }
                i = j;
                continue;
            }
            Tok::Ident(first) if i == 0 || t[i - 1].1 != Tok::Colons => {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while let (Some((_, Tok::Colons)), Some((_, Tok::Ident(s)))) =
                    (t.get(j), t.get(j + 1))
                {
                    path.push(s.clone());
                    j += 2;
                }
                if path.len() > 1 {
                    out.push(Named {
                        line: *line,
                        module: here(&inline),
                        path,
                        reexport: None,
                    });
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Where a path points.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Inside the crate, from its root.
    Crate(Vec<String>),
    /// Another crate, or a name this reading does not follow (a local, an alias, a type).
    Extern(Vec<String>),
}

/// The source files under `src/`, each with its module.
pub struct Source {
    pub files: BTreeMap<String, String>,
    pub modules: BTreeMap<String, Vec<String>>,
}

fn default_module(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let mut m: Vec<String> = stem.split('/').map(String::from).collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

impl Source {
    /// `files`: path under `src/` (`store/tx.rs`) and text.
    pub fn new(files: impl IntoIterator<Item = (String, String)>) -> Source {
        let files: BTreeMap<String, String> = files.into_iter().collect();
        let mut modules: BTreeMap<String, Vec<String>> = files
            .keys()
            .map(|f| (f.clone(), default_module(f)))
            .collect();
        // `#[path = "x.rs"] mod name;`, relative to the declaring file's folder.
        for _ in 0..3 {
            for (file, text) in &files {
                let dir = file.rsplit_once('/').map_or("", |(d, _)| d);
                for (at, _) in text.match_indices("#[path = \"") {
                    let rest = &text[at + 10..];
                    let Some((target, after)) = rest.split_once("\"]") else {
                        continue;
                    };
                    let decl = after.trim_start().trim_start_matches("pub ");
                    let Some(name) = decl
                        .strip_prefix("mod ")
                        .and_then(|d| d.split_once(';'))
                        .map(|(n, _)| n.trim().to_string())
                    else {
                        continue;
                    };
                    let rel = if dir.is_empty() {
                        target.to_string()
                    } else {
                        format!("{dir}/{target}")
                    };
                    let mut m = modules[file].clone();
                    m.push(name);
                    modules.insert(rel, m);
                }
            }
        }
        Source { files, modules }
    }

    pub fn read(src: &Path) -> Source {
        fn walk(dir: &Path, src: &Path, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, src, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path
                        .strip_prefix(src)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    out.push((rel, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        let mut files = vec![];
        walk(src, src, &mut files);
        Source::new(files)
    }

    /// The file that holds `module`.
    pub fn file_of(&self, module: &[String]) -> Option<&str> {
        self.modules
            .iter()
            .find(|(f, m)| m.as_slice() == module && f.as_str() != "main.rs")
            .map(|(f, _)| f.as_str())
    }

    /// Every path named in `file`.
    pub fn named(&self, file: &str) -> Vec<Named> {
        named_paths(&self.files[file], &self.modules[file])
    }

    pub fn resolve(&self, n: &Named) -> Target {
        let p = &n.path;
        match p[0].as_str() {
            "crate" => Target::Crate(p[1..].to_vec()),
            "self" => Target::Crate([n.module.as_slice(), &p[1..]].concat()),
            "super" => {
                let ups = p.iter().take_while(|s| *s == "super").count();
                let keep = n.module.len().saturating_sub(ups);
                Target::Crate([&n.module[..keep], &p[ups..]].concat())
            }
            _ => {
                // A child module named without `self::` (`use tx::WriteTx` in `store/mod.rs`).
                let child = [n.module.as_slice(), &p[..1]].concat();
                if self.file_of(&child).is_some() {
                    Target::Crate([n.module.as_slice(), p].concat())
                } else {
                    Target::Extern(p.clone())
                }
            }
        }
    }

    /// The file a crate path lands in: the deepest module file on it, followed through that
    /// module's `pub use` re-exports for the item it names.
    pub fn file_of_path(&self, path: &[String]) -> Option<String> {
        self.file_of_path_within(path, 8)
    }

    fn file_of_path_within(&self, path: &[String], hops: usize) -> Option<String> {
        let depth = (0..=path.len())
            .rev()
            .find(|&k| self.file_of(&path[..k]).is_some())?;
        let file = self.file_of(&path[..depth])?.to_string();
        let Some(item) = path.get(depth) else {
            return Some(file);
        };
        let re = self.named(&file).into_iter().find(|n| {
            n.reexport.as_deref() == Some(item.as_str()) && n.path.last().is_some_and(|l| l != "*")
        });
        match re.map(|re| self.resolve(&re)) {
            Some(Target::Crate(to)) if hops > 0 => {
                self.file_of_path_within(&[to.as_slice(), &path[depth + 1..]].concat(), hops - 1)
            }
            _ => Some(file),
        }
    }
}
