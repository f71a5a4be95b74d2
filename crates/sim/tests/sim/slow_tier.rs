//! The slow tier: the tests that reproduce a paper's effect over several seeds or long
//! windows (one to four minutes each in the test profile, two thirds of this binary's
//! time; where a paper's effect is checked seed by seed, the first seed stays in the
//! default tier) are `#[ignore]`d, so that the default test command stays within the
//! project's CI budget, and run on demand:
//!
//! ```sh
//! cargo test --release -p cachesched-sim --test sim -- --ignored
//! ```
//!
//! They cannot fall behind the model unnoticed. The golden results (`golden.rs`) fail
//! on any change to what the simulator computes until [`MODEL_VERSION`] is raised, and
//! the test below fails until the slow tier has passed with the raised version:
//! whoever raises it runs the command above and, once every test passes, writes the
//! version here.

use cachesched_sim::MODEL_VERSION;

/// The model version with which every ignored test of this binary last passed (version
/// 1: the command above, 15 passed in 1,217 s on 2 cores, 2026-12-04).
const SLOW_TIER_PASSED_WITH: u32 = 1;

/// Fails when the model version moved without the slow tier being run with it.
#[test]
fn slow_tier_passed_with_this_model_version() {
    assert_eq!(
        SLOW_TIER_PASSED_WITH, MODEL_VERSION,
        "the model version is {MODEL_VERSION} but the slow tier last passed with \
         {SLOW_TIER_PASSED_WITH}: run `cargo test --release -p cachesched-sim --test sim \
         -- --ignored` and, once every test passes, set SLOW_TIER_PASSED_WITH in \
         crates/sim/tests/sim/slow_tier.rs"
    );
}
