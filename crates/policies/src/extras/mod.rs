//! Policies beyond the five papers' schedulers: a demonstration policy ([`demo`]) and
//! two comparison points, forced migration (the affinity paper's low affinity,
//! [`migrate`]) and process-to-LLC aggregation without sharing detection (beside the
//! clustering paper, [`process_llc`]).

pub mod demo;
pub mod migrate;
pub mod process_llc;
