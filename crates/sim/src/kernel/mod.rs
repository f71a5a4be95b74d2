//! The simulated operating-system kernel: the baseline scheduling classes.

pub mod class;
