//! One module per command: argument parsing and calls into the libraries.

pub mod bench;
pub mod burn;
pub mod cluster;
pub mod decompose;
pub mod experiment;
pub mod info;
pub mod mrc;
pub mod real;
pub mod replay;
pub mod reproduce;
pub mod run;
pub mod simulate;
pub mod study;
