//! Why a pending item has not started: every reason the queue can name,
//! read from the item, the lane states, the limits in force and the
//! workers' liveness rows (docs/flow-control.md, "Why is it waiting").
//!
//! Invariant: a reason is only ever given from what the store holds now;
//! an empty answer for a pending item means it is claimable and waits for
//! a worker's next claim.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::error::Result;
use crate::item::{Item, Status};
use crate::queue::Queue;
use crate::store::ListFilter;
use crate::store::closures::closure_of;
use crate::store::fairness::groups::{GROUP_VT, NO_GROUP, group_key};
use crate::store::limits::{LimitScope, keys_of};
use crate::store::rates::{Rate, RateSetting, effective, rate_keys_of};

/// The most holders a [`WaitReason::LimitFull`] names.
const HOLDERS_SHOWN: u32 = 20;

/// One reason a pending item has not started.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum WaitReason {
    /// It is not pending: nothing waits.
    NotPending {
        /// Its status.
        status: String,
    },
    /// Its run_at (or retry backoff) is still ahead.
    RunAt {
        /// When it becomes claimable.
        at: DateTime<Utc>,
    },
    /// It waits for dependencies that are not done yet
    /// (docs/dependencies.md).
    Dependencies {
        /// How many are still open.
        open: i64,
        /// Every dependency it names.
        after: Vec<Uuid>,
    },
    /// Its lane is paused.
    LanePaused {
        /// The lane.
        lane: String,
        /// Since when.
        since: DateTime<Utc>,
        /// Who paused it.
        by: Uuid,
    },
    /// A concurrency limit that applies to it is full.
    LimitFull {
        /// The limit (`kind export`, `kind sync per group`, `lane exports`).
        scope: String,
        /// Its concurrency.
        concurrency: u32,
        /// The claims holding its slots (up to 20), oldest first.
        held_by: Vec<Holder>,
    },
    /// An earlier item of its ordered group has not finished: the group
    /// runs in enqueue order.
    EarlierInGroup {
        /// The group.
        group: String,
        /// The earliest item ahead of it that holds it back.
        item: Uuid,
        /// That item's status (pending or retrying, claimed, or dead-
        /// lettered in a group that holds on a dead letter).
        status: String,
    },
    /// Its group (or its kind) is closed until a time: by a handler that
    /// met a saturated far side, or by an operator.
    GroupClosed {
        /// The kind.
        kind: String,
        /// The closed group; `None`: the whole kind is closed.
        #[serde(skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// When it reopens (the store's clock).
        until: DateTime<Utc>,
        /// The item whose handler closed it; `None`: an operator.
        #[serde(skip_serializing_if = "Option::is_none")]
        by_item: Option<Uuid>,
    },
    /// A rate limit that applies to it has no start to give now: it is
    /// claimable at the instant its cell allows.
    RateLimited {
        /// The rate's scope (`kind call`, `kind call per group`, `lane
        /// exports`).
        scope: String,
        /// The rate in force (`10/1s burst 20`).
        rate: String,
        /// When the rate next allows a start (the store's clock).
        next_start: DateTime<Utc>,
    },
    /// Fair share: its tenant has had its share of the lane's recent
    /// starts, and other tenants with due work are served first.
    FairShare {
        /// The lane.
        lane: String,
        /// Its tenant.
        tenant: Uuid,
        /// The starts fair share gave its tenant in the lane (since its
        /// pass row was made).
        started: u64,
        /// The starts fair share gave every tenant in the lane (the rows
        /// kept now).
        lane_started: u64,
        /// Its tenant's weight.
        weight: u32,
    },
    /// Fair share by group: in a lane shared by group, another group of
    /// its tenant with due work has had fewer starts, and is served first.
    FairShareGroup {
        /// The lane.
        lane: String,
        /// Its tenant.
        tenant: Uuid,
        /// Its group (`None`: the bucket of its tenant's ungrouped items).
        group: Option<String>,
        /// The starts fair share gave its group (since its pass row was
        /// made).
        started: u64,
        /// A sibling group served first (`None`: the ungrouped bucket).
        ahead: Option<String>,
    },
    /// No live worker drains its lane, or none of those that do handles
    /// its kind.
    NoWorker {
        /// The lane.
        lane: String,
        /// Its kind, when live workers drain the lane but none handles it.
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
    },
}

/// A claim holding a limit's slot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holder {
    /// The claimed item.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: Uuid,
    /// The worker holding it.
    pub worker: Option<String>,
    /// Since when (its claim).
    pub since: DateTime<Utc>,
}

impl WaitReason {
    /// The reason's name: `not_pending`, `run_at`, `dependencies`, `lane_paused`,
    /// `limit_full`, `earlier_in_group`, `group_closed`, `rate_limited`,
    /// `fair_share`, `fair_share_group` or `no_worker`.
    pub fn code(&self) -> &'static str {
        match self {
            WaitReason::NotPending { .. } => "not_pending",
            WaitReason::RunAt { .. } => "run_at",
            WaitReason::Dependencies { .. } => "dependencies",
            WaitReason::LanePaused { .. } => "lane_paused",
            WaitReason::LimitFull { .. } => "limit_full",
            WaitReason::EarlierInGroup { .. } => "earlier_in_group",
            WaitReason::GroupClosed { .. } => "group_closed",
            WaitReason::RateLimited { .. } => "rate_limited",
            WaitReason::FairShare { .. } => "fair_share",
            WaitReason::FairShareGroup { .. } => "fair_share_group",
            WaitReason::NoWorker { .. } => "no_worker",
        }
    }

    /// The reason as a caller confined to `tenant` may see it (`None`:
    /// every tenant): a full limit names only that tenant's holders (a
    /// kind limit counts every tenant's claims).
    #[must_use]
    pub fn for_tenant(self, tenant: Option<Uuid>) -> WaitReason {
        match (self, tenant) {
            (
                WaitReason::LimitFull {
                    scope,
                    concurrency,
                    mut held_by,
                },
                Some(t),
            ) => {
                held_by.retain(|h| h.tenant_id == t);
                WaitReason::LimitFull {
                    scope,
                    concurrency,
                    held_by,
                }
            }
            // A kind's closure may be another tenant's item's doing.
            (
                WaitReason::GroupClosed {
                    kind,
                    group: None,
                    until,
                    ..
                },
                Some(_),
            ) => WaitReason::GroupClosed {
                kind,
                group: None,
                until,
                by_item: None,
            },
            (w, _) => w,
        }
    }
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitReason::NotPending { status } => write!(f, "not waiting: it is {status}"),
            WaitReason::RunAt { at } => write!(f, "run_at {} is ahead", at.to_rfc3339()),
            WaitReason::Dependencies { open, after } => write!(
                f,
                "waiting for {open} of its {} dependencies to be done",
                after.len()
            ),
            WaitReason::LanePaused { lane, since, .. } => {
                write!(f, "lane {lane} paused since {}", since.to_rfc3339())
            }
            WaitReason::LimitFull {
                scope,
                concurrency,
                held_by,
            } => {
                write!(f, "limit on {scope} full ({concurrency} held")?;
                if let Some(h) = held_by.first() {
                    write!(f, ", the oldest by {} since {}", h.id, h.since.to_rfc3339())?;
                }
                write!(f, ")")
            }
            WaitReason::EarlierInGroup {
                group,
                item,
                status,
            } => write!(
                f,
                "ordered group {group} runs in enqueue order: earlier item {item} is {status}"
            ),
            WaitReason::GroupClosed {
                kind,
                group,
                until,
                by_item,
            } => {
                match group {
                    Some(g) => write!(f, "group {g} closed")?,
                    None => write!(f, "kind {kind} closed")?,
                }
                write!(f, " until {}", until.to_rfc3339())?;
                match by_item {
                    Some(x) => write!(f, " by item {x}"),
                    None => write!(f, " by an operator"),
                }
            }
            WaitReason::RateLimited {
                scope,
                rate,
                next_start,
            } => write!(
                f,
                "rate {rate} on {scope}: next start allowed at {}",
                next_start.to_rfc3339()
            ),
            WaitReason::FairShare {
                lane,
                tenant,
                started,
                lane_started,
                weight,
            } => write!(
                f,
                "fair share: tenant {tenant} (weight {weight}) has started {started} of \
                 lane {lane}'s last {lane_started}; other tenants are due first"
            ),
            WaitReason::FairShareGroup {
                lane,
                tenant,
                group,
                started,
                ahead,
            } => {
                let name = |g: &Option<String>| match g {
                    Some(g) => format!("group {g}"),
                    None => "the ungrouped items".to_owned(),
                };
                write!(
                    f,
                    "fair share by group: {} of tenant {tenant} has started {started} in lane \
                     {lane}; {} of the tenant has started fewer and is due first",
                    name(group),
                    name(ahead)
                )
            }
            WaitReason::NoWorker { lane, kind: None } => {
                write!(f, "no live worker drains lane {lane}")
            }
            WaitReason::NoWorker {
                lane,
                kind: Some(k),
            } => write!(f, "no live worker of lane {lane} handles kind {k}"),
        }
    }
}

impl Queue {
    /// Why `item` (as read just now) has not started; empty when nothing
    /// holds it back (it waits for the next claim).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn why_waiting(&self, item: &Item) -> Result<Vec<WaitReason>> {
        if item.status != Status::Pending {
            return Ok(vec![WaitReason::NotPending {
                status: item.status.as_str().to_owned(),
            }]);
        }
        let mut out = Vec::new();
        let now = self.store().db_now().await?;
        if crate::store::links::is_waiting_at(item.available_at) {
            let links = self.links(item.tenant_id, item.id).await?;
            out.push(WaitReason::Dependencies {
                open: links.waiting_on,
                after: links.after,
            });
        } else if item.available_at > now {
            out.push(WaitReason::RunAt {
                at: item.available_at,
            });
        }
        if let Some(l) = self
            .store()
            .lane_list()
            .await?
            .into_iter()
            .find(|l| l.lane == item.lane && l.paused)
        {
            out.push(WaitReason::LanePaused {
                lane: l.lane,
                since: l.changed_at,
                by: l.changed_by,
            });
        }
        for usage in self.store().limit_usage().await? {
            let one = std::slice::from_ref(&usage.setting);
            let keys = keys_of(
                one,
                &item.lane,
                &item.kind,
                item.tenant_id,
                item.group.as_deref(),
            );
            if keys.is_empty() {
                continue;
            }
            if usage.setting.ordered
                && let Some(group) = &item.group
                && let Some(b) = self
                    .store()
                    .order_blocker(item, usage.setting.on_dead_letter)
                    .await?
            {
                out.push(WaitReason::EarlierInGroup {
                    group: group.clone(),
                    item: b.id,
                    status: if b.status == Status::Failed {
                        "dead-lettered (the group holds on a dead letter)".to_owned()
                    } else {
                        b.status.as_str().to_owned()
                    },
                });
            }
            let held_by = self.holders(&usage.setting.scope, item).await?;
            if held_by.len() as u64 >= u64::from(usage.setting.concurrency) {
                out.push(WaitReason::LimitFull {
                    scope: usage.setting.scope.to_string(),
                    concurrency: usage.setting.concurrency,
                    held_by: held_by.into_iter().take(HOLDERS_SHOWN as usize).collect(),
                });
            }
        }
        let closures = self.store().closures().await?;
        if let Some(c) = closure_of(
            &closures,
            &item.kind,
            item.tenant_id,
            item.group.as_deref(),
            now,
        ) {
            out.push(WaitReason::GroupClosed {
                kind: c.kind.clone(),
                group: c.group.clone(),
                until: c.until,
                by_item: c.closed_by_item,
            });
        }
        out.extend(self.rate_limited(item).await?);
        out.extend(self.fair_share_wait(item).await?);
        out.extend(self.fair_group_wait(item).await?);
        let workers = self.store().worker_list().await?;
        let of_lane: Vec<_> = workers
            .iter()
            .filter(|w| w.is_live() && w.lanes.contains(&item.lane))
            .collect();
        if !of_lane.iter().any(|w| w.handles(&item.kind)) {
            out.push(WaitReason::NoWorker {
                lane: item.lane.clone(),
                kind: (!of_lane.is_empty()).then(|| item.kind.clone()),
            });
        }
        Ok(out)
    }

    /// Whether fair share serves other tenants of `item`'s lane first: the
    /// lane shares, and another tenant with due work there has a lower pass
    /// than `item`'s tenant (lifted to the lane's virtual time).
    async fn fair_share_wait(&self, item: &Item) -> Result<Option<WaitReason>> {
        let settings = self.store().fair_settings().await?;
        if !settings.on(&item.lane) {
            return Ok(None);
        }
        let shares = self.store().fair_shares().await?;
        let lane: Vec<_> = shares.iter().filter(|s| s.lane == item.lane).collect();
        let Some(mine) = lane.iter().find(|s| s.tenant == item.tenant_id) else {
            return Ok(None);
        };
        let behind = lane
            .iter()
            .any(|s| s.tenant != item.tenant_id && s.waiting > 0 && s.pass < mine.pass);
        if !behind {
            return Ok(None);
        }
        Ok(Some(WaitReason::FairShare {
            lane: item.lane.clone(),
            tenant: item.tenant_id,
            started: mine.started,
            lane_started: lane.iter().map(|s| s.started).sum(),
            weight: mine.weight,
        }))
    }

    /// Whether, in a lane shared by group, a sibling group of `item`'s
    /// tenant with due work has a lower pass than `item`'s group (both
    /// lifted to the tenant's group virtual time): that group is served
    /// first. A sibling is looked at only if it has a pass row (one that
    /// never started stands at the virtual time, never below).
    async fn fair_group_wait(&self, item: &Item) -> Result<Option<WaitReason>> {
        let settings = self.store().fair_settings().await?;
        if !settings.by_group(&item.lane) {
            return Ok(None);
        }
        let rows = self
            .store()
            .fair_group_passes(&item.lane, item.tenant_id)
            .await?;
        let vt = rows.iter().find(|r| r.0 == GROUP_VT).map_or(0, |r| r.1);
        let key = group_key(item.group.as_deref());
        let (mine, started) = rows
            .iter()
            .find(|r| r.0 == key)
            .map_or((vt, 0), |r| (r.1.max(vt), r.2));
        let mut ahead: Vec<(i64, &str)> = rows
            .iter()
            .filter(|r| r.0 != GROUP_VT && r.0 != key && r.1.max(vt) < mine)
            .map(|r| (r.1.max(vt), r.0.as_str()))
            .collect();
        ahead.sort_unstable();
        let now = Utc::now();
        for (_, sibling) in ahead {
            let filter = ListFilter {
                tenant_id: Some(item.tenant_id),
                status: Some(Status::Pending),
                lane: Some(item.lane.clone()),
                group: (sibling != NO_GROUP).then(|| sibling.to_owned()),
                limit: 100,
                ..Default::default()
            };
            let due = self
                .store()
                .item_list(&filter)
                .await?
                .iter()
                .any(|i| i.available_at <= now && group_key(i.group.as_deref()) == sibling);
            if due {
                return Ok(Some(WaitReason::FairShareGroup {
                    lane: item.lane.clone(),
                    tenant: item.tenant_id,
                    group: item.group.clone(),
                    started,
                    ahead: (sibling != NO_GROUP).then(|| sibling.to_owned()),
                }));
            }
        }
        Ok(None)
    }

    /// The rates in force whose cell for `item` has no start to give now,
    /// each with when it next allows one (read on the store's clock).
    async fn rate_limited(&self, item: &Item) -> Result<Vec<WaitReason>> {
        let rates = effective(&self.store().rate_settings().await?);
        let keyed: Vec<(&RateSetting, String, Rate)> = rates
            .iter()
            .flat_map(|r| {
                rate_keys_of(
                    std::slice::from_ref(r),
                    &item.lane,
                    &item.kind,
                    item.tenant_id,
                    item.group.as_deref(),
                )
                .into_iter()
                .map(move |(k, rate)| (r, k, rate))
            })
            .collect();
        if keyed.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = keyed.iter().map(|(_, k, _)| k.clone()).collect();
        let (now, cells) = self.store().rate_cells(&keys).await?;
        let mut out = Vec::new();
        for (setting, key, rate) in keyed {
            if let Some((_, tat)) = cells.iter().find(|(k, _)| *k == key)
                && rate.holds_back(*tat, now)
            {
                out.push(WaitReason::RateLimited {
                    scope: setting.scope.to_string(),
                    rate: rate.to_string(),
                    next_start: rate.next_start(*tat),
                });
            }
        }
        Ok(out)
    }

    /// The claims holding `scope`'s slots that `item` would need, oldest
    /// claim first.
    async fn holders(&self, scope: &LimitScope, item: &Item) -> Result<Vec<Holder>> {
        let mut filter = ListFilter {
            status: Some(Status::Claimed),
            limit: 100_000,
            ..Default::default()
        };
        match scope {
            LimitScope::Lane(l) => filter.lane = Some(l.clone()),
            LimitScope::Kind(k) => filter.kind = Some(k.clone()),
            LimitScope::KindPerGroup(k) => {
                filter.kind = Some(k.clone());
                filter.group.clone_from(&item.group);
                filter.tenant_id = Some(item.tenant_id);
            }
        }
        let mut held: Vec<Holder> = self
            .store()
            .item_list(&filter)
            .await?
            .into_iter()
            .map(|i| Holder {
                id: i.id,
                tenant_id: i.tenant_id,
                worker: i.claimed_by,
                since: i.updated_at,
            })
            .collect();
        held.sort_by_key(|h| h.since);
        Ok(held)
    }
}
