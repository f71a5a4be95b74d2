//! cachesched's laboratory: scenario files, their plans and runs (a local pool of
//! workers over the run cache), statistics over seeds, checks of the measured windows,
//! the five papers' analyses and the reports, plots and documentation blocks made
//! from them.
//!
//! The path of a run: a scenario file ([`experiment::parse`]) → its planned runs
//! ([`experiment::plan_file`]) → the run cache or the simulator
//! ([`experiment::cached_or_run`]) → results with their solo references
//! ([`caches::solo`]) → checks ([`experiment::checks`]) → a report
//! ([`reproduce::reproduce_papers`], with each paper's section from [`papers`]) →
//! Markdown, CSV, SVG ([`svg`]) and the docs blocks ([`docs_block`]).

pub mod caches;
pub mod docs_block;
pub mod experiment;
pub mod files;
pub mod interrupt;
pub mod paper;
pub mod papers;
pub mod plan;
pub mod positions;
pub mod real;
pub mod reproduce;
pub mod seeds;
pub mod svg;
pub mod traces;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod golden;
