//! The five papers' schedulers, one module each.

pub mod affinity;
pub mod cachefair;
pub mod casc;
pub mod clustering;
pub mod timeslice;
