//! Sets of values a statement takes whole: the ids of an `IN (…)`, the rows of a
//! `FROM (VALUES …)`. On PostgreSQL a set is one JSON parameter, so a statement's text is
//! the same for any number of rows: it is parsed and planned once per connection, not once
//! per group size. On SQLite, where preparing costs little, each value is its own parameter.

use std::borrow::Cow;

use super::Backend;

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// `IN (…)` of `n` ids bound from parameter `first` on, to follow a column. PostgreSQL gets
/// an array, which it looks up by index however few rows it expects.
pub(super) fn in_ids(backend: Backend, first: usize, n: usize) -> String {
    match backend {
        Backend::Postgres => {
            format!("= ANY(ARRAY(SELECT json_array_elements_text(${first}::json)))")
        }
        Backend::Sqlite => format!("IN ({})", super::batch_reads::params(first, n)),
    }
}

/// Binds the ids of an [`in_ids`], after whatever `query` has bound already.
pub(super) fn bind_ids<'q>(
    backend: Backend,
    mut query: AnyQuery<'q>,
    ids: &'q [&'q str],
) -> AnyQuery<'q> {
    match backend {
        Backend::Postgres => query.bind(json_array(ids.iter().map(|id| Cell::Text((*id).into())))),
        Backend::Sqlite => {
            for id in ids {
                query = query.bind(*id);
            }
            query
        }
    }
}

/// The type of a column of [`Rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Col {
    Text,
    Int,
}

/// One value of a row of [`Rows`].
#[derive(Clone, Debug)]
pub(super) enum Cell<'q> {
    Text(Cow<'q, str>),
    OptText(Option<Cow<'q, str>>),
    Int(i64),
}

impl<'q> From<&'q str> for Cell<'q> {
    fn from(s: &'q str) -> Self {
        Cell::Text(Cow::Borrowed(s))
    }
}

impl From<String> for Cell<'_> {
    fn from(s: String) -> Self {
        Cell::Text(Cow::Owned(s))
    }
}

impl From<Option<String>> for Cell<'_> {
    fn from(s: Option<String>) -> Self {
        Cell::OptText(s.map(Cow::Owned))
    }
}

impl From<i64> for Cell<'_> {
    fn from(n: i64) -> Self {
        Cell::Int(n)
    }
}

/// Rows a statement reads as a table of columns `column1`, `column2`, …
pub(super) struct Rows<'q> {
    backend: Backend,
    cols: &'static [Col],
    cells: Vec<Cell<'q>>,
}

impl<'q> Rows<'q> {
    pub fn new(backend: Backend, cols: &'static [Col]) -> Self {
        Self {
            backend,
            cols,
            cells: Vec::new(),
        }
    }

    /// Adds a row: one cell per column, of the column's type.
    pub fn push<const N: usize>(&mut self, row: [Cell<'q>; N]) {
        debug_assert_eq!(N, self.cols.len());
        self.cells.extend(row);
    }

    pub fn len(&self) -> usize {
        self.cells.len() / self.cols.len().max(1)
    }

    /// The rows as a parenthesised table expression, bound from parameter `first` on.
    pub fn table(&self, first: usize) -> String {
        match self.backend {
            Backend::Postgres => {
                let cols: Vec<String> = self
                    .cols
                    .iter()
                    .enumerate()
                    .map(|(i, col)| match col {
                        Col::Text => format!("e->>{i} AS column{}", i + 1),
                        Col::Int => format!("(e->>{i})::bigint AS column{}", i + 1),
                    })
                    .collect();
                format!(
                    "(SELECT {} FROM json_array_elements(${first}::json) AS e)",
                    cols.join(", ")
                )
            }
            Backend::Sqlite => format!(
                "(VALUES {})",
                super::batch_reads::value_rows(first, self.len(), self.cols.len())
            ),
        }
    }

    /// ` AND {column} = ANY(…)` of the rows' first column on PostgreSQL, to follow a join on
    /// it: the planner cannot see how many rows the JSON holds and, expecting 100, would
    /// rather scan the whole table than look each row up by index. Nothing on SQLite.
    pub fn by_key(&self, column: &str, first: usize) -> String {
        match self.backend {
            Backend::Postgres => format!(
                " AND {column} = ANY(ARRAY(\
                 SELECT e->>0 FROM json_array_elements(${first}::json) AS e))"
            ),
            Backend::Sqlite => String::new(),
        }
    }

    /// Binds the rows of [`Self::table`], after whatever `query` has bound already.
    pub fn bind(self, mut query: AnyQuery<'q>) -> AnyQuery<'q> {
        match self.backend {
            Backend::Postgres => {
                let width = self.cols.len().max(1);
                let mut json = String::from("[");
                for (r, row) in self.cells.chunks(width).enumerate() {
                    if r > 0 {
                        json.push(',');
                    }
                    json.push_str(&json_array(row.iter().cloned()));
                }
                json.push(']');
                query.bind(json)
            }
            Backend::Sqlite => {
                for cell in self.cells {
                    query = match cell {
                        Cell::Text(Cow::Borrowed(s)) => query.bind(s),
                        Cell::Text(Cow::Owned(s)) => query.bind(s),
                        Cell::OptText(Some(Cow::Borrowed(s))) => query.bind(Some(s)),
                        Cell::OptText(s) => query.bind(s.map(Cow::into_owned)),
                        Cell::Int(n) => query.bind(n),
                    };
                }
                query
            }
        }
    }
}

/// `[…]`: the cells as a JSON array (an absent text as `null`).
fn json_array<'q>(cells: impl Iterator<Item = Cell<'q>>) -> String {
    let values: Vec<serde_json::Value> = cells
        .map(|cell| match cell {
            Cell::Text(s) | Cell::OptText(Some(s)) => serde_json::Value::String(s.into_owned()),
            Cell::OptText(None) => serde_json::Value::Null,
            Cell::Int(n) => serde_json::Value::from(n),
        })
        .collect();
    serde_json::Value::Array(values).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_takes_a_set_as_one_json_parameter() {
        assert_eq!(
            in_ids(Backend::Postgres, 2, 3),
            "= ANY(ARRAY(SELECT json_array_elements_text($2::json)))"
        );
        let mut rows = Rows::new(Backend::Postgres, &[Col::Text, Col::Int]);
        rows.push(["a\"b".into(), 7.into()]);
        rows.push([Cell::OptText(None), (-1).into()]);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows.table(2),
            "(SELECT e->>0 AS column1, (e->>1)::bigint AS column2 \
             FROM json_array_elements($2::json) AS e)"
        );
        assert_eq!(
            rows.by_key("t.id", 2),
            " AND t.id = ANY(ARRAY(SELECT e->>0 FROM json_array_elements($2::json) AS e))"
        );
        let cells: Vec<Cell> = rows.cells.clone();
        assert_eq!(
            format!(
                "[{},{}]",
                json_array(cells[..2].iter().cloned()),
                json_array(cells[2..].iter().cloned())
            ),
            r#"[["a\"b",7],[null,-1]]"#
        );
    }

    #[test]
    fn sqlite_takes_one_parameter_per_value() {
        assert_eq!(in_ids(Backend::Sqlite, 2, 3), "IN ($2, $3, $4)");
        let mut rows = Rows::new(Backend::Sqlite, &[Col::Text, Col::Int]);
        rows.push(["a".into(), 1.into()]);
        rows.push(["b".into(), 2.into()]);
        assert_eq!(rows.table(3), "(VALUES ($3, $4), ($5, $6))");
        assert_eq!(rows.by_key("t.id", 3), "");
    }
}
