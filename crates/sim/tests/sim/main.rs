//! The simulator's integration tests, one test binary: one module per subject, each
//! running the real simulation. One binary rather than one per file, so that the test
//! harness spreads every slow test over the CPUs (cargo runs test binaries one after
//! another, and a binary whose last test runs alone leaves the other CPUs idle) and the
//! crate is linked once. Run one subject with `cargo test -p cachesched-sim --test sim
//! affinity::`.

mod affinity;
mod bus;
mod cachefair;
mod casc;
mod clustering;
mod fuzz_parsers;
mod golden;
mod kernel;
mod multiprogram;
mod slow_tier;
mod solaris;
mod timeslice;
mod timing;
mod trace_threads;
