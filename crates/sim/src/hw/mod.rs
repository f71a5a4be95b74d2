//! The simulated hardware: cache instances, the memory system (hierarchy, coherence,
//! bus) and the machine descriptions with their presets.

pub mod cache;
pub mod machine;
pub mod memory;
