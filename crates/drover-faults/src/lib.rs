//! drover's fault suite, in the style of Jepsen's total-queue checker.
//!
//! Every item carries a unique `op_id`; the fault worker's handler records
//! each start (unfenced) and writes its effect through a fenced write; a
//! trigger records every update of a queue row. From those the [`checker`]
//! computes the [`checker::Figures`]: lost items, duplicate completions,
//! stale writes accepted, duplicate executions.
//!
//! | module | owns |
//! |---|---|
//! | [`effects`] | the effect tables, the trigger, the fenced write |
//! | [`worker`] | the fault worker binary's body |
//! | [`http_worker`] | a worker over HTTP (the protocol of docs/http.md) and its binary's body |
//! | [`checker`] | the figures |
//! | [`deps_checker`] | dependants started before their dependencies were done; batch callbacks not enqueued once |
//! | [`limits_checker`] | the history checker of concurrency limits, groups and their order |
//! | [`projector`] | the projector process killed by the projector scenario |
//! | [`procs`] | spawning, killing, pausing and stopping worker processes |
//! | [`proxy`] | a TCP proxy that cuts or black-holes connections |
//! | [`scale`] | the reduced and full sizes (`DROVER_FAULT_FULL=1`) |

pub mod checker;
pub mod deps_checker;
pub mod effects;
pub mod http_worker;
pub mod limits_checker;
pub mod procs;
pub mod projector;
pub mod proxy;
pub mod rates_checker;
pub mod scale;
pub mod worker;
