//! Fair share between groups inside each tenant's share, for the lanes an
//! operator set to share by group: the inner level of the two-level stride
//! rule, and how a group is named to it.
//!
//! The outer level is unchanged: the tenants with due work in the lane
//! share its starts by their weights ([`Passes::share_work`]). Inside one
//! tenant's share, its starts go to its groups with due work in the lane
//! in turn, each group at weight 1: each (lane, tenant, group) keeps a
//! pass moved by [`PASS_SCALE`] per start; each (lane, tenant) keeps a
//! group virtual time (the pass of its latest start), and a group's pass
//! is read lifted to it, so a group that was idle comes back level, with
//! no banked credit. Ties go to the group whose next item comes first in
//! priority then age order; inside a group, priority then age order.
//! Items with no group are one bucket of their own, stored under the key
//! [`NO_GROUP`] (`''`); the tenant's group virtual time is stored under
//! [`GROUP_VT`] (`'*'`). Neither can be a group's name (names are
//! `[a-z0-9_.:-]{1,128}`).
//!
//! The inner level reuses [`Passes`] (a group is named to it by
//! [`group_id`]); a candidate the admission refuses is skipped and its
//! group keeps its pass, as a tenant does at the outer level.

use std::collections::{BTreeMap, HashMap, VecDeque};

use uuid::Uuid;

use super::{PASS_SCALE, Passes, TenantWork};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use drover_core::error::Result;

/// The storage key of the bucket of a tenant's items with no group.
pub const NO_GROUP: &str = "";
/// The storage key of a (lane, tenant)'s group virtual time, beside its
/// groups' passes.
pub const GROUP_VT: &str = "*";

/// The namespace [`group_id`] derives a group's id in (fixed: the ids
/// are only ever compared within one process, but must be stable in it).
const GROUP_NAMESPACE: Uuid = Uuid::from_u128(0x6472_6f76_6572_2d66_6169_722d_6772_6f75);

/// The id the inner [`Passes`] know a group by: a name-based UUID of its
/// storage key ([`NO_GROUP`] for the items with none).
pub fn group_id(key: &str) -> Uuid {
    Uuid::new_v3(&GROUP_NAMESPACE, key.as_bytes())
}

/// The storage key of an item's group ([`NO_GROUP`] for none).
pub fn group_key(group: Option<&str>) -> &str {
    group.unwrap_or(NO_GROUP)
}

/// A tenant's inner passes from its stored rows `(group key, pass)` (the
/// [`GROUP_VT`] row holding its group virtual time).
pub fn inner_passes(rows: impl IntoIterator<Item = (String, i64)>) -> Passes {
    let mut vt = 0;
    let mut stored = Vec::new();
    for (key, pass) in rows {
        if key == GROUP_VT {
            vt = pass;
        } else {
            stored.push((group_id(&key), pass));
        }
    }
    Passes::new(vt, stored)
}

/// The rows a write of `passes` (a tenant's inner passes) upserts: `(group
/// key, pass, starts)` for each group whose pass moved, named by `names`
/// (id to key), and the [`GROUP_VT`] row with the group virtual time (its
/// starts the claim's total). Empty when nothing moved.
pub fn inner_rows(passes: &Passes, names: &HashMap<Uuid, String>) -> Vec<(String, i64, u64)> {
    if passes.changed().is_empty() {
        return Vec::new();
    }
    let mut total = 0;
    let mut rows: Vec<(String, i64, u64)> = passes
        .changed()
        .iter()
        .filter_map(|(g, (pass, n))| {
            total += n;
            names.get(g).map(|k| (k.clone(), *pass, *n))
        })
        .collect();
    rows.push((GROUP_VT.to_owned(), passes.vt(), total));
    rows
}

/// Splits one tenant's candidates (in claim order) into its groups'
/// lists, keeping that order: the [`TenantWork::Groups`] of `passes`, and
/// the names of the groups (id to key). `group` gives a candidate's
/// storage key.
pub fn by_group<C>(
    passes: Passes,
    candidates: Vec<C>,
    group: impl Fn(&C) -> String,
) -> (TenantWork<C>, HashMap<Uuid, String>) {
    let mut lists: BTreeMap<String, Vec<C>> = BTreeMap::new();
    for c in candidates {
        lists.entry(group(&c)).or_default().push(c);
    }
    let names = lists.keys().map(|k| (group_id(k), k.clone())).collect();
    let lists = lists.into_iter().map(|(k, l)| (group_id(&k), l)).collect();
    (TenantWork::Groups(passes, lists), names)
}

/// What a backend's fair claim reads for [`tenants_work`], in its
/// claim's transaction.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) trait GroupReads {
    /// A candidate of the share.
    type C;
    /// `tenant`'s groups with pending work in the lane (their keys,
    /// [`NO_GROUP`] for its ungrouped items), kept or read now; and
    /// whether they were kept.
    async fn groups(&mut self, tenant: Uuid) -> Result<(std::sync::Arc<GroupList>, bool)>;
    /// The stored inner pass rows `(tenant, group key, pass)` of
    /// `tenants`.
    async fn passes(&mut self, tenants: &[Uuid]) -> Result<Vec<(Uuid, String, i64)>>;
    /// The next due items of each of `wants` (tenant, group key, and the
    /// starts its quota gives it), in claim order, one list per want.
    async fn read(&mut self, wants: &[(Uuid, String, u32)]) -> Result<Vec<Vec<Self::C>>>;
    /// Forgets `tenant`'s kept group list (it named nothing due).
    fn forget(&mut self, tenant: Uuid);
}

/// A tenant's groups with pending work: each key with its [`group_id`]
/// (worked out once per read of the list, not per claim).
pub type GroupList = Vec<(String, Uuid)>;

/// `keys` with their ids, as a kept group list holds them.
pub fn group_list(keys: Vec<String>) -> GroupList {
    keys.into_iter()
        .map(|k| {
            let id = group_id(&k);
            (k, id)
        })
        .collect()
}

/// One tenant's inner share being read: its passes, its groups' keys by
/// id, the inner rounds, and the lists read so far.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
struct Reading<C> {
    rows: Vec<(String, i64)>,
    inner: Passes,
    names: HashMap<Uuid, String>,
    rounds: super::Rounds,
    quota: u32,
    kept: bool,
    lists: BTreeMap<Uuid, Vec<C>>,
}

/// The work of each of `quotas` (a tenant and the starts the claim may
/// give it): its inner passes and the next items of the groups the inner
/// quotas name ([`TenantWork::Groups`]), a group with nothing due dropped
/// and the quotas drawn again ([`Rounds`](super::Rounds)); and every
/// group's key by id (to write the passes back). The reads of all the
/// tenants go together, one [`GroupReads::read`] per round. A tenant
/// whose kept group list named nothing due has its list read again at
/// once (a group another process enqueued for is not left for the poll).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) async fn tenants_work<R: GroupReads>(
    reads: &mut R,
    quotas: &[(Uuid, u32)],
) -> Result<(BTreeMap<Uuid, TenantWork<R::C>>, HashMap<Uuid, String>)> {
    let tenants: Vec<Uuid> = quotas.iter().map(|(t, _)| *t).collect();
    let mut rows: HashMap<Uuid, Vec<(String, i64)>> = HashMap::new();
    for (t, k, p) in reads.passes(&tenants).await? {
        rows.entry(t).or_default().push((k, p));
    }
    let mut reading: BTreeMap<Uuid, Reading<R::C>> = BTreeMap::new();
    for (t, q) in quotas {
        let rows = rows.remove(t).unwrap_or_default();
        reading.insert(*t, start(reads, *t, *q, rows).await?);
    }
    let mut again = true;
    while again {
        read_rounds(reads, &mut reading).await?;
        again = false;
        let stale: Vec<Uuid> = reading
            .iter()
            .filter(|(_, r)| r.kept && r.lists.values().all(Vec::is_empty))
            .map(|(t, _)| *t)
            .collect();
        for t in stale {
            reads.forget(t);
            if let Some(r) = reading.remove(&t) {
                let rows = r.rows;
                let fresh = start(reads, t, r.quota, rows).await?;
                again |= !fresh.kept;
                reading.insert(t, fresh);
            }
        }
    }
    let mut names = HashMap::new();
    let work = reading
        .into_iter()
        .map(|(t, r)| {
            names.extend(r.names);
            (
                t,
                TenantWork::Groups(r.inner, r.lists.into_iter().collect()),
            )
        })
        .collect();
    Ok((work, names))
}

/// `tenant`'s inner share before its reads: its group list (kept or
/// read), and its passes from its stored `rows` (those of groups not
/// listed left out: they have nothing pending).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
async fn start<R: GroupReads>(
    reads: &mut R,
    tenant: Uuid,
    quota: u32,
    rows: Vec<(String, i64)>,
) -> Result<Reading<R::C>> {
    let (list, kept) = reads.groups(tenant).await?;
    let ids: HashMap<&str, Uuid> = list.iter().map(|(k, id)| (k.as_str(), *id)).collect();
    let mut vt = 0;
    let mut stored = Vec::new();
    for (k, pass) in &rows {
        if k == GROUP_VT {
            vt = *pass;
        } else if let Some(id) = ids.get(k.as_str()) {
            stored.push((*id, *pass));
        }
    }
    let inner = Passes::new(vt, stored);
    let names: HashMap<Uuid, String> = list.iter().map(|(k, id)| (*id, k.clone())).collect();
    Ok(Reading {
        rows,
        rounds: super::Rounds::new(names.keys().map(|g| (*g, 1)).collect()),
        inner,
        names,
        quota,
        kept,
        lists: BTreeMap::new(),
    })
}

/// The inner rounds of every tenant of `reading`, each round's reads of
/// all of them in one [`GroupReads::read`].
#[cfg(any(feature = "postgres", feature = "sqlite"))]
async fn read_rounds<R: GroupReads>(
    reads: &mut R,
    reading: &mut BTreeMap<Uuid, Reading<R::C>>,
) -> Result<()> {
    let mut active: Vec<Uuid> = reading.keys().copied().collect();
    while !active.is_empty() {
        let mut wants: Vec<(Uuid, String, u32)> = Vec::new();
        let mut owners: Vec<(Uuid, Uuid)> = Vec::new();
        for t in &active {
            let Some(r) = reading.get_mut(t) else {
                continue;
            };
            for (g, q) in r.rounds.next(&r.inner, r.quota) {
                wants.push((*t, r.names.get(&g).cloned().unwrap_or_default(), q));
                owners.push((*t, g));
            }
        }
        if wants.is_empty() {
            break;
        }
        let got = reads.read(&wants).await?;
        let mut empty: HashMap<Uuid, std::collections::HashSet<Uuid>> = HashMap::new();
        for ((t, g), list) in owners.iter().zip(got) {
            let e = empty.entry(*t).or_default();
            if list.is_empty() {
                e.insert(*g);
            }
            if let Some(r) = reading.get_mut(t) {
                r.lists.insert(*g, list);
            }
        }
        active = empty
            .into_iter()
            .filter(|(t, e)| reading.get_mut(t).is_some_and(|r| r.rounds.settle(e)))
            .map(|(t, _)| t)
            .collect();
    }
    Ok(())
}

/// One tenant's candidates as the outer share draws from them.
#[derive(Debug)]
pub(super) enum Source<C> {
    /// In the order given.
    Items(VecDeque<C>),
    /// By the inner stride rule over its groups.
    Groups(Passes, Vec<(Uuid, VecDeque<C>)>),
}

impl<C> From<TenantWork<C>> for Source<C> {
    fn from(w: TenantWork<C>) -> Source<C> {
        match w {
            TenantWork::Items(l) => Source::Items(l.into()),
            TenantWork::Groups(p, lists) => Source::Groups(
                p,
                lists
                    .into_iter()
                    .filter(|(_, l)| !l.is_empty())
                    .map(|(g, l)| (g, l.into()))
                    .collect(),
            ),
        }
    }
}

impl<C> Source<C> {
    /// Whether nothing is left.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Source::Items(l) => l.is_empty(),
            Source::Groups(_, lists) => lists.iter().all(|(_, l)| l.is_empty()),
        }
    }

    /// The index of the group whose turn is next: least pass, then the
    /// group whose head comes first by `key`, then the least id.
    fn next_group<K: Ord>(
        passes: &Passes,
        lists: &[(Uuid, VecDeque<C>)],
        key: &impl Fn(&C) -> K,
    ) -> Option<usize> {
        lists
            .iter()
            .enumerate()
            .filter_map(|(i, (g, l))| l.front().map(|h| (passes.pass(*g), key(h), *g, i)))
            .min()
            .map(|(.., i)| i)
    }

    /// The candidate that would be given next (if admitted).
    pub(super) fn head<K: Ord>(&self, key: &impl Fn(&C) -> K) -> Option<&C> {
        match self {
            Source::Items(l) => l.front(),
            Source::Groups(p, lists) => {
                Self::next_group(p, lists, key).and_then(|i| lists[i].1.front())
            }
        }
    }

    /// The next candidate `admit` takes, in this source's order; those it
    /// refuses are dropped (they stay pending) and their group keeps its
    /// pass. A taken candidate moves its group's pass.
    pub(super) fn take<K: Ord>(
        &mut self,
        key: &impl Fn(&C) -> K,
        admit: &mut impl FnMut(&C) -> bool,
    ) -> Option<C> {
        match self {
            Source::Items(l) => {
                while let Some(c) = l.pop_front() {
                    if admit(&c) {
                        return Some(c);
                    }
                }
                None
            }
            Source::Groups(p, lists) => {
                while let Some(i) = Self::next_group(p, lists, key) {
                    let g = lists[i].0;
                    let Some(c) = lists[i].1.pop_front() else {
                        continue;
                    };
                    if admit(&c) {
                        let pass = p.pass(g);
                        p.give(g, pass, PASS_SCALE);
                        return Some(c);
                    }
                }
                None
            }
        }
    }

    /// The inner passes, for a source by group.
    pub(super) fn into_passes(self) -> Option<Passes> {
        match self {
            Source::Items(_) => None,
            Source::Groups(p, _) => Some(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    /// A candidate: (order key, group key).
    type C = (u32, &'static str);

    fn work(passes: Passes, c: Vec<C>) -> TenantWork<C> {
        by_group(passes, c, |c| c.1.to_owned()).0
    }

    #[test]
    fn group_ids_are_stable_and_distinct() {
        assert_eq!(group_id("x"), group_id("x"));
        assert_ne!(group_id("x"), group_id("y"));
        assert_ne!(group_id(NO_GROUP), group_id(GROUP_VT));
        assert_eq!(group_key(None), NO_GROUP);
        assert_eq!(group_key(Some("g")), "g");
    }

    #[test]
    fn a_small_group_is_interleaved_with_a_big_one() {
        // X: 300 items enqueued first; Y: 10 after. By group they alternate.
        let mut c: Vec<C> = (0..300).map(|i| (i, "x")).collect();
        c.extend((1000..1010).map(|i| (i, "y")));
        let mut outer = Passes::new(0, []);
        let (got, inner) = outer.share_work(
            vec![(t(1), 1, work(Passes::new(0, []), c))],
            20,
            |c| c.0,
            |_| true,
        );
        let ys = got.iter().filter(|c| c.1 == "y").count();
        assert_eq!(ys, 10, "{got:?}");
        assert_eq!(got[0].1, "x", "ties: the older head first");
        let p = inner.get(&t(1)).expect("inner passes moved");
        assert_eq!(p.changed().len(), 2);
        let names: HashMap<Uuid, String> = ["x", "y"].map(|k| (group_id(k), k.to_owned())).into();
        let rows = inner_rows(p, &names);
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows.last().map(|r| (r.0.as_str(), r.2)),
            Some((GROUP_VT, 20))
        );
        // Read back, they stand where they were left.
        let back = inner_passes(rows.iter().map(|r| (r.0.clone(), r.1)));
        assert_eq!(back.pass(group_id("x")), p.pass(group_id("x")));
        assert_eq!(back.vt(), p.vt());
    }

    #[test]
    fn priority_orders_items_inside_a_group_and_ungrouped_is_a_bucket() {
        let c: Vec<C> = vec![(5, "a"), (1, "a"), (2, NO_GROUP), (3, NO_GROUP)];
        let mut c2 = c.clone();
        c2.sort();
        let (got, _) = Passes::new(0, []).share_work(
            vec![(t(1), 1, work(Passes::new(0, []), c2))],
            4,
            |c| c.0,
            |_| true,
        );
        // a's head 1 first, then the bucket's 2; level again, the tie
        // goes to the head first in claim order: the bucket's 3, then 5.
        assert_eq!(got, vec![(1, "a"), (2, ""), (3, ""), (5, "a")]);
    }

    #[test]
    fn the_outer_share_is_per_tenant_whatever_the_groups() {
        // A spreads over 100 groups, B has one: half each.
        let a: Vec<C> = (0..200)
            .map(|i| (i, ["g0", "g1", "g2", "g3"][i as usize % 4]))
            .collect();
        let b: Vec<C> = (0..200).map(|i| (i, "one")).collect();
        let (got, _) = Passes::new(0, []).share_work(
            vec![
                (t(1), 1, work(Passes::new(0, []), a)),
                (t(2), 1, work(Passes::new(0, []), b)),
            ],
            40,
            |c| c.0,
            |_| true,
        );
        let from_b = got.iter().filter(|c| c.1 == "one").count();
        assert_eq!(from_b, 20);
    }

    #[test]
    fn a_refused_candidate_keeps_its_groups_pass_and_an_idle_group_banks_nothing() {
        let c: Vec<C> = vec![(1, "x"), (2, "x"), (3, "y"), (4, "y")];
        let mut inner = Passes::new(0, []);
        inner.give(group_id("x"), 0, PASS_SCALE);
        let (got, moved) = Passes::new(0, []).share_work(
            vec![(t(1), 1, work(inner, c))],
            4,
            |c| c.0,
            |c| c.1 != "x",
        );
        assert_eq!(got, vec![(3, "y"), (4, "y")], "work-conserving");
        let p = moved.get(&t(1)).expect("moved");
        assert_eq!(p.pass(group_id("x")), PASS_SCALE, "x kept its pass");
        // y started twice from 0; its virtual time is 1 stride; a group
        // seen for the first time stands at the virtual time, not at 0.
        assert_eq!(p.vt(), PASS_SCALE);
        assert_eq!(p.pass(group_id("new")), PASS_SCALE);
    }
}
