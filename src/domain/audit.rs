//! The audit trail: append-only records of decisions, expiries, cancels and operators'
//! changes, one hash chain per tenant (and one, `*`, for changes that belong to none).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::interaction::payload_digest;

/// The chain of changes that belong to no tenant (admin tokens, providers).
pub const SYSTEM_CHAIN: &str = "*";

/// The `prev_hash` of a chain's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One audit record as served and exported. `hash` is the SHA-256, in lowercase hex, of the
/// record without `hash` in the canonical form of `payload_sha256` (compact JSON, keys
/// sorted); `prev_hash` is the hash of the chain's record before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// The tenant whose chain holds it, or `*`.
    pub tenant: String,
    /// Its place in the chain, from 1 without gaps.
    pub sequence: i64,
    pub at: DateTime<Utc>,
    /// What happened: `interaction.resolved`, `interaction.expired`, `run.cancelled`,
    /// `token.created`, `token.revoked`, `tenant_policy.changed`, `resource.operator_action`.
    pub kind: String,
    /// Who did it: `token:<id>`, `system:expiry`, `cli`.
    pub actor: String,
    /// The actor token's display name then, if it had one.
    pub actor_name: Option<String>,
    /// What it was done to: an interaction, run, token or tenant id.
    pub subject: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub prev_hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
}

/// An entry to append, before the chain gives it its place.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub tenant: String,
    pub kind: &'static str,
    pub actor: String,
    pub actor_name: Option<String>,
    pub subject: String,
    pub data: serde_json::Value,
}

impl AuditEntry {
    /// The entry as the next record of a chain whose last record is `(sequence, hash)`.
    pub fn chained(self, at: DateTime<Utc>, last: (i64, &str)) -> AuditRecord {
        let mut record = AuditRecord {
            tenant: self.tenant,
            sequence: last.0 + 1,
            at,
            kind: self.kind.to_owned(),
            actor: self.actor,
            actor_name: self.actor_name,
            subject: self.subject,
            data: self.data,
            prev_hash: last.1.to_owned(),
            hash: String::new(),
        };
        record.hash = record_hash(&record);
        record
    }
}

/// The hash a record must carry: of its canonical form without `hash`.
pub fn record_hash(record: &AuditRecord) -> String {
    let mut value = serde_json::to_value(record).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        fields.remove("hash");
    }
    payload_digest(&value)
}

/// Where a chain read back does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chain {tenant}, record {sequence}: {why}")]
pub struct ChainBreak {
    pub tenant: String,
    pub sequence: i64,
    pub why: String,
}

/// Checks records as exported (any order of chains, each chain in sequence order): every
/// hash is the record's own, every `prev_hash` the hash before it, no sequence missing or
/// repeated, and a chain that starts at 1 starts from `GENESIS`. Returns the records checked
/// per chain.
pub fn verify(records: &[AuditRecord]) -> Result<BTreeMap<String, usize>, ChainBreak> {
    let mut last: BTreeMap<&str, (i64, &str)> = BTreeMap::new();
    let mut counts = BTreeMap::new();
    for r in records {
        let broken = |why: String| ChainBreak {
            tenant: r.tenant.clone(),
            sequence: r.sequence,
            why,
        };
        if record_hash(r) != r.hash {
            return Err(broken("its hash is not the hash of its contents".into()));
        }
        match last.get(r.tenant.as_str()) {
            Some(&(sequence, hash)) => {
                if r.sequence != sequence + 1 {
                    return Err(broken(format!("follows record {sequence}")));
                }
                if r.prev_hash != hash {
                    return Err(broken(
                        "its prev_hash is not the previous record's hash".into(),
                    ));
                }
            }
            None if r.sequence == 1 && r.prev_hash != GENESIS => {
                return Err(broken(
                    "the first record does not start from the genesis hash".into(),
                ));
            }
            None if r.sequence < 1 => return Err(broken("sequences start at 1".into())),
            None => {}
        }
        last.insert(&r.tenant, (r.sequence, &r.hash));
        *counts.entry(r.tenant.clone()).or_insert(0) += 1;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn entry(tenant: &str, subject: &str) -> AuditEntry {
        AuditEntry {
            tenant: tenant.into(),
            kind: "interaction.resolved",
            actor: "token:tok_1".into(),
            actor_name: Some("Ann".into()),
            subject: subject.into(),
            data: json!({"decision": "approve", "comment": "looks right"}),
        }
    }

    fn chain(n: usize) -> Vec<AuditRecord> {
        let at = Utc.with_ymd_and_hms(2026, 12, 8, 0, 0, 0).unwrap();
        let mut out: Vec<AuditRecord> = Vec::new();
        for i in 0..n {
            let last = out
                .last()
                .map_or((0, GENESIS), |r| (r.sequence, r.hash.as_str()));
            out.push(entry("acme", &format!("int_{i}")).chained(at, last));
        }
        out
    }

    #[test]
    fn a_chain_as_written_verifies() {
        let records = chain(3);
        assert_eq!(records[0].prev_hash, GENESIS);
        assert_eq!(records[1].prev_hash, records[0].hash);
        assert_eq!(verify(&records).unwrap()["acme"], 3);
    }

    #[test]
    fn any_change_breaks_the_chain_where_it_was_made() {
        let mut edited = chain(3);
        edited[1].data["decision"] = json!("deny");
        assert_eq!(verify(&edited).unwrap_err().sequence, 2);

        let mut rehashed = chain(3);
        rehashed[1].data["decision"] = json!("deny");
        rehashed[1].hash = record_hash(&rehashed[1]);
        let broken = verify(&rehashed).unwrap_err();
        assert_eq!(
            broken.sequence, 3,
            "the next record no longer follows: {broken}"
        );

        let mut dropped = chain(3);
        dropped.remove(1);
        assert_eq!(verify(&dropped).unwrap_err().sequence, 3);

        let mut forged_start = chain(2);
        forged_start.remove(0);
        forged_start[0].sequence = 1;
        forged_start[0].hash = record_hash(&forged_start[0]);
        assert!(verify(&forged_start).is_err());
    }

    #[test]
    fn chains_of_tenants_are_checked_apart() {
        let at = Utc.with_ymd_and_hms(2026, 12, 8, 0, 0, 0).unwrap();
        let mut records = chain(2);
        records.insert(1, entry("beta", "int_b").chained(at, (0, GENESIS)));
        let counts = verify(&records).unwrap();
        assert_eq!((counts["acme"], counts["beta"]), (2, 1));
    }
}
