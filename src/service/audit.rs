//! The command line's side of the audit trail: exporting a chain and verifying an export.

use std::io::Write;

use crate::domain::audit::{self, AuditRecord, ChainBreak};
use crate::store::{Store, StoreError, MAX_AUDIT_PAGE};

#[derive(Debug, thiserror::Error)]
pub enum AuditFileError {
    #[error("cannot read the export: {0}")]
    Read(#[from] std::io::Error),
    #[error("line {line}: not an audit record: {why}")]
    Record { line: usize, why: String },
    #[error(transparent)]
    Broken(#[from] ChainBreak),
}

/// Writes `tenant`'s whole chain to `out`, a record per line, page by page.
pub async fn export(
    store: &Store,
    tenant: &str,
    out: &mut impl Write,
) -> Result<usize, StoreError> {
    let (mut after, mut written) = (0, 0);
    loop {
        let page = store
            .list_audit(tenant, after, None, MAX_AUDIT_PAGE)
            .await?;
        for r in &page {
            let line = serde_json::to_string(r).unwrap_or_default();
            writeln!(out, "{line}").map_err(|e| StoreError::Unavailable(e.to_string()))?;
        }
        written += page.len();
        match page.last() {
            Some(last) if page.len() == MAX_AUDIT_PAGE as usize => after = last.sequence,
            _ => return Ok(written),
        }
    }
}

/// The records of an export: JSON lines, or one `GET /v1/audit` page (`{"records": [...]}`).
pub fn parse_export(text: &str) -> Result<Vec<AuditRecord>, AuditFileError> {
    #[derive(serde::Deserialize)]
    struct Page {
        records: Vec<AuditRecord>,
    }
    if let Ok(page) = serde_json::from_str::<Page>(text) {
        return Ok(page.records);
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| AuditFileError::Record {
                line: i + 1,
                why: e.to_string(),
            })
        })
        .collect()
}

/// Verifies the export in `path`; a line per chain checked.
pub fn verify_file(path: &std::path::Path) -> Result<String, AuditFileError> {
    let records = parse_export(&std::fs::read_to_string(path)?)?;
    let chains = audit::verify(&records)?;
    Ok(chains
        .iter()
        .map(|(tenant, n)| format!("ok\t{tenant}\t{n} records"))
        .collect::<Vec<_>>()
        .join("\n"))
}
