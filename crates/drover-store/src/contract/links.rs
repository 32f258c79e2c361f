//! Contract cases for dependencies and batches (`links`): a dependant is
//! not claimable until every dependency is done; the policies `fail`,
//! `run`, `wait`; refusals (unknown, other tenant's, cycle) with nothing
//! written; a DAG in one call with forward references, also inside a
//! caller's transaction; the release inside the finishing write, under
//! concurrent finishes; a batch's callback exactly once with its counts,
//! also when its members finish concurrently; `when` filters; sealing;
//! retention takes a purged item's own link rows and finished batches.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::Wake;
use crate::links::{AfterPolicy, BatchWhen, NewBatch, is_waiting_at};

/// Claims everything claimable on `lane` now (at most 100), by id.
async fn claim_all(h: &Harness, lane: &str) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(lane, 100, LONG))
        .await
        .expect("claim")
}

fn ids(items: &[Item]) -> Vec<Uuid> {
    let mut v: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    v.sort_unstable();
    v
}

fn sorted(mut v: Vec<Uuid>) -> Vec<Uuid> {
    v.sort_unstable();
    v
}

async fn complete(h: &Harness, item: &Item) {
    h.store
        .item_complete(&ClaimRef::of(item).expect("claimed"))
        .await
        .expect("complete");
}

async fn dead_letter(h: &Harness, item: &Item) {
    let out = h
        .store
        .item_fail(
            &ClaimRef::of(item).expect("claimed"),
            &FailParams {
                error: "boom".into(),
                retry_delay: Duration::ZERO,
                fatal: true,
            },
        )
        .await
        .expect("fail");
    assert_eq!(out, FailOutcome::DeadLettered);
}

/// A dependant is claimable only once all of its dependencies are done;
/// each completion releases in its own write (no sweep in between).
pub async fn dependant_waits_for_all_its_dependencies(h: &Harness) {
    let a = put(h, new("a").with_lane("dep")).await;
    let b = put(h, new("b").with_lane("dep")).await;
    let c = put(h, new("c").with_lane("dep").with_after([a.id, b.id])).await;
    assert_eq!(c.status, Status::Pending);
    assert!(is_waiting_at(c.available_at), "stored waiting: {c:?}");
    let links = h.store.links_of(c.tenant_id, c.id).await.expect("links");
    assert_eq!(links.after, sorted(vec![a.id, b.id]));
    assert_eq!(links.waiting_on, 2);
    assert_eq!(links.after_policy, Some(AfterPolicy::Fail));
    let deps_of_a = h.store.links_of(a.tenant_id, a.id).await.expect("links");
    assert_eq!(deps_of_a.dependants, vec![c.id]);

    let got = claim_all(h, "dep").await;
    assert_eq!(ids(&got), sorted(vec![a.id, b.id]), "only the dependencies");
    complete(h, &got[0]).await;
    assert!(claim_all(h, "dep").await.is_empty(), "one dependency left");
    complete(h, &got[1]).await;
    let got = claim_all(h, "dep").await;
    assert_eq!(ids(&got), vec![c.id], "released by the last completion");
    let links = h.store.links_of(c.tenant_id, c.id).await.expect("links");
    assert_eq!(links.waiting_on, 0);

    // Enqueued after its dependency is done: claimable at once.
    complete(h, &got[0]).await;
    let d = put(h, new("d").with_lane("dep").with_after([c.id])).await;
    assert!(!is_waiting_at(d.available_at), "{d:?}");
    assert_eq!(ids(&claim_all(h, "dep").await), vec![d.id]);
}

/// A dependant reads its dependencies' rows with their results in one
/// read: what each returned, stored by its completion; nothing for an item
/// without dependencies or for another tenant.
pub async fn dependant_reads_its_dependencies_results(h: &Harness) {
    let a = put(h, new("a").with_lane("depres")).await;
    let b = put(h, new("b").with_lane("depres")).await;
    let c = put(h, new("c").with_lane("depres").with_after([a.id, b.id])).await;
    let got = claim_all(h, "depres").await;
    assert_eq!(ids(&got), sorted(vec![a.id, b.id]));
    for it in &got {
        h.store
            .item_complete_with(
                &ClaimRef::of(it).expect("claimed"),
                (it.id == a.id)
                    .then(|| serde_json::json!({"rows": 42}))
                    .as_ref(),
            )
            .await
            .expect("complete with result");
    }
    let deps = h
        .store
        .links_dependencies(c.tenant_id, c.id)
        .await
        .expect("dependencies");
    assert_eq!(ids(&deps), sorted(vec![a.id, b.id]));
    for d in &deps {
        assert_eq!(d.status, Status::Done, "{d:?}");
        let want = (d.id == a.id).then(|| serde_json::json!({"rows": 42}));
        assert_eq!(d.result, want, "{d:?}");
    }
    assert!(
        h.store
            .links_dependencies(a.tenant_id, a.id)
            .await
            .expect("none")
            .is_empty()
    );
    assert!(
        h.store
            .links_dependencies(Uuid::now_v7(), c.id)
            .await
            .expect("other tenant")
            .is_empty(),
        "another tenant reads nothing"
    );
}

/// Policy `fail` (the default): a dead-lettered dependency dead-letters
/// its dependant, which finishes the dependant's own dependants; a
/// dependency already failed at enqueue fails the new item at once.
pub async fn dependency_failure_policy_fail_cascades(h: &Harness) {
    let a = put(h, new("a").with_lane("pf")).await;
    let b = put(h, new("b").with_lane("pf").with_after([a.id])).await;
    let c = put(h, new("c").with_lane("pf").with_after([b.id])).await;
    let got = claim_all(h, "pf").await;
    assert_eq!(ids(&got), vec![a.id]);
    dead_letter(h, &got[0]).await;
    let b = get(h, b.tenant_id, b.id).await;
    assert_eq!(b.status, Status::Failed, "{b:?}");
    assert_eq!(
        b.last_error.as_deref(),
        Some(format!("dependency {} ended failed", a.id).as_str())
    );
    let c = get(h, c.tenant_id, c.id).await;
    assert_eq!(c.status, Status::Failed, "the cascade: {c:?}");
    let audit = h.store.audit_list(b.tenant_id, b.id).await.expect("audit");
    assert!(audit.iter().any(|e| e.action == "dead_letter"), "{audit:?}");
    assert!(claim_all(h, "pf").await.is_empty());

    let late = put(h, new("late").with_lane("pf").with_after([a.id])).await;
    assert_eq!(late.status, Status::Failed, "{late:?}");
}

/// Policy `run`: a failed or cancelled dependency counts as finished.
pub async fn dependency_failure_policy_run_runs_anyway(h: &Harness) {
    let a = put(h, new("a").with_lane("pr")).await;
    let x = put(h, new("x").with_lane("pr")).await;
    let b = put(
        h,
        new("b")
            .with_lane("pr")
            .with_after([a.id, x.id])
            .with_after_policy(AfterPolicy::Run),
    )
    .await;
    let got = claim_all(h, "pr").await;
    assert_eq!(ids(&got), sorted(vec![a.id, x.id]));
    let (ga, gx) = if got[0].id == a.id {
        (&got[0], &got[1])
    } else {
        (&got[1], &got[0])
    };
    dead_letter(h, ga).await;
    assert!(claim_all(h, "pr").await.is_empty(), "x still open");
    h.store
        .item_cancel_claimed(&ClaimRef::of(gx).expect("claimed"), "stop")
        .await
        .expect("cancel");
    assert_eq!(ids(&claim_all(h, "pr").await), vec![b.id]);
}

/// Policy `wait`: the dependant waits for an operator; retrying the
/// dependency and completing it releases the dependant.
pub async fn dependency_failure_policy_wait_holds_for_an_operator(h: &Harness) {
    let a = put(h, new("a").with_lane("pw")).await;
    let b = put(
        h,
        new("b")
            .with_lane("pw")
            .with_after([a.id])
            .with_after_policy(AfterPolicy::Wait),
    )
    .await;
    let got = claim_all(h, "pw").await;
    dead_letter(h, &got[0]).await;
    let held = get(h, b.tenant_id, b.id).await;
    assert_eq!(held.status, Status::Pending);
    assert!(is_waiting_at(held.available_at), "{held:?}");
    assert!(claim_all(h, "pw").await.is_empty());
    h.store
        .item_retry(a.tenant_id, a.id, Uuid::nil())
        .await
        .expect("retry");
    let got = claim_all(h, "pw").await;
    assert_eq!(ids(&got), vec![a.id]);
    complete(h, &got[0]).await;
    assert_eq!(ids(&claim_all(h, "pw").await), vec![b.id]);
}

/// An unknown id, another tenant's item, a cycle, or an id twice: refused
/// with `InvalidInput`, and nothing of the call written.
pub async fn dependency_refusals_write_nothing(h: &Harness) {
    let theirs = put(h, new("t").with_tenant(tenant_b())).await;
    let mine = put(h, new("m").with_tenant(tenant_a())).await;
    let fresh = |k: &str| new(k).with_tenant(tenant_a()).with_lane("refuse");

    let x = fresh("x");
    let y = fresh("y").with_after([mine.id, Uuid::now_v7()]);
    let r = h.store.item_insert_many(&[x.clone(), y.clone()]).await;
    assert_kind(r, ErrorKind::InvalidInput, "an unknown dependency");

    let z = fresh("z").with_after([theirs.id]);
    let r = h.store.item_insert(&z).await;
    assert_kind(r, ErrorKind::InvalidInput, "another tenant's item");

    let p = fresh("p");
    let q = fresh("q").with_after([p.id]);
    let p = p.with_after([q.id]);
    let r = h.store.item_insert_many(&[p.clone(), q.clone()]).await;
    assert_kind(r, ErrorKind::InvalidInput, "a cycle");

    let s = fresh("s");
    let s2 = s.clone().with_after([s.id]);
    let r = h.store.item_insert(&s2).await;
    assert_kind(r, ErrorKind::InvalidInput, "waiting for itself");

    for id in [x.id, y.id, z.id, p.id, q.id, s.id] {
        let got = h.store.item_get(tenant_a(), id).await.expect("get");
        assert!(got.is_none(), "{id} was written");
    }
    let theirs_links = h
        .store
        .links_of(tenant_b(), theirs.id)
        .await
        .expect("links");
    assert!(theirs_links.dependants.is_empty(), "{theirs_links:?}");
    let mine_links = h.store.links_of(tenant_a(), mine.id).await.expect("links");
    assert!(mine_links.dependants.is_empty(), "{mine_links:?}");
    assert!(claim_all(h, "refuse").await.is_empty());
}

/// A DAG in one call, given in any order (forward references), runs in
/// dependency order; a delay asked for is kept past the release.
pub async fn dag_in_one_call_with_forward_references(h: &Harness) {
    let a = new("a").with_lane("dag");
    let b = new("b").with_lane("dag").with_after([a.id]);
    let c = new("c").with_lane("dag").with_after([a.id]);
    let d = new("d").with_lane("dag").with_after([b.id, c.id]);
    let out = h
        .store
        .item_insert_many(&[d.clone(), c.clone(), b.clone(), a.clone()])
        .await
        .expect("insert the DAG");
    assert!(out.iter().all(|r| *r == InsertResult::Inserted), "{out:?}");
    let got = claim_all(h, "dag").await;
    assert_eq!(ids(&got), vec![a.id]);
    complete(h, &got[0]).await;
    let got = claim_all(h, "dag").await;
    assert_eq!(ids(&got), sorted(vec![b.id, c.id]));
    complete(h, &got[0]).await;
    assert!(claim_all(h, "dag").await.is_empty(), "d waits for both");
    complete(h, &got[1]).await;
    assert_eq!(ids(&claim_all(h, "dag").await), vec![d.id]);
}

/// The same DAG through the caller's transaction (where the store has
/// one): nothing exists before the commit, all of it after.
pub async fn dag_in_a_caller_transaction(h: &Harness) {
    let a = new("a").with_lane("dagtx");
    let b = new("b").with_lane("dagtx").with_after([a.id]);
    let items = vec![b.clone(), a.clone()];
    match h.store.tx_begin().await {
        Ok(mut tx) => {
            h.store
                .links_insert_in(tx.caller(), &items)
                .await
                .expect("insert in the caller's transaction");
            let before = h.store.item_get(a.tenant_id, a.id).await.expect("get");
            assert!(before.is_none(), "visible before the commit");
            tx.commit().await.expect("commit");
        }
        // A store without caller transactions (memory): its own.
        Err(_) => {
            h.store.links_insert(&items).await.expect("insert");
        }
    }
    let got = claim_all(h, "dagtx").await;
    assert_eq!(ids(&got), vec![a.id]);
    complete(h, &got[0]).await;
    assert_eq!(ids(&claim_all(h, "dagtx").await), vec![b.id]);
}

/// Many dependencies finished at once by many tasks: the dependant is
/// released exactly when the last lands (never stuck, never early), and
/// its lane is woken.
pub async fn release_under_concurrent_finishes(h: &Harness) {
    let n = 16;
    let mut deps = Vec::new();
    for i in 0..n {
        deps.push(put(h, new(&format!("d{i}")).with_lane("race")).await);
    }
    let c = put(
        h,
        new("c")
            .with_lane("race-after")
            .with_after(deps.iter().map(|d| d.id)),
    )
    .await;
    let claimed = h
        .store
        .item_claim(&claim_params("race", 100, LONG))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), n);
    let mut rx = h.store.wakeups().await.expect("subscribe");
    let mut tasks = Vec::new();
    for it in claimed {
        let store = h.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .item_complete(&ClaimRef::of(&it).expect("claimed"))
                .await
                .expect("complete");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await {
                Ok(Wake { lane, .. }) if lane == "race-after" || lane == crate::wake::ANY_LANE => {
                    return;
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(e) => panic!("wake-up channel: {e}"),
            }
        }
    })
    .await
    .expect("a wake-up for the released dependant's lane");
    assert_eq!(ids(&claim_all(h, "race-after").await), vec![c.id]);
}

async fn batch(h: &Harness, kind: &str, when: BatchWhen) -> NewBatch {
    let mut b = NewBatch::new(Uuid::now_v7(), kind);
    b.when = when;
    b.callback_lane = "cb".into();
    b.callback_payload = json!({"note": kind});
    h.store.batch_create(&b).await.expect("create batch");
    b
}

async fn callbacks(h: &Harness, kind: &str) -> Vec<Item> {
    h.store
        .item_list(&ListFilter {
            kind: Some(kind.into()),
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .expect("list")
}

/// One callback, with the counts, once every member of a sealed batch is
/// final; members in several calls; joining a sealed or unknown batch is
/// refused.
pub async fn batch_callback_once_with_counts(h: &Harness) {
    let b = batch(h, "cb.all", BatchWhen::Always).await;
    put(h, new("m").with_lane("bm").with_batch(b.id)).await;
    h.store
        .item_insert_many(&[
            new("m").with_lane("bm").with_batch(b.id),
            new("m").with_lane("bm").with_batch(b.id),
        ])
        .await
        .expect("more members");
    let got = claim_all(h, "bm").await;
    assert_eq!(got.len(), 3);
    complete(h, &got[0]).await;
    dead_letter(h, &got[1]).await;
    h.store
        .item_cancel_claimed(&ClaimRef::of(&got[2]).expect("claimed"), "no")
        .await
        .expect("cancel");
    assert!(callbacks(h, "cb.all").await.is_empty(), "not sealed yet");
    let row = h.store.batch_seal(b.tenant_id, b.id).await.expect("seal");
    assert!(row.sealed && row.fired, "{row:?}");
    assert_eq!((row.total, row.open()), (3, 0));
    let cbs = callbacks(h, "cb.all").await;
    assert_eq!(cbs.len(), 1, "{cbs:?}");
    assert_eq!(cbs[0].id, b.callback_id);
    assert_eq!(cbs[0].lane, "cb");
    assert_eq!(
        cbs[0].payload,
        json!({"batch": b.id, "done": 1, "failed": 1, "cancelled": 1, "payload": {"note": "cb.all"}})
    );
    // Sealing again changes nothing.
    h.store.batch_seal(b.tenant_id, b.id).await.expect("seal");
    assert_eq!(callbacks(h, "cb.all").await.len(), 1);
    let r = h
        .store
        .item_insert(&new("m").with_lane("bm").with_batch(b.id))
        .await;
    assert_kind(r, ErrorKind::InvalidInput, "joining a sealed batch");
    let r = h
        .store
        .item_insert(&new("m").with_lane("bm").with_batch(Uuid::now_v7()))
        .await;
    assert_kind(r, ErrorKind::InvalidInput, "joining an unknown batch");
    let mut per = h
        .store
        .batch_members(b.tenant_id, b.id)
        .await
        .expect("members");
    per.sort_unstable();
    assert_eq!(
        per,
        vec![
            (Status::Done, 1),
            (Status::Failed, 1),
            (Status::Cancelled, 1)
        ]
    );
    let listed = h.store.batch_list(b.tenant_id, 10).await.expect("list");
    assert!(listed.iter().any(|r| r.id == b.id));
}

/// Members finished concurrently by many tasks after the seal: exactly
/// one callback, counting every member.
pub async fn batch_callback_exactly_once_under_concurrent_finishes(h: &Harness) {
    let b = batch(h, "cb.race", BatchWhen::Always).await;
    let n = 24;
    let members: Vec<NewItem> = (0..n)
        .map(|_| new("m").with_lane("brace").with_batch(b.id))
        .collect();
    h.store.item_insert_many(&members).await.expect("members");
    h.store.batch_seal(b.tenant_id, b.id).await.expect("seal");
    let claimed = claim_all(h, "brace").await;
    assert_eq!(claimed.len(), n);
    let mut tasks = Vec::new();
    for it in claimed {
        let store = h.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .item_complete(&ClaimRef::of(&it).expect("claimed"))
                .await
                .expect("complete");
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let cbs = callbacks(h, "cb.race").await;
    assert_eq!(cbs.len(), 1, "{cbs:?}");
    assert_eq!(cbs[0].payload["done"], json!(n));
    let row = h
        .store
        .batch_get(b.tenant_id, b.id)
        .await
        .expect("get")
        .expect("batch");
    assert!(row.fired);
    assert_eq!(row.counts.done, n as i64);
}

/// `success` fires only when every member is done, `failure` only when
/// one is not; an empty sealed batch fires `always` at once.
pub async fn batch_when_filters(h: &Harness) {
    let ok = batch(h, "cb.ok", BatchWhen::Success).await;
    let bad = batch(h, "cb.bad", BatchWhen::Failure).await;
    let ok2 = batch(h, "cb.ok2", BatchWhen::Success).await;
    let bad2 = batch(h, "cb.bad2", BatchWhen::Failure).await;
    for (b, lane) in [(&ok, "w1"), (&bad, "w2"), (&ok2, "w3"), (&bad2, "w4")] {
        put(h, new("m").with_lane(lane).with_batch(b.id)).await;
        h.store.batch_seal(b.tenant_id, b.id).await.expect("seal");
    }
    // ok and bad2: their member fails; bad and ok2: theirs is done.
    for lane in ["w1", "w4"] {
        let got = claim_all(h, lane).await;
        dead_letter(h, &got[0]).await;
    }
    for lane in ["w2", "w3"] {
        let got = claim_all(h, lane).await;
        complete(h, &got[0]).await;
    }
    assert!(callbacks(h, "cb.ok").await.is_empty(), "success, a failure");
    assert!(callbacks(h, "cb.bad").await.is_empty(), "failure, all done");
    assert_eq!(callbacks(h, "cb.ok2").await.len(), 1, "success, all done");
    assert_eq!(callbacks(h, "cb.bad2").await.len(), 1, "failure, a failure");
    for b in [&ok, &bad] {
        let row = h
            .store
            .batch_get(b.tenant_id, b.id)
            .await
            .expect("get")
            .expect("batch");
        assert!(row.fired, "decided once even without a callback: {row:?}");
    }
    let empty = batch(h, "cb.empty", BatchWhen::Always).await;
    h.store
        .batch_seal(empty.tenant_id, empty.id)
        .await
        .expect("seal");
    assert_eq!(callbacks(h, "cb.empty").await.len(), 1);
}

/// The store's clock now (PostgreSQL's real clock, or the manual one).
fn cutoff_now(h: &Harness) -> chrono::DateTime<chrono::Utc> {
    match &h.clock {
        Some(c) => {
            use crate::Clock;
            c.now()
        }
        None => chrono::Utc::now(),
    }
}

/// Claims the one item of `lane` and completes it.
async fn run_one(h: &Harness, lane: &str) -> Item {
    let got = claim_all(h, lane).await;
    assert_eq!(got.len(), 1, "one item on {lane}: {got:?}");
    complete(h, &got[0]).await;
    got.into_iter().next().expect("one")
}

/// What [`purge_takes_link_rows_with_their_items`] purges and keeps.
struct PurgeFixture {
    ended: Vec<Item>,
    f: Item,
    w: Item,
    x: Item,
    over: NewBatch,
    open: NewBatch,
}

/// A chain run to the end (a, b -> c); a `wait` dependant `w` of a dead
/// letter `f`; a dependant `y` cancelled while its dependency `x` is
/// pending; a batch run to the end, callback included; one whose callback
/// has not run; one not sealed.
async fn purge_fixture(h: &Harness) -> PurgeFixture {
    // A chain that runs to the end: a, b -> c.
    let a = put(h, new("a").with_lane("pl")).await;
    let b = put(h, new("b").with_lane("pl")).await;
    let c = put(h, new("c").with_lane("pl-c").with_after([a.id, b.id])).await;
    for it in claim_all(h, "pl").await {
        complete(h, &it).await;
    }
    run_one(h, "pl-c").await;
    // A `wait` dependant of a dead letter.
    let f = put(h, new("f").with_lane("pl-f")).await;
    let w = put(
        h,
        new("w")
            .with_lane("pl-w")
            .with_after([f.id])
            .with_after_policy(AfterPolicy::Wait),
    )
    .await;
    dead_letter(h, &claim_all(h, "pl-f").await[0]).await;
    // A dependant cancelled while its dependency is still pending.
    let x = put(h, new("x").with_lane("pl-x")).await;
    let y = put(h, new("y").with_lane("pl-y").with_after([x.id])).await;
    h.store
        .item_cancel(y.tenant_id, y.id, Uuid::nil())
        .await
        .expect("cancel y");
    // A batch run to the end, callback included; one whose callback has
    // not run yet; one not sealed.
    let over = batch(h, "cb.over", BatchWhen::Always).await;
    let waiting = batch(h, "cb.waiting", BatchWhen::Always).await;
    let open = batch(h, "cb.open", BatchWhen::Always).await;
    for (bt, lane) in [(&over, "pl-b1"), (&waiting, "pl-b2"), (&open, "pl-b3")] {
        h.store
            .item_insert_many(&[
                new("m").with_lane(lane).with_batch(bt.id),
                new("m").with_lane(lane).with_batch(bt.id),
            ])
            .await
            .expect("members");
        for it in claim_all(h, lane).await {
            complete(h, &it).await;
        }
    }
    for bt in [&over, &waiting] {
        let row = h.store.batch_seal(bt.tenant_id, bt.id).await.expect("seal");
        assert!(row.fired, "{row:?}");
    }
    let mut p = claim_params("cb", 10, LONG);
    p.kinds = vec!["cb.over".into()];
    let cb = h.store.item_claim(&p).await.expect("claim callback");
    assert_eq!(cb.len(), 1);
    complete(h, &cb[0]).await;
    PurgeFixture {
        ended: vec![a, b, c, f.clone(), y, cb[0].clone()],
        f,
        w,
        x,
        over,
        open,
    }
}

/// Purges with a cutoff between everything so far and what comes next.
async fn purge_now(h: &Harness) -> u64 {
    h.pass(Duration::from_millis(300)).await;
    let cutoff = cutoff_now(h);
    h.pass(Duration::from_millis(300)).await;
    h.store.item_purge(cutoff, 3).await.expect("purge")
}

/// Retention takes a purged item's own link rows with it (the edges whose
/// dependant it is, its open count, its batch membership) and a batch
/// whose callback decision is taken once its members are purged and its
/// callback no longer waits to run. An edge whose dependency is purged
/// stays while its dependant is stored: a `wait` dependant of a purged
/// dead letter keeps waiting (an operator cancels it), and a batch not
/// sealed keeps its counts for the seal.
pub async fn purge_takes_link_rows_with_their_items(h: &Harness) {
    let PurgeFixture {
        ended,
        f,
        w,
        x,
        over,
        open,
    } = purge_fixture(h).await;
    let before = h.store.links_census().await.expect("census");
    assert_eq!(
        before,
        crate::links::LinkCensus {
            edges: 4,
            waits: 3,
            members: 6,
            batches: 3
        }
    );

    // a, b, c, f, y, six members and one callback.
    assert_eq!(purge_now(h).await, 12);
    for it in &ended {
        let got = h.store.item_get(it.tenant_id, it.id).await.expect("get");
        assert!(got.is_none(), "{got:?}");
    }
    let after = h.store.links_census().await.expect("census");
    // Left: w's edge to the purged f and w's count; the batch whose
    // callback waits and the one not sealed.
    assert_eq!(
        after,
        crate::links::LinkCensus {
            edges: 1,
            waits: 1,
            members: 0,
            batches: 2
        }
    );
    let held = get(h, w.tenant_id, w.id).await;
    assert_eq!(held.status, Status::Pending);
    assert!(is_waiting_at(held.available_at), "{held:?}");
    let links = h.store.links_of(w.tenant_id, w.id).await.expect("links");
    assert_eq!((links.after, links.waiting_on), (vec![f.id], 1));
    assert!(claim_all(h, "pl-w").await.is_empty(), "w still waits");
    let x_links = h.store.links_of(x.tenant_id, x.id).await.expect("links");
    assert!(x_links.dependants.is_empty(), "{x_links:?}");
    run_one(h, "pl-x").await;
    assert!(
        h.store
            .batch_get(over.tenant_id, over.id)
            .await
            .expect("get")
            .is_none()
    );
    let kept = h
        .store
        .batch_get(open.tenant_id, open.id)
        .await
        .expect("get")
        .expect("the open batch stays");
    assert_eq!((kept.total, kept.counts.done, kept.fired), (2, 2, false));

    // The rest finishes: w cancelled by the operator, the waiting
    // callback run, the open batch sealed (its purged members' counts
    // fire it) and its callback run.
    h.store
        .item_cancel(w.tenant_id, w.id, Uuid::nil())
        .await
        .expect("cancel w");
    run_one(h, "cb").await;
    let row = h
        .store
        .batch_seal(open.tenant_id, open.id)
        .await
        .expect("seal");
    assert!(row.fired, "{row:?}");
    let cb_open = run_one(h, "cb").await;
    assert_eq!(cb_open.payload["done"], json!(2), "{cb_open:?}");
    // w, x and the two callbacks.
    assert_eq!(purge_now(h).await, 4);
    assert_eq!(
        h.store.links_census().await.expect("census"),
        crate::links::LinkCensus::default()
    );
}
