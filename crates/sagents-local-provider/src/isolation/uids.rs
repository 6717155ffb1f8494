//! The host uids sandboxes run as: one per sandbox from a configured range, so no per-user
//! count is shared between tenants.

/// The host ids root inside a sandbox maps to when the provider runs as root: one per
/// sandbox, so no per-user count (`RLIMIT_NPROC`) is shared between sandboxes.
pub const DEFAULT_SANDBOX_UIDS: UidRange = UidRange {
    first: 100_000,
    last: 165_535,
};

/// A range of host uids (each also the gid) handed out one per sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a sandbox uid range is FIRST-LAST, 1 <= FIRST <= LAST < 4294967294 (got `{0}`)")]
pub struct BadUidRange(String);

impl std::str::FromStr for UidRange {
    type Err = BadUidRange;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadUidRange(s.chars().take(40).collect());
        let (a, b) = s.trim().split_once('-').ok_or_else(bad)?;
        let first: u32 = a.trim().parse().map_err(|_| bad())?;
        let last: u32 = b.trim().parse().map_err(|_| bad())?;
        if first == 0 || first > last || last >= u32::MAX - 1 {
            return Err(bad());
        }
        Ok(UidRange { first, last })
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl UidRange {
    /// `count` uids from `first` (the old single `--sandbox-uid` as a range start).
    pub fn starting_at(first: u32, count: u32) -> Result<Self, BadUidRange> {
        let last = first.saturating_add(count.saturating_sub(1));
        format!("{first}-{last}").parse()
    }

    /// The first uid of the range not in `taken`, looking from `offset` into the range on
    /// (wrapping), so providers sharing a range seldom pick the same.
    pub fn pick(&self, taken: &std::collections::HashSet<u32>, offset: u32) -> Option<u32> {
        let len = u64::from(self.last - self.first) + 1;
        (0..len)
            .map(|i| self.first + ((u64::from(offset) + i) % len) as u32)
            .find(|u| !taken.contains(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn uid_ranges_parse_and_refuse_root_and_reversed() {
        assert_eq!(
            "100000-165535".parse::<UidRange>(),
            Ok(DEFAULT_SANDBOX_UIDS)
        );
        for bad in ["0-10", "10-5", "5", "a-b", "1-4294967295", ""] {
            assert!(bad.parse::<UidRange>().is_err(), "{bad}");
        }
        assert_eq!(
            UidRange::starting_at(200_000, 65_536),
            Ok(UidRange {
                first: 200_000,
                last: 265_535
            })
        );
    }

    #[test]
    fn each_sandbox_gets_a_uid_no_other_holds() {
        let r: UidRange = "10-12".parse().unwrap();
        let mut taken = HashSet::new();
        for want in [10, 11, 12] {
            let uid = r.pick(&taken, 0).unwrap();
            assert_eq!(uid, want);
            taken.insert(uid);
        }
        assert_eq!(r.pick(&taken, 0), None, "a full range hands out nothing");
        taken.remove(&11);
        assert_eq!(
            r.pick(&taken, 0),
            Some(11),
            "a freed uid is handed out again"
        );
        assert_eq!(
            r.pick(&HashSet::from([12]), 2),
            Some(10),
            "the search wraps"
        );
    }
}
