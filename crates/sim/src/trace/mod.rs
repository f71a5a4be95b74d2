//! Real programs' memory traces and the offline tools over them: the compact binary
//! trace format ([`format`](mod@format), re-exported here), cachegrind-exact replay of lackey and
//! binary traces ([`replay`]) and miss-ratio curves ([`mrc`]).

pub mod format;
pub mod mrc;
pub mod replay;

pub use format::*;
