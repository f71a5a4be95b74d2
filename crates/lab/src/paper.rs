//! What a paper adds to a reproduction: the [`Paper`] trait every folder of
//! [`crate::papers`] implements, and [`AcrossFiles`] for a comparison across a paper's
//! scenario files.

use crate::error::Result;
use crate::scenario::{Job, MixRuns, PaperValue, Scenario};
use cachesched_sim::RunResult;
use std::path::Path;

/// A paper's own part of a reproduction: the checks of its values and the measures it
/// adds to the report of a scenario file that names it in `analyses`. Every method but
/// [`Paper::name`] has a default that adds nothing.
pub trait Paper: Sync {
    /// The paper's name (its scenario directory, command, document and `analyses` key).
    fn name(&self) -> &'static str;

    /// What `reproduce NAME` runs, in a sentence or two (its line in
    /// `cachesched reproduce --help`).
    fn about(&self) -> &'static str;

    /// Checks one of the paper's values (`[[paper]]` of a scenario file of several mixes
    /// naming this paper): `None` if the paper has no check of its own for such files
    /// (the cache-fair paper's then applies, [`crate::papers::validate_mixes_value`]).
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
