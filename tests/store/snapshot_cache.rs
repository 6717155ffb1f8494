//! The snapshot cache within its byte budget: revisions stay known, the bodies most recently
//! read stay cached, and a body dropped for the budget is read again.

use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use sagents::store::Backend;

use super::{fx, Fx};
use crate::on_both_backends;

on_both_backends!(
    bodies_past_the_budget_are_read_again_and_revisions_stay_known,
    a_zero_budget_keeps_no_body_and_still_answers_from_revisions,
    a_change_to_a_watched_session_brings_its_new_snapshot,
);

fn reads(f: &Fx) -> u64 {
    f.store.metrics().snapshot_reads.load(Ordering::Relaxed)
}

/// As the change listener does once it listens: PostgreSQL reads are trusted for a while.
fn trust(f: &Fx, backend: Backend) {
    if backend == Backend::Postgres {
        f.store
            .hub()
            .cache
            .set_trust(Some(StdDuration::from_secs(60)));
    }
}

async fn bodies_past_the_budget_are_read_again_and_revisions_stay_known(backend: Backend) {
    let f = fx(backend).await;
    trust(&f, backend);
    let cache = &f.store.hub().cache;
    let sessions = [
        f.session("acme").await,
        f.session("acme").await,
        f.session("acme").await,
    ];
    f.snapshot(&sessions[0]).await;
    let one = cache.body_bytes();
    assert!(one > 0);
    // Room for two bodies of this size, not three: past the budget the least recently read
    // go until three quarters of it are left.
    cache.set_body_budget(3 * one - 1);
    for s in &sessions[1..] {
        f.snapshot(s).await;
    }
    assert_eq!(cache.body_bytes(), 2 * one);

    // The two read last are answered from memory.
    let before = reads(&f);
    for s in &sessions[1..] {
        f.snapshot(s).await;
    }
    assert_eq!(reads(&f), before, "the bodies read last are kept");
    // The first was dropped for them: its body is read again, its revision is still known.
    let before = reads(&f);
    assert_eq!(
        f.store
            .session_revision(Some("acme"), &sessions[0].id)
            .await
            .unwrap(),
        sessions[0].revision
    );
    assert_eq!(reads(&f), before, "a revision never needs the body");
    let again = f.snapshot(&sessions[0]).await;
    assert_eq!(reads(&f), before + 1);
    assert_eq!(again.session.id, sessions[0].id);
    assert_eq!(again, f.snapshot(&sessions[0]).await, "and kept once read");
    assert_eq!(reads(&f), before + 1);
}

async fn a_zero_budget_keeps_no_body_and_still_answers_from_revisions(backend: Backend) {
    let f = fx(backend).await;
    trust(&f, backend);
    let cache = &f.store.hub().cache;
    cache.set_body_budget(0);
    let s = f.session("acme").await;
    let run = f.run(&s).await;
    let first = f.snapshot(&s).await;
    let before = reads(&f);
    assert_eq!(f.snapshot(&s).await, first);
    assert_eq!(
        reads(&f),
        before + 1,
        "every body is read from the database"
    );
    assert_eq!(cache.body_bytes(), 0);
    assert_eq!(first.runs[0].id, run.id);
    assert_eq!(
        f.store.session_revision(Some("acme"), &s.id).await.unwrap(),
        first.session.revision
    );
    assert_eq!(reads(&f), before + 1);
}

async fn a_change_to_a_watched_session_brings_its_new_snapshot(backend: Backend) {
    let f = fx(backend).await;
    trust(&f, backend);
    let s = f.session("acme").await;
    f.run(&s).await;
    let watch = f.store.hub().subscribe_session(s.id.as_str());

    let before = reads(&f);
    f.run(&s).await;
    assert_eq!(reads(&f), before + 1, "the commit read the new snapshot");
    let snap = f.snapshot(&s).await;
    assert_eq!(reads(&f), before + 1, "its waiters read nothing more");
    assert_eq!(snap.session.revision, s.revision + 2);
    assert_eq!(snap.runs.len(), 2, "the read saw its own transaction's run");

    drop(watch);
    let before = reads(&f);
    f.run(&s).await;
    assert_eq!(reads(&f), before, "a session nobody waits on is not read");
    assert_eq!(f.snapshot(&s).await.runs.len(), 3);
    assert_eq!(reads(&f), before + 1);
}
