//! The simulated hardware: cache instances, the memory system (hierarchy, coherence,
//! bus), core timing and the machine descriptions with their presets.

pub mod cache;
pub mod core;
pub mod machine;
pub mod memory;
pub mod prefetch;
