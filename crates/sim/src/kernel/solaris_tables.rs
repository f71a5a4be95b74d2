//! The default dispatch tables of Solaris' time-sharing (TS) and fixed-priority (FX)
//! classes, as illumos ships them (`usr/src/uts/common/disp/ts_dptbl.c`,
//! `config_ts_dptbl[]`; `fx_dptbl.c`, `config_fx_dptbl[]`). Quanta are in clock ticks
//! of 10 ms (`HZ_DEFAULT` 100).

/// Milliseconds per clock tick (hz = 100).
pub const TICK_MS: u64 = 10;

/// Highest TS user-mode level.
pub const TS_MAX_LEVEL: i32 = 59;

/// Highest FX level.
pub const FX_MAX_LEVEL: i32 = 60;

/// Priorities below this must have equal run-queue lengths on neighbouring CPUs
/// (`RUNQ_MATCH_PRI`); from it on a difference up to [`RUNQ_MAX_DIFF`] is tolerated.
pub const RUNQ_MATCH_PRI: i32 = 16;

/// Largest run-queue length difference `setbackdq` tolerates at priorities from
/// [`RUNQ_MATCH_PRI`] on (`RUNQ_MAX_DIFF`).
pub const RUNQ_MAX_DIFF: usize = 2;

/// One row of `ts_dptbl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsRow {
    /// Time quantum in ticks (`ts_quantum`).
    pub quantum_ticks: u64,
    /// Level after a quantum expires (`ts_tqexp`).
    pub tqexp: i32,
    /// Level on return from sleep or from the kernel once a `ts_update` has passed
    /// since the last quantum (`ts_slpret`).
    pub slpret: i32,
    /// `ts_update` passes a thread may go without a new quantum before it is raised
    /// (`ts_maxwait`).
    pub maxwait: u32,
    /// Level given by `ts_update` to a thread that waited too long (`ts_lwait`).
    pub lwait: i32,
}

/// The default TS row of `level` (clamped to 0..=59).
pub fn ts_row(level: i32) -> TsRow {
    let l = level.clamp(0, TS_MAX_LEVEL);
    let quantum_ticks = match l {
        0..=9 => 20,
        10..=19 => 16,
        20..=29 => 12,
        30..=39 => 8,
        40..=58 => 4,
        _ => 2,
    };
    let tqexp = match l {
        45 => 35,
        46 => 36,
        49 => 39,
        59 => 49,
        _ => (l - 10).max(0),
    };
    let slpret = match l {
        0..=9 => 50,
        10..=19 => 51,
        20..=29 => 52,
        30..=34 => 53,
        35..=39 => 54,
        40..=44 => 55,
        45 => 56,
        46 => 57,
        47..=58 => 58,
        _ => 59,
    };
    // ts_lwait is ts_slpret but for levels 49-58, which wait for 59
    let lwait = if (49..=58).contains(&l) { 59 } else { slpret };
    TsRow {
        quantum_ticks,
        tqexp,
        slpret,
        maxwait: if l == TS_MAX_LEVEL { 32000 } else { 0 },
        lwait,
    }
}

/// The default FX quantum of `level` (clamped to 0..=60), in ticks.
pub fn fx_quantum_ticks(level: i32) -> u64 {
    match level.clamp(0, FX_MAX_LEVEL) {
        0..=9 => 20,
        10..=19 => 16,
        20..=29 => 12,
        30..=39 => 8,
        40..=58 => 4,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_match_the_illumos_table() {
        // spot checks against config_ts_dptbl[] (glbpri, qntm, tqexp, slprt, mxwt, lwt)
        let row = |q, t, s, m, w| TsRow {
            quantum_ticks: q,
            tqexp: t,
            slpret: s,
            maxwait: m,
            lwait: w,
        };
        assert_eq!(ts_row(0), row(20, 0, 50, 0, 50));
        assert_eq!(ts_row(10), row(16, 0, 51, 0, 51));
        assert_eq!(ts_row(15), row(16, 5, 51, 0, 51));
        assert_eq!(ts_row(29), row(12, 19, 52, 0, 52));
        assert_eq!(ts_row(34), row(8, 24, 53, 0, 53));
        assert_eq!(ts_row(35), row(8, 25, 54, 0, 54));
        assert_eq!(ts_row(44), row(4, 34, 55, 0, 55));
        assert_eq!(ts_row(45), row(4, 35, 56, 0, 56));
        assert_eq!(ts_row(46), row(4, 36, 57, 0, 57));
        assert_eq!(ts_row(48), row(4, 38, 58, 0, 58));
        assert_eq!(ts_row(49), row(4, 39, 58, 0, 59));
        assert_eq!(ts_row(58), row(4, 48, 58, 0, 59));
        assert_eq!(ts_row(59), row(2, 49, 59, 32000, 59));
        // a CPU-bound thread raised to 50 sinks to 0 in 440 ms of CPU time
        let (mut l, mut ms) = (50, 0);
        while l > 0 {
            ms += ts_row(l).quantum_ticks * TICK_MS;
            l = ts_row(l).tqexp;
        }
        assert_eq!(ms, 440);
        assert_eq!(fx_quantum_ticks(0), 20);
        assert_eq!(fx_quantum_ticks(45), 4);
        assert_eq!(fx_quantum_ticks(60), 2);
    }
}
