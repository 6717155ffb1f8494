use super::*;
use crate::domain::snapshot::SnapshotSession;

fn revision(c: &SnapshotCache, id: &str) -> Option<i64> {
    match c.get(id, None)? {
        Cached::Visible { revision, .. } => Some(revision),
        Cached::Hidden => None,
    }
}

fn body(c: &SnapshotCache, id: &str) -> Option<Arc<Encoded>> {
    match c.get(id, None)? {
        Cached::Visible { snapshot, .. } => snapshot,
        Cached::Hidden => None,
    }
}

/// Records a read of session `id` at revision 1 with a body of about `size` bytes.
fn keep(c: &SnapshotCache, id: &str, size: usize) {
    c.confirm(c.epoch(), id, "t", 1, Some(encoded("1", 1, size)));
}

/// A snapshot of session `id` at `revision` whose JSON is about `size` bytes.
fn encoded(id: &str, revision: i64, size: usize) -> Arc<Encoded> {
    let snapshot = Snapshot {
        session: SnapshotSession {
            id: format!("ses_{id:0>32}").parse().unwrap(),
            title: Some("x".repeat(size.saturating_sub(200))),
            metadata: serde_json::json!({}),
            revision,
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
        },
        runs: vec![],
        pending_interactions: vec![],
    };
    Arc::new(Encoded::new(&snapshot).unwrap())
}

#[test]
fn untrusted_until_configured() {
    let c = SnapshotCache::default();
    c.confirm(c.epoch(), "s", "t", 3, None);
    assert!(c.get("s", None).is_none());
    c.set_trust(None);
    c.confirm(c.epoch(), "s", "t", 3, None);
    assert_eq!(revision(&c, "s"), Some(3));
}

#[test]
fn a_session_of_another_tenant_is_hidden() {
    let c = SnapshotCache::default();
    c.set_trust(None);
    c.confirm(c.epoch(), "s", "t", 3, Some(encoded("1", 3, 300)));
    assert_eq!(c.get("s", Some("u")), Some(Cached::Hidden));
    assert!(matches!(
        c.get("s", Some("t")),
        Some(Cached::Visible {
            revision: 3,
            snapshot: Some(_)
        })
    ));
}

#[test]
fn a_publish_wins_over_an_older_read_in_flight() {
    let c = SnapshotCache::default();
    c.set_trust(None);
    let before_read = c.epoch();
    // A commit lands while a read of revision 4 is in flight, before anything is cached.
    c.published("s", 5);
    assert!(c.get("s", None).is_none(), "the tenant is not known yet");
    c.confirm(before_read, "s", "t", 4, Some(encoded("1", 4, 300)));
    assert_eq!(
        c.get("s", Some("t")),
        Some(Cached::Visible {
            revision: 5,
            snapshot: None
        })
    );
    assert_eq!(c.body_bytes(), 0, "the older body is not kept");
    let stale = c.epoch();
    c.clear();
    c.confirm(stale, "s", "t", 4, None);
    assert!(
        c.get("s", None).is_none(),
        "a read from before a clear is not recorded"
    );
}

#[test]
fn bodies_are_json_only_and_decode_to_the_snapshot() {
    let e = encoded("1", 7, 400);
    let back = e.decode().unwrap();
    assert_eq!(back.session.revision, 7);
    assert_eq!(serde_json::to_vec(&back).unwrap(), e.json);
}

#[test]
fn bodies_stay_within_their_budget_least_recently_read_first() {
    let c = SnapshotCache::default();
    c.set_trust(None);
    let one = encoded("1", 1, 1000).cost();
    c.set_body_budget(4 * one);
    for n in 0..4 {
        keep(&c, &format!("s{n}"), 1000);
    }
    assert_eq!(c.body_bytes(), 4 * one);
    // Read since they were kept: s1 and s3 are now more recent than s0 and s2. Past the
    // budget, the oldest go until three quarters of it are left.
    assert!(body(&c, "s1").is_some() && body(&c, "s3").is_some());
    keep(&c, "s4", 1000);
    assert_eq!(c.body_bytes(), 3 * one);
    assert!(body(&c, "s0").is_none() && body(&c, "s2").is_none());
    assert!(body(&c, "s4").is_some());
    assert_eq!(revision(&c, "s0"), Some(1), "the revision stays known");
    // A body larger than the whole budget is never kept.
    keep(&c, "big", 5 * 1000);
    assert!(body(&c, "big").is_none());
    // Publishing and clearing give the bytes back.
    c.published("s1", 2);
    assert_eq!(c.body_bytes(), 2 * one);
    c.clear();
    assert_eq!(c.body_bytes(), 0);
}

#[test]
fn a_smaller_budget_drops_bodies_at_once() {
    let c = SnapshotCache::default();
    c.set_trust(None);
    for n in 0..10 {
        keep(&c, &format!("s{n}"), 500);
    }
    c.set_body_budget(0);
    assert_eq!(c.body_bytes(), 0);
    assert!((0..10).all(|n| body(&c, &format!("s{n}")).is_none()));
    keep(&c, "s0", 500);
    assert!(body(&c, "s0").is_none(), "a zero budget keeps no body");
}

#[test]
fn reads_never_grow_the_map_past_its_bound() {
    let c = SnapshotCache::default();
    c.set_trust(None);
    for n in 0..MAX_ENTRIES + 10 {
        c.confirm(c.epoch(), &format!("s{n}"), "t", 1, None);
    }
    assert_eq!(c.lock().map.len(), MAX_ENTRIES);
    assert!(c.get("s0", None).is_some());
    assert!(c.get(&format!("s{}", MAX_ENTRIES + 1), None).is_none());
}

#[tokio::test]
async fn readers_take_turns_only_where_the_read_can_be_kept() {
    let c = SnapshotCache::default();
    assert!(c.read_turn("s0").await.is_none(), "nothing trusted yet");
    c.set_trust(None);
    let first = c.read_turn("s0").await;
    assert!(first.is_some());
    assert!(c.read_turn("s1").await.is_some(), "turns are per session");
    drop(first);
    assert!(
        c.reads.lock().unwrap().is_empty(),
        "a turn nobody waits for is forgotten"
    );
    for n in 0..MAX_ENTRIES {
        c.confirm(c.epoch(), &format!("s{n}"), "t", 1, None);
    }
    assert!(c.read_turn("s0").await.is_some());
    assert!(
        c.read_turn("elsewhere").await.is_none(),
        "a full cache would not keep that read: no turns"
    );
}

#[test]
fn a_short_trust_window_expires() {
    let c = SnapshotCache::default();
    c.set_trust(Some(Duration::from_millis(0)));
    c.confirm(c.epoch(), "s", "t", 3, None);
    assert!(c.get("s", None).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_publish_is_trusted_like_a_read_that_saw_it() {
    let c = SnapshotCache::default();
    c.set_trust(Some(Duration::from_secs(1)));
    c.confirm(c.epoch(), "s", "t", 3, None);
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert!(c.get("s", None).is_none(), "the read is past its window");
    c.published("s", 4);
    assert_eq!(revision(&c, "s"), Some(4), "waiters need not read it again");
    tokio::time::advance(Duration::from_millis(1500)).await;
    assert!(c.get("s", None).is_none(), "the publish is past its window");
    c.published("s", 4);
    c.published("s", 3);
    assert!(
        c.get("s", None).is_none(),
        "a repeated or older revision confirms nothing"
    );
}
