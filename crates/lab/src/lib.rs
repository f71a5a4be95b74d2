//! cachesched's laboratory: scenario files, their plans and runs (a local pool of
//! workers over the run cache), statistics over seeds, checks of the measured windows,
//! the five papers' analyses and the reports, plots and documentation blocks made
//! from them.
//!
//! The path of a run: a scenario file ([`experiment::parse`], [`scenario`]) → its planned runs
//! ([`experiment::plan_file`]) → the run cache or the simulator
//! ([`runner::cached_or_run`]) → results with their solo references
//! ([`caches::solo`]) → checks ([`checks::checks`]), statistics over seeds ([`stats`]) → a report ([`report`],
//! [`reproduce::reproduce_papers`], with each paper's section from [`papers`]) →
//! Markdown, CSV, SVG ([`svg`]) and the docs blocks ([`docs_block`]).
//!
//! Beside the simulated reproductions, two papers have a study on the real host, by
//! time with real processes ([`host_study`]; `papers::affinity::host`,
//! `papers::timeslice::host`).
//!
//! Every fallible function returns [`Result`], whose [`Error`] says what failed.

pub mod bbv;
pub mod bench;
pub mod caches;
pub mod checks;
pub mod decompose;
pub mod docs_block;
pub mod error;
pub mod experiment;
pub mod files;
pub mod host_study;
pub mod interrupt;
pub mod metrics;
pub mod mrc;
pub mod paper;
pub mod papers;
pub mod plan;
pub mod positions;
pub mod real;
pub mod report;
pub mod reproduce;
pub mod results;
pub mod runner;
pub mod scenario;
pub mod seeds;
pub mod slurm;
pub mod stats;
pub mod svg;
pub mod tracer;
pub mod traces;

pub use error::{Error, Result};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod golden;
