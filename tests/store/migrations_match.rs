//! The two migration trees build the same schema: tables, columns (name, nullability, type as
//! the store maps it), primary keys, unique constraints, foreign keys, CHECK constraints and
//! indexes (columns, uniqueness, partial predicate), read back from a migrated database of
//! each kind and compared in one normal form.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sagents::clock::SystemClock;
use sagents::store::Backend;
use sqlx::Row;

use crate::common::db;

/// Differences the trees mean to have, by the line `differences` writes, each with why.
const INTENDED: &[(&str, &str)] = &[
    (
        "table counters: only in sqlite",
        "SQLite's fencing-token source, a row bumped under `BEGIN IMMEDIATE`",
    ),
    (
        "sequence fencing_tokens: only in postgres",
        "PostgreSQL's fencing-token source, `nextval` in the claim",
    ),
    (
        "index execution_resources_released: sqlite released_at,release_requested_at,state \
         where state='released' | postgres released_at,release_requested_at where state='released'",
        "SQLite needs the predicate's column in the index to read release latency from it alone",
    ),
    (
        "unique of runs: only in sqlite: lease_id",
        "on PostgreSQL a unique lease id made every lease change lock out a child's foreign-key check",
    ),
    (
        "index runs_lease_id: only in postgres",
        "the plain index that replaced PostgreSQL's unique one; SQLite keeps its column constraint",
    ),
];

#[derive(Debug, Default, PartialEq)]
struct Table {
    /// Name → (normalized type, nullable).
    columns: BTreeMap<String, (String, bool)>,
    primary_key: Vec<String>,
    uniques: BTreeSet<String>,
    /// `columns -> table(columns)`.
    foreign_keys: BTreeSet<String>,
    /// Normalized expressions.
    checks: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Schema {
    tables: BTreeMap<String, Table>,
    /// Name → `table: columns [unique] [where predicate]`.
    indexes: BTreeMap<String, String>,
    sequences: BTreeSet<String>,
}

/// The store's types: TEXT, BIGINT (integers, epoch-millisecond times, 0/1 flags), BLOB/BYTEA.
fn normal_type(declared: &str) -> String {
    let t = declared.to_ascii_lowercase();
    let t = t.split('(').next().unwrap_or("").trim();
    match t {
        "text" | "character varying" | "varchar" => "text",
        "bigint" | "integer" | "int" | "smallint" | "int8" | "int4" => "integer",
        "real" | "double precision" | "double" | "float8" => "real",
        "boolean" | "bool" => "boolean",
        "blob" | "bytea" => "blob",
        t if t.starts_with("timestamp") => "timestamp",
        _ => return format!("unknown:{t}"),
    }
    .to_string()
}

/// One spelling for an expression of either database: PostgreSQL's `x = ANY (ARRAY[...])`
/// is `x IN (...)`, casts and parentheses go, case and spaces do not count.
fn normal_expr(e: &str) -> String {
    let mut e = e.to_ascii_lowercase();
    for cast in ["::text", "::bigint", "::integer"] {
        e = e.replace(cast, "");
    }
    e = e.replace("= any (array[", " in (").replace("])", ")");
    e.chars()
        .filter(|c| !c.is_whitespace() && *c != '(' && *c != ')')
        .collect()
}

/// The text inside the parentheses that open at or after `from`, and where it ends.
fn parenthesized(s: &str, from: usize) -> Option<(&str, usize)> {
    let open = from + s[from..].find('(')?;
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[open + 1..open + i], open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// Comma-separated items at the top level of `s`, each normalized.
fn items(s: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (vec![], 0, String::new());
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(normal_expr(&cur));
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(normal_expr(&cur));
    out
}

/// `CREATE [UNIQUE] INDEX name ON table [USING btree] (cols) [WHERE pred]` → the index's line.
fn index_line(table: &str, sql: &str, unique: bool) -> String {
    let on = sql.find(" ON ").unwrap_or(0);
    let (cols, end) = parenthesized(sql, on).unwrap_or(("", sql.len()));
    let pred = sql[end..]
        .trim()
        .strip_prefix("WHERE")
        .map(|p| format!(" where {}", normal_expr(p)))
        .unwrap_or_default();
    let unique = if unique { " unique" } else { "" };
    format!("{table}: {}{unique}{pred}", items(cols).join(","))
}

/// Every `CHECK (...)` in a statement, normalized.
fn checks_in(sql: &str) -> Vec<String> {
    let upper = sql.to_ascii_uppercase();
    let mut out = vec![];
    let mut from = 0;
    while let Some(at) = upper[from..].find("CHECK") {
        let (start, at) = (from + at, from + at + "CHECK".len());
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if word(upper[..start].chars().next_back()) || word(upper[at..].chars().next()) {
            from = at;
            continue;
        }
        let Some((body, end)) = parenthesized(sql, at) else {
            break;
        };
        out.push(normal_expr(body));
        from = end;
    }
    out
}

fn without_comments(sql: &str) -> String {
    sql.lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn sqlite_schema(url: &str) -> Schema {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let mut schema = Schema::default();
    let tables = sqlx::query(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for row in tables {
        let (name, sql): (String, String) = (row.get(0), row.get(1));
        let mut t = Table {
            checks: checks_in(&without_comments(&sql)).into_iter().collect(),
            ..Table::default()
        };
        let mut pk = vec![];
        for c in sqlx::query("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)")
            .bind(&name)
            .fetch_all(&pool)
            .await
            .unwrap()
        {
            let (col, ty, notnull, key): (String, String, i64, i64) =
                (c.get(0), c.get(1), c.get(2), c.get(3));
            t.columns
                .insert(col.clone(), (normal_type(&ty), notnull == 0));
            if key > 0 {
                pk.push((key, col));
            }
        }
        pk.sort();
        t.primary_key = pk.into_iter().map(|(_, c)| c).collect();
        let fks = sqlx::query(
            "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?) ORDER BY id, seq",
        )
        .bind(&name)
        .fetch_all(&pool)
        .await
        .unwrap();
        let mut by_id: BTreeMap<i64, (String, Vec<String>, Vec<String>)> = BTreeMap::new();
        for f in fks {
            let e = by_id.entry(f.get(0)).or_default();
            e.0 = f.get(1);
            e.1.push(f.get(2));
            e.2.push(f.get::<Option<String>, _>(3).unwrap_or_default());
        }
        for (to, from, cols) in by_id.into_values() {
            t.foreign_keys
                .insert(format!("{} -> {to}({})", from.join(","), cols.join(",")));
        }
        for ix in sqlx::query("SELECT name, \"unique\", origin FROM pragma_index_list(?)")
            .bind(&name)
            .fetch_all(&pool)
            .await
            .unwrap()
        {
            let (ix_name, unique, origin): (String, i64, String) =
                (ix.get(0), ix.get(1), ix.get(2));
            if origin == "u" {
                let cols: Vec<String> =
                    sqlx::query_scalar("SELECT name FROM pragma_index_info(?) ORDER BY seqno")
                        .bind(&ix_name)
                        .fetch_all(&pool)
                        .await
                        .unwrap();
                t.uniques.insert(cols.join(","));
            } else if origin == "c" {
                let sql: String =
                    sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = ?")
                        .bind(&ix_name)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                let line = index_line(&name, &without_comments(&sql), unique == 1);
                schema.indexes.insert(ix_name, line);
            }
        }
        schema.tables.insert(name, t);
    }
    pool.close().await;
    schema
}

async fn postgres_schema(url: &str) -> Schema {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let mut schema = Schema::default();
    for c in sqlx::query(
        "SELECT c.table_name::text, c.column_name::text, c.data_type::text, c.is_nullable::text \
         FROM information_schema.columns c JOIN information_schema.tables t \
           ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
           AND c.table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    {
        let (table, col, ty, nullable): (String, String, String, String) =
            (c.get(0), c.get(1), c.get(2), c.get(3));
        let t = schema.tables.entry(table).or_default();
        t.columns.insert(col, (normal_type(&ty), nullable == "YES"));
    }
    for c in sqlx::query(
        "SELECT cl.relname::text, co.contype::text, pg_get_constraintdef(co.oid) \
         FROM pg_constraint co JOIN pg_class cl ON cl.oid = co.conrelid \
         WHERE co.connamespace = 'public'::regnamespace AND cl.relname <> '_sqlx_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    {
        let (table, kind, def): (String, String, String) = (c.get(0), c.get(1), c.get(2));
        let Some(t) = schema.tables.get_mut(&table) else {
            continue;
        };
        let cols = || parenthesized(&def, 0).map_or(vec![], |(c, _)| items(c));
        match kind.as_str() {
            "p" => t.primary_key = cols(),
            "u" => {
                t.uniques.insert(cols().join(","));
            }
            "f" => {
                let refs = def.find("REFERENCES ").unwrap_or(0) + "REFERENCES ".len();
                let to = def[refs..].split('(').next().unwrap_or("").trim();
                let to_cols = parenthesized(&def, refs).map_or(vec![], |(c, _)| items(c));
                t.foreign_keys.insert(format!(
                    "{} -> {to}({})",
                    cols().join(","),
                    to_cols.join(",")
                ));
            }
            "c" => t.checks.extend(checks_in(&def)),
            _ => {}
        }
    }
    for ix in sqlx::query(
        "SELECT i.relname::text, t.relname::text, x.indisunique, pg_get_indexdef(x.indexrelid) \
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_class t ON t.oid = x.indrelid \
         WHERE t.relnamespace = 'public'::regnamespace AND t.relname <> '_sqlx_migrations' \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    {
        let (name, table, unique, def): (String, String, bool, String) =
            (ix.get(0), ix.get(1), ix.get(2), ix.get(3));
        let def = def.replace(" USING btree", "");
        schema
            .indexes
            .insert(name, index_line(&table, &def, unique));
    }
    schema.sequences = sqlx::query_scalar(
        "SELECT s.relname::text FROM pg_class s WHERE s.relkind = 'S' \
           AND s.relnamespace = 'public'::regnamespace \
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = s.oid AND d.deptype IN ('a', 'i'))",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    pool.close().await;
    schema
}

/// One line per difference.
fn differences(sqlite: &Schema, postgres: &Schema) -> Vec<String> {
    fn sides<K: Ord + Clone, V>(a: &BTreeMap<K, V>, b: &BTreeMap<K, V>) -> BTreeSet<K> {
        a.keys().chain(b.keys()).cloned().collect()
    }
    let mut out = vec![];
    for name in sides(&sqlite.tables, &postgres.tables) {
        let (s, p) = match (sqlite.tables.get(&name), postgres.tables.get(&name)) {
            (Some(s), Some(p)) => (s, p),
            (Some(_), None) => {
                out.push(format!("table {name}: only in sqlite"));
                continue;
            }
            _ => {
                out.push(format!("table {name}: only in postgres"));
                continue;
            }
        };
        for col in sides(&s.columns, &p.columns) {
            let (a, b) = (s.columns.get(&col), p.columns.get(&col));
            if a != b {
                out.push(format!(
                    "column {name}.{col}: sqlite {a:?} | postgres {b:?}"
                ));
            }
        }
        if s.primary_key != p.primary_key {
            out.push(format!(
                "primary key of {name}: sqlite {:?} | postgres {:?}",
                s.primary_key, p.primary_key
            ));
        }
        let sets = [
            ("unique", &s.uniques, &p.uniques),
            ("foreign key", &s.foreign_keys, &p.foreign_keys),
            ("check", &s.checks, &p.checks),
        ];
        for (what, a, b) in sets {
            for only in a.difference(b) {
                out.push(format!("{what} of {name}: only in sqlite: {only}"));
            }
            for only in b.difference(a) {
                out.push(format!("{what} of {name}: only in postgres: {only}"));
            }
        }
    }
    for name in sides(&sqlite.indexes, &postgres.indexes) {
        match (sqlite.indexes.get(&name), postgres.indexes.get(&name)) {
            (Some(a), Some(b)) if a != b => {
                let a = a.split_once(": ").map_or(a.as_str(), |(_, x)| x);
                let b = b.split_once(": ").map_or(b.as_str(), |(_, x)| x);
                out.push(format!("index {name}: sqlite {a} | postgres {b}"));
            }
            (Some(_), None) => out.push(format!("index {name}: only in sqlite")),
            (None, Some(_)) => out.push(format!("index {name}: only in postgres")),
            _ => {}
        }
    }
    for seq in &postgres.sequences {
        out.push(format!("sequence {seq}: only in postgres"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_trees_build_the_same_schema() {
    let clock = Arc::new(SystemClock);
    let (lite, _lite_db) = db::store(Backend::Sqlite, clock.clone()).await;
    let (pg, _pg_db) = db::store(Backend::Postgres, clock).await;
    let sqlite = sqlite_schema(lite.url()).await;
    let postgres = postgres_schema(pg.url()).await;
    assert!(sqlite.tables.len() > 10 && sqlite.indexes.len() > 10);
    assert!(sqlite.tables["runs"]
        .checks
        .iter()
        .any(|c| c.starts_with("statein'queued'")));
    assert!(postgres.tables["tokens"].uniques.contains("secret_hash"));

    let found = differences(&sqlite, &postgres);
    let unexpected: Vec<&String> = found
        .iter()
        .filter(|d| !INTENDED.iter().any(|(line, _)| line == d))
        .collect();
    let stale: Vec<&str> = INTENDED
        .iter()
        .map(|(line, _)| *line)
        .filter(|line| !found.iter().any(|d| d == line))
        .collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "the migration trees differ:\n{}\nintended differences no longer found:\n{}",
        unexpected
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        stale.join("\n")
    );
}

#[test]
fn both_spellings_of_a_check_are_one() {
    let lite = "CREATE TABLE t (state TEXT NOT NULL CHECK (state IN ('a', 'b')), \
                flag BIGINT CHECK (flag IN (0, 1)))";
    let pg = [
        "CHECK ((state = ANY (ARRAY['a'::text, 'b'::text])))",
        "CHECK ((flag = ANY (ARRAY[(0)::bigint, (1)::bigint])))",
    ];
    let pg: Vec<String> = pg.iter().flat_map(|c| checks_in(c)).collect();
    assert_eq!(checks_in(lite), pg);
    assert_eq!(
        index_line("runs", "CREATE INDEX r ON runs ((COALESCE(a, b)), id DESC) WHERE s IN ('x')", false),
        index_line(
            "runs",
            "CREATE INDEX r ON public.runs (COALESCE(a, b), id DESC) WHERE (s = ANY (ARRAY['x'::text]))",
            false
        ),
    );
}

#[test]
fn a_difference_is_named() {
    let table = |nullable: bool, check: &str| Table {
        columns: [("state".to_string(), ("text".to_string(), nullable))].into(),
        primary_key: vec!["id".into()],
        checks: [normal_expr(check)].into(),
        ..Table::default()
    };
    let lite = Schema {
        tables: [("runs".to_string(), table(false, "state IN ('a', 'b')"))].into(),
        indexes: [("runs_state".to_string(), "runs: state".to_string())].into(),
        sequences: BTreeSet::new(),
    };
    let pg = Schema {
        tables: [("runs".to_string(), table(true, "state IN ('a')"))].into(),
        indexes: BTreeMap::new(),
        sequences: ["fencing_tokens".to_string()].into(),
    };
    assert_eq!(
        differences(&lite, &pg),
        [
            "column runs.state: sqlite Some((\"text\", false)) | postgres Some((\"text\", true))",
            "check of runs: only in sqlite: statein'a','b'",
            "check of runs: only in postgres: statein'a'",
            "index runs_state: only in sqlite",
            "sequence fencing_tokens: only in postgres",
        ]
    );
}
