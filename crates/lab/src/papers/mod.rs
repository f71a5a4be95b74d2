//! The five papers, one folder each, behind one [`Paper`] trait and registered in one
//! table, [`PAPERS`].
//!
//! A paper's name is everything that finds it: the directory of its scenario files
//! (`experiments/NAME/`), the command that reproduces it (`cachesched reproduce NAME`),
//! its document (`docs/NAME.md`, with one generated block per scenario file) and the
//! `analyses = ["NAME"]` key by which a scenario file asks for the paper's own measures.
//! Adding a paper is a folder here with a type implementing [`Paper`], and one row of
//! [`PAPERS`].

pub mod affinity;
pub mod cachefair;
pub mod casc;
pub mod clustering;
pub mod timeslice;

use crate::experiment::{Job, MixRuns, Scenario};
use crate::paper::PaperValue;
use anyhow::Result;
use cachesched_sim::RunResult;
use std::path::Path;

/// A paper's own part of a reproduction: the checks of its values and the measures it
/// adds to the report of a scenario file that names it in `analyses`. Every method but
/// [`Paper::name`] has a default that adds nothing.
pub trait Paper: Sync {
    /// The paper's name (its scenario directory, command, document and `analyses` key).
    fn name(&self) -> &'static str;

    /// Checks one of the paper's values (`[[paper]]` of a scenario file of several mixes
    /// naming this paper): `None` if the paper has no check of its own for such files
    /// (the cache-fair paper's then applies, [`validate_mixes_value`]).
    fn validate_mixes_value(&self, _pv: &PaperValue, _sc: &Scenario) -> Option<Result<(), String>> {
        None
    }

    /// The paper's section over a scenario file of one mix: its jobs and results, plots
    /// written to `out`.
    fn section(
        &self,
        _sc: &Scenario,
        _jobs: &[Job],
        _runs: &[RunResult],
        _out: &Path,
    ) -> Result<String> {
        Ok(String::new())
    }

    /// The paper's section over a scenario file of several mixes (`done`: each mix's
    /// label, scenario, jobs and results), plots written to `out`.
    fn mixes_section(&self, _sc: &Scenario, _done: &[MixRuns], _out: &Path) -> Result<String> {
        Ok(String::new())
    }

    /// A comparison across the paper's scenario files `scs`, if it makes one of them
    /// (its docs block is `reproduce NAME/across-files`); `None` otherwise.
    fn across_files(&self, _scs: &[&Scenario]) -> Option<Box<dyn AcrossFiles>> {
        None
    }
}

/// A comparison across a paper's scenario files, gathered one file at a time (a file's
/// runs are not kept once its own section is written).
pub trait AcrossFiles {
    /// Takes what the comparison needs of scenario file `stem`'s mixes.
    fn add(&mut self, stem: &str, sc: &Scenario, done: &[MixRuns]);
    /// The files it holds, in the order added.
    fn stems(&self) -> Vec<String>;
    /// The section, made by `command`, plots written to `out`.
    fn section(&self, command: &str, out: &Path) -> Result<String>;
}

/// Every paper, in the order their sections appear in a report.
pub static PAPERS: &[&dyn Paper] = &[
    &casc::Casc,
    &cachefair::Cachefair,
    &clustering::Clustering,
    &affinity::Affinity,
    &timeslice::Timeslice,
];

/// The paper named `name`.
pub fn find(name: &str) -> Option<&'static dyn Paper> {
    PAPERS.iter().copied().find(|p| p.name() == name)
}

/// Every paper's name, in [`PAPERS`]'s order.
pub fn names() -> Vec<&'static str> {
    PAPERS.iter().map(|p| p.name()).collect()
}

/// The papers scenario `sc` names in `analyses`, in [`PAPERS`]'s order.
pub fn named_by(sc: &Scenario) -> impl Iterator<Item = &'static dyn Paper> + '_ {
    PAPERS
        .iter()
        .copied()
        .filter(|p| sc.analyses.iter().any(|a| a == p.name()))
}

/// Checks paper value `pv` of `sc`, a scenario of several mixes: by the first paper `sc`
/// names that has a check of its own, else by the cache-fair paper's (its measures are
/// the generic ones of a file of several mixes).
pub fn validate_mixes_value(pv: &PaperValue, sc: &Scenario) -> Result<(), String> {
    named_by(sc)
        .find_map(|p| p.validate_mixes_value(pv, sc))
        .unwrap_or_else(|| cachefair::validate_paper_value(pv, sc))
}
