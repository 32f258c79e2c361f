//! The checker on hand-built histories: each case is a few writes and runs
//! whose answer is known.

use super::*;

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// The write that claims `item` under claim `seq` at `at`, lease `at + 2000`.
fn claimed(item: u128, seq: i64, at: Micros) -> Transition {
    Transition {
        item: id(item),
        old_status: Some("pending".into()),
        new_status: Some("claimed".into()),
        old_seq: Some(seq - 1),
        new_seq: Some(seq),
        new_lease: Some(at + 2000),
        at,
    }
}

/// The write that ends `item`'s claim `seq` at `at`, leaving `status`.
fn ended(item: u128, seq: i64, at: Micros, status: &str) -> Transition {
    Transition {
        item: id(item),
        old_status: Some("claimed".into()),
        new_status: Some(status.into()),
        old_seq: Some(seq),
        new_seq: Some(seq),
        new_lease: None,
        at,
    }
}

fn run(item: u128, group: &str, token: i64, start: Micros, end: Option<Micros>) -> Run {
    Run {
        item: id(item),
        group: Some(group.into()),
        token,
        start,
        end,
    }
}

/// A history of `transitions` (sorted by time: the order they were
/// written) of items 1..=9, item n in group `groups[n]`.
fn history(mut transitions: Vec<Transition>, groups: &[(u128, &str)]) -> History {
    transitions.sort_by_key(|t| t.at);
    let groups: HashMap<Uuid, Option<String>> = groups
        .iter()
        .map(|(n, g)| (id(*n), Some((*g).to_owned())))
        .collect();
    History::from_transitions(&transitions, &groups)
}

const LIMITS: LimitConfig = LimitConfig {
    kind: 2,
    per_group: 1,
    check_order: true,
};

#[test]
fn a_claim_past_the_kind_limit_is_reported_and_a_tie_is_not_an_overlap() {
    let h = history(
        vec![
            claimed(1, 1, 10),
            claimed(2, 1, 20),
            claimed(3, 1, 30),
            ended(1, 1, 50, "done"),
            ended(2, 1, 60, "done"),
            ended(3, 1, 70, "done"),
            // Claimed at the instant 2 ended: 3 and 4 hold, not three.
            claimed(4, 1, 60),
            ended(4, 1, 80, "done"),
        ],
        &[(1, "a"), (2, "b"), (3, "c"), (4, "d")],
    );
    let f = check(&h, &LIMITS);
    assert_eq!(f.claims, 4);
    assert_eq!(f.kind_max_held, 3);
    assert_eq!(f.beyond_kind_limit, 1, "{f:?}");
    assert_eq!(f.beyond_group_limit, 0, "{f:?}");
}

#[test]
fn two_claims_and_two_runs_of_one_group_at_once_are_reported() {
    let h = History {
        runs: vec![run(1, "g", 1, 12, Some(40)), run(2, "g", 1, 22, Some(45))],
        ..history(
            vec![
                claimed(1, 1, 10),
                claimed(2, 1, 20),
                ended(1, 1, 41, "done"),
                ended(2, 1, 46, "done"),
            ],
            &[(1, "g"), (2, "g")],
        )
    };
    let f = check(&h, &LIMITS);
    assert_eq!(f.group_max_held, 2);
    assert_eq!(f.beyond_group_limit, 1, "{f:?}");
    assert_eq!(f.group_overlaps, 1, "{f:?}");
    assert_eq!(f.lease_loss_overlaps, 0, "{f:?}");
}

#[test]
fn an_item_started_before_an_earlier_one_of_its_group_was_final_is_out_of_order() {
    let order = vec![
        Queued {
            item: id(1),
            group: "g".into(),
            pos: 0,
        },
        Queued {
            item: id(2),
            group: "g".into(),
            pos: 1,
        },
        Queued {
            item: id(3),
            group: "g".into(),
            pos: 2,
        },
    ];
    // 1 is handed back (its worker died) and 2 runs before 1 is done;
    // 3 waits for both.
    let h = History {
        runs: vec![
            run(1, "g", 1, 11, None),
            run(2, "g", 1, 31, Some(38)),
            run(1, "g", 2, 42, Some(48)),
            run(3, "g", 1, 52, Some(58)),
        ],
        order,
        ..history(
            vec![
                claimed(1, 1, 10),
                ended(1, 1, 25, "pending"),
                claimed(2, 1, 30),
                ended(2, 1, 39, "done"),
                claimed(1, 2, 40),
                ended(1, 2, 49, "done"),
                claimed(3, 1, 50),
                ended(3, 1, 59, "done"),
            ],
            &[(1, "g"), (2, "g"), (3, "g")],
        )
    };
    let f = check(&h, &LIMITS);
    assert_eq!(f.out_of_order, Some(1), "{f:?}");
    assert_eq!(
        f.group_overlaps, 0,
        "a killed run is bounded by its claim: {f:?}"
    );
    assert_eq!(f.beyond_limit(), 0, "{f:?}");
    let unchecked = check(
        &h,
        &LimitConfig {
            check_order: false,
            ..LIMITS
        },
    );
    assert_eq!(unchecked.out_of_order, None);
}

/// Item 1's worker stops past its lease: the sweep hands the claim back at
/// 30, item 2 of the same group is claimed at 35 and runs 36..50 while the
/// stopped run is still alive; resumed, it is dropped at 45.
fn lease_loss(second_claim_at: Micros) -> History {
    History {
        runs: vec![
            run(1, "g", 1, 11, Some(45)),
            run(2, "g", 1, second_claim_at + 1, Some(50)),
        ],
        ..history(
            vec![
                claimed(1, 1, 10),
                ended(1, 1, 30, "pending"),
                claimed(2, 1, second_claim_at),
                ended(2, 1, 52, "done"),
                claimed(1, 2, 60),
                ended(1, 2, 70, "done"),
            ],
            &[(1, "g"), (2, "g")],
        )
    }
}

#[test]
fn an_overlap_inside_a_lease_loss_window_is_allowed() {
    let f = check(&lease_loss(35), &LIMITS);
    assert_eq!(f.group_overlaps, 0, "{f:?}");
    assert_eq!(f.lease_loss_overlaps, 1, "{f:?}");
    assert_eq!(f.beyond_limit(), 0, "{f:?}");
}

#[test]
fn an_overlap_that_begins_before_the_claim_was_handed_back_is_not() {
    // Item 2 claimed at 25, while item 1's claim still held the slot.
    let f = check(&lease_loss(25), &LIMITS);
    assert_eq!(f.group_overlaps, 1, "{f:?}");
    assert_eq!(f.beyond_group_limit, 1, "{f:?}");
}

#[test]
fn a_run_that_outlives_a_claim_its_own_completion_ended_gets_no_window() {
    let mut h = lease_loss(35);
    // The history says claim 1 ended done at 30, yet its run went on to 45.
    h.claims[0].ended_as = Some("done".into());
    let f = check(&h, &LIMITS);
    assert_eq!(f.group_overlaps, 1, "{f:?}");
}

#[test]
fn renewals_extend_a_claim_and_a_claim_without_an_end_holds_to_its_lease() {
    let renew = |at: Micros| Transition {
        old_status: Some("claimed".into()),
        old_seq: Some(1),
        ..claimed(1, 1, at)
    };
    let h = history(
        vec![
            claimed(1, 1, 10),
            renew(700),
            renew(1400),
            // Item 2 of the same group claimed while 1's lease runs: 1 has
            // no end in the history, so it holds to its last lease (3400).
            claimed(2, 1, 3000),
            ended(2, 1, 3100, "done"),
            claimed(3, 1, 3500),
            ended(3, 1, 3600, "done"),
        ],
        &[(1, "g"), (2, "g"), (3, "g")],
    );
    assert_eq!(h.claims.len(), 3, "renewals are not claims: {:?}", h.claims);
    assert_eq!(h.claims[0].lease, Some(3400));
    let f = check(&h, &LIMITS);
    assert_eq!(f.unended_claims, 1);
    assert_eq!(f.beyond_group_limit, 1, "{f:?}");
    assert_eq!(h.finals.len(), 2);
}
