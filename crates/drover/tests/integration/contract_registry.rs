//! Every contract case is in the suite every backend runs: each
//! `pub async fn <case>(h: &Harness)` of the contract modules is listed in
//! one of the suite macros `full_contract_suite!` expands, so a case written
//! but never registered (and so run by no backend) fails here.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

/// The contract modules: the store's own cases and those that drive a role.
const SOURCES: &[(&str, &str)] = &[
    (
        "store/contract/mod.rs",
        include_str!("../../../drover-store/src/contract/mod.rs"),
    ),
    (
        "store/contract/access.rs",
        include_str!("../../../drover-store/src/contract/access.rs"),
    ),
    (
        "store/contract/claims.rs",
        include_str!("../../../drover-store/src/contract/claims.rs"),
    ),
    (
        "store/contract/events.rs",
        include_str!("../../../drover-store/src/contract/events.rs"),
    ),
    (
        "store/contract/lanes.rs",
        include_str!("../../../drover-store/src/contract/lanes.rs"),
    ),
    (
        "store/contract/listing.rs",
        include_str!("../../../drover-store/src/contract/listing.rs"),
    ),
    (
        "store/contract/operations.rs",
        include_str!("../../../drover-store/src/contract/operations.rs"),
    ),
    (
        "store/contract/orchestration.rs",
        include_str!("../../../drover-store/src/contract/orchestration.rs"),
    ),
    (
        "store/contract/orchestration/bounds.rs",
        include_str!("../../../drover-store/src/contract/orchestration/bounds.rs"),
    ),
    (
        "store/contract/rates.rs",
        include_str!("../../../drover-store/src/contract/rates.rs"),
    ),
    (
        "store/contract/reconcile.rs",
        include_str!("../../../drover-store/src/contract/reconcile.rs"),
    ),
    (
        "store/contract/schedule.rs",
        include_str!("../../../drover-store/src/contract/schedule.rs"),
    ),
    (
        "store/contract/sweep.rs",
        include_str!("../../../drover-store/src/contract/sweep.rs"),
    ),
    (
        "store/contract/vacuum.rs",
        include_str!("../../../drover-store/src/contract/vacuum.rs"),
    ),
    (
        "store/contract/wakeups.rs",
        include_str!("../../../drover-store/src/contract/wakeups.rs"),
    ),
    (
        "store/contract/writes.rs",
        include_str!("../../../drover-store/src/contract/writes.rs"),
    ),
    (
        "testing/role_contract/mod.rs",
        include_str!("../../src/testing/role_contract/mod.rs"),
    ),
    (
        "testing/role_contract/outbox.rs",
        include_str!("../../src/testing/role_contract/outbox.rs"),
    ),
    (
        "testing/role_contract/outbox_rules.rs",
        include_str!("../../src/testing/role_contract/outbox_rules.rs"),
    ),
    (
        "testing/role_contract/projector.rs",
        include_str!("../../src/testing/role_contract/projector.rs"),
    ),
];

#[test]
fn every_contract_case_is_registered_in_a_suite_macro() {
    // A macro list names a case alone on its line: `    case_name,`.
    let listed: std::collections::BTreeSet<&str> = SOURCES
        .iter()
        .flat_map(|(_, src)| src.lines())
        .filter_map(|l| l.trim().strip_suffix(','))
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let mut cases = 0;
    for (file, src) in SOURCES {
        for line in src.lines() {
            let Some(rest) = line.strip_prefix("pub async fn ") else {
                continue;
            };
            let Some((name, args)) = rest.split_once('(') else {
                continue;
            };
            if !args.starts_with("h: &Harness)") {
                continue;
            }
            cases += 1;
            assert!(
                listed.contains(name),
                "contract case {name} ({file}) is in no suite macro: no backend runs it"
            );
        }
    }
    assert!(
        cases > 100,
        "found only {cases} contract cases: is the scan broken?"
    );
}
