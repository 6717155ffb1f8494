//! Statement helpers: numbered parameters, `VALUES` rows, statements padded to a few sizes,
//! ids bound in order.

use std::collections::HashMap;

use sqlx::AnyConnection;

use super::error::StoreResult;

/// `$first, $first+1, …` for `n` parameters.
pub(in crate::store) fn params(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($first, …), (…), …`: `rows` tuples of `cols` parameters each, numbered row by row.
pub(in crate::store) fn value_rows(first: usize, rows: usize, cols: usize) -> String {
    (0..rows)
        .map(|r| format!("({})", params(first + r * cols, cols)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `$a, $b, …`: the parameters of column `col` (from 0) of `value_rows(first, rows, cols)`,
/// to name the same values again in an `IN` list.
pub(in crate::store) fn value_column(first: usize, rows: usize, cols: usize, col: usize) -> String {
    (0..rows)
        .map(|r| format!("${}", first + r * cols + col))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rows up to which statements are padded: a group's (64 writes, a few events each). Larger
/// sets keep their size, far from the backends' limits on parameters.
const PADDED_MAX: usize = 256;

/// The size a statement over `n` rows is written for: the next power of two, up to
/// `PADDED_MAX` (and none for none). A connection prepares each statement text once; padded
/// to a few sizes, a group's statements find theirs prepared instead of preparing one for
/// every group size.
pub(in crate::store) fn padded(n: usize) -> usize {
    if n == 0 || n > PADDED_MAX {
        n
    } else {
        n.next_power_of_two()
    }
}

/// `items`, then the last one again until there are `n` (at least as many as `items`).
pub(in crate::store) fn with_last_repeated<T>(items: &[T], n: usize) -> impl Iterator<Item = &T> {
    let last = items.len().saturating_sub(1);
    (0..n).filter_map(move |i| items.get(i.min(last)))
}

/// `ids` padded to `padded(ids.len())` with the last id: duplicates in an `IN` list select
/// nothing more.
pub(in crate::store) fn padded_ids<'a>(ids: &[&'a str]) -> Vec<&'a str> {
    with_last_repeated(ids, padded(ids.len()))
        .copied()
        .collect()
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds each id, in order, after whatever `query` has bound already.
pub(in crate::store) fn bind_ids<'q>(mut query: AnyQuery<'q>, ids: &'q [&'q str]) -> AnyQuery<'q> {
    for id in ids {
        query = query.bind(*id);
    }
    query
}

/// Each row `sql` selects with `ids` bound as `$1…`, parsed into a key and a value.
pub(in crate::store) async fn pairs<V>(
    conn: &mut AnyConnection,
    sql: &str,
    ids: &[&str],
    parse: impl Fn(&sqlx::any::AnyRow) -> StoreResult<(String, V)>,
) -> StoreResult<HashMap<String, V>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let found = bind_ids(sqlx::query(sql), ids).fetch_all(conn).await?;
    found.iter().map(parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_row_by_row() {
        assert_eq!(params(3, 2), "$3, $4");
        assert_eq!(value_rows(2, 2, 3), "($2, $3, $4), ($5, $6, $7)");
        assert_eq!(params(1, 0), "");
        assert_eq!(value_column(2, 2, 3, 0), "$2, $5");
        assert_eq!(value_column(2, 2, 3, 2), "$4, $7");
    }

    #[test]
    fn statements_are_padded_to_a_few_sizes_with_the_last_id() {
        let sizes: Vec<usize> = [0, 1, 2, 3, 5, 8, 9, 33, 64, 129, 256, 257, 5000]
            .map(padded)
            .into();
        assert_eq!(sizes, [0, 1, 2, 4, 8, 8, 16, 64, 64, 256, 256, 257, 5000]);
        assert_eq!(padded_ids(&["a", "b", "c"]), ["a", "b", "c", "c"]);
        assert_eq!(padded_ids(&["a", "b"]), ["a", "b"]);
        assert!(padded_ids(&[]).is_empty());
        let rows: Vec<&i32> = with_last_repeated(&[7, 8], 4).collect();
        assert_eq!(rows, [&7, &8, &8, &8]);
        assert_eq!(with_last_repeated::<i32>(&[], 2).count(), 0);
    }
}
