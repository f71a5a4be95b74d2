//! The five papers, one folder each, each a [`Paper`] registered in one table,
//! [`PAPERS`].
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

use crate::error::{invalid, Error, Result};
use crate::paper::Paper;
use crate::scenario::{PaperValue, Scenario};

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

/// Checks scenario `sc` whole: its own fields ([`Scenario::validate`]), its `analyses`
/// (each a paper's name) and its paper values over several mixes (each by its paper,
/// [`validate_mixes_value`]).
pub fn validate(sc: &Scenario) -> Result<()> {
    sc.validate()?;
    if !sc.mixes.is_empty() {
        for pv in &sc.paper {
            validate_mixes_value(pv, sc).map_err(Error::Invalid)?;
        }
    }
    if let Some(a) = sc.analyses.iter().find(|a| find(a).is_none()) {
        return Err(invalid!(
            "unknown analysis '{a}'; known: {}",
            names().join(", ")
        ));
    }
    Ok(())
}
