//! The real-program suite: programs from the distribution's packages, each with a fixed
//! input and an instruction window, recorded once with valgrind lackey into a trace
//! cache and replayed as threads like any profile (`--mix real:xz,real:sqlite3:2`,
//! or `real = "xz"` in a thread group of a scenario).
//!
//! The cache is `$CACHESCHED_TRACES`, else `$XDG_CACHE_HOME/cachesched/traces`, else
//! `~/.cache/cachesched/traces`. A trace's file name carries a hash of its definition
//! (command, input, window), so changing a definition records it anew instead of
//! reusing a stale trace; beside each trace a `.json` file says what was recorded,
//! from which package version, how long it took and how large it is. A program is made
//! ready (its setup run) and recorded under a lock of its own (`NAME.lock` in the
//! cache), so that concurrent runs wanting one missing trace record it once.

use crate::error::{invalid, Error, Result, ResultExt};
use crate::traces::{record_window_with, Counting, Traced, Window};
use cachesched_core::SimRng;
use cachesched_sim::ThreadGroup;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Inputs shipped with the binary; written into the cache next to the traces.
const FILES: &[(&str, &str)] = &[
    ("words.pl", include_str!("real/words.pl")),
    ("work.py", include_str!("real/work.py")),
    ("bench.lua", include_str!("real/bench.lua")),
    ("queries.sql", include_str!("real/queries.sql")),
    ("load.sql", include_str!("real/load.sql")),
    ("scene.pov", include_str!("real/scene.pov")),
    ("transport.mod", include_str!("real/transport.mod")),
    ("moves.gtp", include_str!("real/moves.gtp")),
    ("prog.c", include_str!("real/prog.c")),
    ("auction.xsl", include_str!("real/auction.xsl")),
    ("sentences.txt", include_str!("real/sentences.txt")),
    ("algebra.g", include_str!("real/algebra.g")),
    ("speech.txt", include_str!("real/speech.txt")),
    ("census.lm", include_str!("real/census.lm")),
];

mod inputs;

/// The generated text input: its name and size.
const TEXT: (&str, usize) = ("text.txt", 4 << 20);

/// Millions of instructions.
pub const M: u64 = 1_000_000;

/// Millions of a window's instructions recorded per second under cstrace (its events
/// printed, read and written compressed), for the estimate a recording prints: about 10
/// for minisat's window and 7 for povray's (2026-12-07, this 2-core VM).
pub const RECORD_WINDOW_RATE: u64 = 7;

/// One program of the suite.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    /// Name in mixes (`real:NAME`).
    pub name: &'static str,
    /// Debian package that provides it.
    pub package: &'static str,
    /// What it is and what it does with its input.
    pub what: &'static str,
    /// The command; `{dir}` is replaced by the cache directory holding the inputs,
    /// `{multiarch}` by Debian's triplet for this architecture (`MULTIARCH`).
    /// The first word is looked up on PATH and in /usr/games.
    pub command: &'static [&'static str],
    /// Instructions skipped (start-up, reading input) and recorded.
    pub window: Window,
    /// How the window's instructions are counted: lackey's events for the suite's
    /// first programs, retired instructions for windows chosen from basic-block
    /// vectors (`cachesched real phases`, [`crate::bbv`]).
    pub counting: Counting,
    /// Exit codes that mean the program ran to its end (minisat exits with 10 or 20,
    /// satisfiable or not).
    pub exit_codes: &'static [i32],
    /// A file (`{dir}` and `{multiarch}` as in `command`) given to the program as its
    /// standard input (`None`: none).
    pub stdin: Option<&'static str>,
    /// Environment added to the program's (fixed hash seeds, so that recordings
    /// repeat).
    pub env: &'static [(&'static str, &'static str)],
    /// A command run natively (not traced) before recording, to build an input the
    /// recorded run works on (`None`: none); `{dir}` and `{multiarch}` as in `command`.
    /// Its output file (the second element of the pair) is removed first.
    pub setup: Option<(&'static [&'static str], &'static str)>,
    /// What else the command or its setup needs, beside the package's own program:
    /// pairs of a program (looked up as the command's first word is) or an absolute
    /// path (`{multiarch}` as in `command`), and the Debian package that provides it.
    /// Checked before anything runs, so that a missing one is named with its package;
    /// the packages' versions are recorded beside the trace.
    pub requires: &'static [(&'static str, &'static str)],
}

/// What an entry of [`SUITE`] leaves out: no added environment, no setup.
const PLAIN: Program = Program {
    name: "",
    package: "",
    what: "",
    command: &[],
    window: Window { skip: 0, length: 0 },
    counting: Counting::Events,
    exit_codes: &[0],
    stdin: None,
    env: &[],
    setup: None,
    requires: &[],
};

/// Debian's multiarch triplet of the architecture this binary is built for: the
/// directory under /usr/lib where some packages keep their programs and data (GAP's
/// kernel, espeak-ng's data). `{multiarch}` in a command, setup or requirement stands
/// for it; `None` on an architecture without one here (those programs then refuse to
/// record, saying so).
const MULTIARCH: Option<&str> = if cfg!(target_arch = "x86_64") {
    Some("x86_64-linux-gnu")
} else if cfg!(target_arch = "aarch64") {
    Some("aarch64-linux-gnu")
} else if cfg!(target_arch = "riscv64") {
    Some("riscv64-linux-gnu")
} else if cfg!(all(target_arch = "powerpc64", target_endian = "little")) {
    Some("powerpc64le-linux-gnu")
} else if cfg!(target_arch = "s390x") {
    Some("s390x-linux-gnu")
} else {
    None
};

/// `text` with `{multiarch}` replaced by [`MULTIARCH`], or an error naming the program
/// if this architecture has no triplet here.
fn with_multiarch(text: &str, program: &str) -> Result<String> {
    if !text.contains("{multiarch}") {
        return Ok(text.to_string());
    }
    let arch = MULTIARCH.ok_or_else(|| {
        Error::Tool(format!(
            "real:{program} names a path under /usr/lib/<multiarch triplet>, and this binary \
             knows no Debian triplet for its architecture ({}): add it to MULTIARCH in \
             crates/lab/src/real.rs",
            std::env::consts::ARCH
        ))
    })?;
    Ok(text.replace("{multiarch}", arch))
}

/// GAP's kernel with the arguments every GAP command here starts with (`-r`: no user
/// configuration; `-l`: Debian's library roots), then the given ones.
macro_rules! gap_kernel {
    ($($arg:expr),* $(,)?) => {
        &["/usr/lib/{multiarch}/gap/gap", "-r", "-l", "/usr/lib/gap;/usr/share/gap", $($arg),*]
    };
}

/// The suite.
pub const SUITE: &[Program] = &[
    Program {
        name: "gzip",
        package: "gzip",
        what: "gzip -9 compressing 4 MiB of generated text (32 KB window, hash chains)",
        command: &["gzip", "-9", "-c", "{dir}/text.txt"],
        // Issue 80: a papers' program (the affinity and cache-fair real rows), so its
        // window follows their rule. `cachesched real phases gzip` (2026-12-06): 1,170 M
        // retired instructions in all; window at 880 M, distance 0.0035 (the 50 M window
        // it had at 5 M: 0.049 by `--window-m 50`; gzip has a single phase)
        window: Window { skip: 880 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "bzip2",
        package: "bzip2",
        what: "bzip2 -9 on the same text (900 KB blocks, Burrows-Wheeler sorting)",
        command: &["bzip2", "-9", "-c", "{dir}/text.txt"],
        // Issue 80: a papers' program (SPEC's bzip2), so its window follows their rule.
        // `cachesched real phases bzip2` (2026-12-06): 1,380 M retired instructions in
        // all; window at 1,180 M, distance 0.065 (the 50 M window it had at 5 M: 1.58 to
        // 1.65 by `--window-m 50`, its first block's sorting without the coding)
        window: Window { skip: 1180 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "xz",
        package: "xz-utils",
        what: "xz -9 on the same text (LZMA, 64 MiB dictionary, binary-tree match finder)",
        command: &["xz", "-9", "-T1", "-c", "{dir}/text.txt"],
        window: Window { skip: 20 * M, length: 50 * M },
        ..PLAIN
    },
    Program {
        name: "zstd",
        package: "zstd",
        what: "zstd -3 on the same text, one thread (2 MiB window, hash and chain tables; -19 spends its first 70 M instructions zeroing tables)",
        command: &["zstd", "--single-thread", "-3", "-c", "{dir}/text.txt"],
        window: Window { skip: 20 * M, length: 50 * M },
        ..PLAIN
    },
    Program {
        name: "sort",
        package: "coreutils",
        what: "GNU sort on the text's 60,000 lines in memory (byte order, one thread): merge passes over 4 MiB of lines and pointers",
        command: &["sort", "-S", "256M", "--parallel=1", "-o", "/dev/null", "{dir}/text.txt"],
        window: Window {
            skip: 20 * M,
            length: 50 * M,
        },
        env: &[("LC_ALL", "C")],
        ..PLAIN
    },
    Program {
        name: "cc1",
        package: "gcc",
        what: "gcc's compiler proper, -O2, on a 140-line C file (no headers)",
        command: &["cc1", "-quiet", "-O2", "{dir}/prog.c", "-o", "/dev/null"],
        // Issue 80: a papers' program (the affinity and cache-fair real rows), so its
        // window follows their rule. `cachesched real phases cc1` (2026-12-06): 540 M
        // retired instructions in all; window at 250 M, distance 0.389 (the 50 M window
        // it had at 10 M: 1.107 by `--window-m 50`, of 2)
        window: Window { skip: 250 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "perl",
        package: "perl",
        what: "perl: word frequencies and successor lists of the text (hashes, sorting)",
        command: &["perl", "{dir}/words.pl", "{dir}/text.txt"],
        // Issue 80: a papers' program (SPEC's perlbmk), so its window follows their
        // rule. `cachesched real phases perl` (2026-12-06): 3,600 M retired instructions
        // in all; window at 2,190 M, distance 0.172 (the 50 M window it had at 10 M:
        // 0.590 by `--window-m 50`)
        window: Window { skip: 2190 * M, length: 200 * M },
        counting: Counting::Retired,
        env: &[("PERL_HASH_SEED", "0"), ("PERL_PERTURB_KEYS", "0")],
        ..PLAIN
    },
    Program {
        name: "python3",
        package: "python3",
        what: "CPython: word objects, a bigram dictionary and sorting over the text",
        command: &["/usr/bin/python3", "{dir}/work.py", "{dir}/text.txt"],
        window: Window { skip: 40 * M, length: 50 * M },
        env: &[("PYTHONHASHSEED", "0")],
        ..PLAIN
    },
    Program {
        name: "lua",
        package: "lua5.4",
        what: "Lua 5.4: binary trees (allocation, garbage collection), a sieve, strings",
        command: &["lua5.4", "{dir}/bench.lua"],
        window: Window { skip: 5 * M, length: 50 * M },
        ..PLAIN
    },
    Program {
        name: "sqlite3",
        package: "sqlite3",
        what: "SQLite: point lookups, a join, group-bys and a range scan on a 16 MB database of 50,000 customers and 300,000 orders with three indexes (built natively first), 64 MiB page cache",
        command: &["sqlite3", "{dir}/orders.db", ".read {dir}/queries.sql"],
        window: Window { skip: 20 * M, length: 50 * M },
        setup: Some((&["sqlite3", "{dir}/orders.db", ".read {dir}/load.sql"], "orders.db")),
        ..PLAIN
    },
    Program {
        name: "stockfish",
        package: "stockfish",
        what: "Stockfish 15 chess engine: a depth-13 search of the start position, 16 MB hash, one thread (window 100 M instructions into the search)",
        // Start-up (loading the NNUE network) and clearing the hash table take 501 M
        // instructions and the search 474 M (`valgrind --tool=lackey --basic-counts=yes
        // stockfish bench 16 1 1|13 current depth`): the window lies in the search.
        command: &["stockfish", "bench", "16", "1", "13", "current", "depth"],
        window: Window { skip: 600 * M, length: 50 * M },
        ..PLAIN
    },
    Program {
        name: "gnugo",
        package: "gnugo",
        what: "GNU Go: 24 moves of self-play on a 13x13 board at level 6 (pattern matching, reading)",
        command: &["gnugo", "--mode", "gtp", "--gtp-input", "{dir}/moves.gtp", "--level", "6", "--seed", "1", "--quiet"],
        // Issue 80: SPEC's gobmk, so its window follows the rule. `cachesched real
        // phases gnugo` (2026-12-06, again 2026-12-07): 10,390 M retired instructions in
        // all; window at 3,370 M, distance 0.101 (the 50 M window it had at 20 M: 0.498
        // by `--window-m 50`)
        window: Window { skip: 3370 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "povray",
        package: "povray",
        what: "POV-Ray 3.7 ray tracer: 61 spheres, a box and a plane, 320x240, antialiased, one rendering thread (its frontend's pixel handling, 3.8% of the instructions, interleaved)",
        command: &["povray", "-D", "+WT1", "+W320", "+H240", "+A0.3", "+I{dir}/scene.pov", "+O{dir}/scene.png"],
        // Issue 80: raytrace's role in the timeslice paper, so its window follows the
        // rule. `cachesched real phases povray` (2026-12-07): the renderer thread ran
        // 4,200 M of 4,406 M retired instructions; window at its 2,070 M, distance
        // 0.083 (within 0.094: the other threads are in no vector), 2,171 M in the
        // recording's count (the 50 M window it had at 30 M: 0.63 to 0.80)
        window: Window { skip: 2171 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "glpsol",
        package: "glpk-utils",
        what: "GLPK's simplex solver on a generated 120 x 400 transportation problem",
        command: &["glpsol", "--math", "{dir}/transport.mod", "--seed", "1"],
        // Issue 80: soplex's role, so its window follows the rule. `cachesched real
        // phases glpsol`: 8,180 M retired instructions in all; the distances are flat
        // from 4,590 M to 5,160 M (each of four runs within 0.003 of its minimum there),
        // and the minimum moved between runs with exp-bbv's counts: 4,620 M (0.486,
        // 2026-12-06), 5,120 M, 5,020 M and 5,150 M (0.4865, 0.4865, 0.4851,
        // 2026-12-07). The window is the first run's, the earliest of the four minima
        // (the cheapest to record), all in the simplex (the 50 M window it had at 30 M:
        // 1.596 by `--window-m 50`, in the model's translation)
        window: Window { skip: 4620 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "convert",
        package: "imagemagick-6.q16",
        what: "ImageMagick 6 (Q16, one thread): reads a 2048x2048 image (32 MiB of pixels, generated natively first), rotates it by 90 degrees and writes it",
        // Reading takes 118 M instructions, the rotation 33 M (`valgrind --tool=lackey
        // --basic-counts=yes convert-im6.q16 -limit thread 1 plasma.miff [-rotate 90]
        // null:`): the window holds the end of the read, the rotation and the start of
        // the write.
        command: &["convert-im6.q16", "-limit", "thread", "1", "{dir}/plasma.miff", "-rotate", "90", "{dir}/rotated.miff"],
        window: Window { skip: 110 * M, length: 50 * M },
        setup: Some((
            &["convert-im6.q16", "-limit", "thread", "1", "-size", "2048x2048", "-seed", "1", "plasma:fractal", "-strip", "{dir}/plasma.miff"],
            "plasma.miff",
        )),
        ..PLAIN
    },
    // The papers' programs, or the programs SPEC took them from, added for issue 80.
    // Their windows are 200 M retired instructions, placed by `cachesched real phases
    // NAME` (the window nearest the whole run by basic-block vector, crate::bbv), and
    // their traces are stored compressed.
    Program {
        name: "minisat",
        package: "minisat",
        what: "MiniSat 2.2 (for the timeslice paper's SATSolver, Glucose 2.1 by its ref. [18], a MiniSat derivative) proving two 4,600-bit adders equivalent, a Tseitin-encoded miter (the SAT Competition 2002's cmpadd family) sized by the SAT Competitions' bound on instances worth running, more than a minute of MiniSat (earlier: 500 bits; before 2026-12-07 random 3-SAT of 225 variables)",
        command: &["minisat", "-verb=0", "{dir}/adders.cnf"],
        // `cachesched real phases minisat --interval-m 100` (2026-12-07, the 4,600-bit miter): 202,600 M retired instructions in all; window at 77,100 M, distance 0.066
        window: Window { skip: 77_100 * M, length: 200 * M },
        counting: Counting::Retired,
        exit_codes: &[10, 20],
        ..PLAIN
    },
    Program {
        name: "hmmsearch",
        package: "hmmer",
        what: "HMMER 3 (SPEC's hmmer): a profile HMM built from a 24-member family searched against 250 proteins of Swiss-Prot's composition, filters off (--max: full Forward/Backward on every sequence, as HMMER 2's search in SPEC is), one thread",
        command: &["hmmsearch", "--cpu", "0", "--max", "--noali", "-o", "/dev/null", "{dir}/family.hmm", "{dir}/proteins.fa"],
        // `cachesched real phases hmmsearch` (2026-12-06): 1,360 M retired instructions in all; window at 500 M, distance 0.032
        window: Window { skip: 500 * M, length: 200 * M },
        counting: Counting::Retired,
        setup: Some((&["hmmbuild", "--cpu", "0", "-o", "/dev/null", "{dir}/family.hmm", "{dir}/family.sto"], "family.hmm")),
        ..PLAIN
    },
    Program {
        name: "x264",
        package: "x264",
        what: "x264 (h264ref's role: H.264 encoding) at its medium preset, one thread, 30 CIF frames of generated video (a panning textured background, three moving discs, noise)",
        command: &["x264", "--quiet", "--threads", "1", "--lookahead-threads", "1", "--preset", "medium", "--input-res", "352x288", "--fps", "30", "-o", "/dev/null", "{dir}/video.yuv"],
        // `cachesched real phases x264` (2026-12-06): 1,060 M retired instructions in all; window at 490 M, distance 0.302
        window: Window { skip: 490 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "xalan",
        package: "xalan",
        what: "Xalan-C (SPEC's xalancbmk) turning an auction site's data (XMark's structure, 103 MB, the size of SPEC's 100 MB test data; 6.4 MB before 2026-12-07) into an HTML report: keyed look-ups, sorting, grouping, string functions",
        command: &["Xalan", "-o", "{dir}/auction.html", "{dir}/auction.xml", "{dir}/auction.xsl"],
        // `cachesched real phases xalan` (2026-12-07, the 103 MB document): about
        // 33.3 G retired instructions in all; window at 14,310 M, distance 0.873 (on
        // the 6.4 MB document, 2026-12-06: 2,020 M in all, window at 760 M, 0.643)
        window: Window { skip: 14_310 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "cbc",
        package: "coinor-cbc",
        what: "COIN-OR Clp through cbc (soplex's role: a simplex LP solver) on a multicommodity network-flow LP of SPEC's reference input's size (pds-50's 83,060 constraints and 270,095 variables: 24 commodities, 2,992 nodes, 11,254 arcs; 200 nodes and 1,500 arcs before 2026-12-07), primal simplex",
        command: &["cbc", "{dir}/multicommodity.mps", "-primalSimplex"],
        // `cachesched real phases cbc` (2026-12-07, the LP of pds-50's size): 7,890 M retired instructions in all; window at 2,260 M, distance 1.112
        window: Window { skip: 2_260 * M, length: 200 * M },
        counting: Counting::Retired,
        ..PLAIN
    },
    Program {
        name: "parser",
        package: "link-grammar",
        what: "the Link Grammar parser (SPEC's parser is its 1990s version) on 16 sentences of the GPL-3's text (4-16 words), English dictionary",
        command: &["link-parser", "en", "-graphics=0", "-verbosity=0", "-batch"],
        // `cachesched real phases parser` (2026-12-06): 1,950 M retired instructions in all; window at 800 M, distance 0.552
        window: Window { skip: 800 * M, length: 200 * M },
        counting: Counting::Retired,
        stdin: Some("{dir}/sentences.txt"),
        ..PLAIN
    },
    Program {
        name: "gap",
        package: "gap-core",
        what: "GAP 4 (SPEC's gap) on a six-part input after SPEC CPU2000's reference input: combinatorics and big numbers, finite fields, permutation groups (Rubik's cube group, M24, M12), a subgroup lattice, normalizers in a solvable group two ways, a pc-group collector; the library restored from a workspace (saved natively first)",
        // The kernel itself, not Debian's /usr/bin/gap (a shell script valgrind would
        // trace instead, which also reads $HOME/gap); -r: no user configuration.
        // Restoring the 53 MB workspace takes 0.88 G retired instructions (loading the
        // library without one, 4.7 G: valgrind exp-bbv on `QUIT;`).
        command: gap_kernel!["-L", "{dir}/gap.ws", "-q", "{dir}/algebra.g"],
        // `cachesched real phases gap` (2026-12-06): 3,150 M retired instructions in all (0.88 G of them restoring the workspace); window at 1,760 M, distance 0.966 (the parts differ: no window is near the whole)
        window: Window { skip: 1760 * M, length: 200 * M },
        counting: Counting::Retired,
        setup: Some((
            gap_kernel!["-q", "-c", "SaveWorkspace(\"{dir}/gap.ws\");QUIT;"],
            "gap.ws",
        )),
        requires: &[("/usr/share/gap/lib/init.g", "gap-libs")],
        ..PLAIN
    },
    Program {
        name: "sphinx",
        package: "pocketsphinx",
        what: "PocketSphinx (SPEC's sphinx3 is CMU Sphinx-3, run there as `sphinx_livepretend ctlfile . args.an4` on AN4 census utterances) decoding four census-style utterances (5.8 s of 16 kHz speech synthesised natively by espeak-ng and sox) with the en-us acoustic model and a 109-word census vocabulary (needs pocketsphinx-en-us, espeak-ng and sox)",
        command: &["pocketsphinx_continuous", "-infile", "{dir}/speech.wav", "-hmm", "/usr/share/pocketsphinx/model/en-us/en-us", "-lm", "{dir}/census.lm", "-dict", "{dir}/census.dict", "-logfn", "/dev/null"],
        // `cachesched real phases sphinx` (2026-12-06): 1,960 M retired instructions in all; window at 90 M, distance 0.158
        window: Window { skip: 90 * M, length: 200 * M },
        counting: Counting::Retired,
        // the dictionary: the language model's words' pronunciations in CMUdict; the
        // speech: espeak-ng's 22,050 Hz output resampled to the model's 16 kHz (sox -R:
        // repeatable, -D: no dither, so the same bytes every time)
        setup: Some((
            &["sh", "-c", "set -e; d=$1; awk 'FNR == NR { if ($1 ~ /^-/ && NF >= 2) v[$2] = 1; next } { w = $1; sub(/\\(.*/, \"\", w); if (w in v) print }' \"$d/census.lm\" /usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict > \"$d/census.dict\"; espeak-ng -w \"$d/speech-22k.wav\" -f \"$d/speech.txt\"; sox -R -D \"$d/speech-22k.wav\" -r 16000 -c 1 -b 16 -e signed-integer \"$d/speech.wav\"", "sh", "{dir}"],
            "speech.wav",
        )),
        requires: &[
            ("/usr/share/pocketsphinx/model/en-us/en-us/means", "pocketsphinx-en-us"),
            ("espeak-ng", "espeak-ng"),
            ("/usr/lib/{multiarch}/espeak-ng-data/phontab", "espeak-ng-data"),
            ("sox", "sox"),
        ],
        ..PLAIN
    },
];

/// The program named `name`.
pub fn program(name: &str) -> Result<&'static Program> {
    SUITE.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = SUITE.iter().map(|p| p.name).collect();
        invalid!(
            "unknown real program '{name}': the suite has {} (`cachesched real list`)",
            names.join(", ")
        )
    })
}

/// The trace cache directory.
pub fn cache_dir() -> Result<PathBuf> {
    crate::caches::traces_dir()
}

impl Program {
    /// About how long recording this program's window takes, in seconds: under
    /// cstrace (`fast`), which skips at 300-600 M instructions a second and records
    /// the window at [`RECORD_WINDOW_RATE`], or under lackey, which with the
    /// conversion runs 0.7-1.4 M instructions a second here, skipped or not.
    pub fn record_estimate_secs(&self, fast: bool) -> u64 {
        if fast {
            self.window.skip / (300 * M) + self.window.length / (RECORD_WINDOW_RATE * M)
        } else {
            (self.window.skip + self.window.length) * 10 / (8 * M)
        }
    }

    /// A hash of everything the trace depends on that this binary decides: command,
    /// window, environment, and the inputs the command names (the shipped files' text,
    /// the generated text's size and generator version).
    fn definition_hash(&self) -> u64 {
        self.definition_hash_on(MULTIARCH)
    }

    /// [`Program::definition_hash`] on an architecture of Debian triplet `triplet`.
    fn definition_hash_on(&self, triplet: Option<&str>) -> u64 {
        // `{multiarch}` resolved, so that the key is the command this binary runs (and
        // stays what it was on amd64, where the paths were written out)
        let mut s = format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|",
            self.command, self.window, self.env, self.setup, TEXT
        )
        .replace("{multiarch}", triplet.unwrap_or("{multiarch}"));
        // windows that count events and read no input (the first programs', but
        // gzip's and cc1's since issue 80): their hashes stay as they were
        if self.counting != Counting::Events || self.stdin.is_some() {
            s.push_str(&format!("{:?}|{:?}|", self.counting, self.stdin));
        }
        // only the inputs the command (or its setup) names
        let uses = |file: &str| self.uses(file);
        for (name, text) in FILES.iter().filter(|(n, _)| uses(n)) {
            s.push_str(name);
            s.push_str(text);
        }
        if uses(TEXT.0) {
            s.push_str(TEXT_GENERATOR_VERSION);
        }
        for g in inputs::GENERATED.iter().filter(|g| uses(g.name)) {
            s.push_str(g.name);
            s.push_str(g.version);
        }
        cachesched_core::hash::fnv1a(s.as_bytes())
    }

    /// How it runs as command line `cmd` (made by [`ready`]) with standard input `stdin`:
    /// what recording and `phases` both trace.
    fn traced<'a>(&'a self, cmd: &'a [String], stdin: Option<&'a Path>) -> Traced<'a> {
        Traced {
            cmd,
            env: self.env,
            stdin,
            exit_codes: self.exit_codes,
        }
    }

    /// Where its trace is (or will be) in `dir`.
    pub fn trace_path(&self, dir: &Path) -> PathBuf {
        // windows chosen from basic-block vectors are long: those traces are stored
        // compressed (the first programs' names stay as they were)
        let ext = match self.counting {
            Counting::Events => "cst",
            Counting::Retired => "cst.zst",
        };
        dir.join(format!(
            "{}-{:016x}.{ext}",
            self.name,
            self.definition_hash()
        ))
    }

    /// Whether its command, setup or standard input names the input `file`.
    fn uses(&self, file: &str) -> bool {
        let setup: &[&str] = self.setup.map(|(c, _)| c).unwrap_or(&[]);
        self.command
            .iter()
            .chain(setup)
            .chain(&self.stdin)
            .any(|a| a.contains(file))
    }

    /// Its standard input's path in `dir`, if it reads one.
    fn stdin_path(&self, dir: &Path) -> Result<Option<PathBuf>> {
        self.stdin
            .map(|s| self.fill(s, dir).map(PathBuf::from))
            .transpose()
    }

    /// `text` (a word of its command or setup, its standard input) with `{dir}`
    /// replaced by `dir` and `{multiarch}` by [`MULTIARCH`].
    fn fill(&self, text: &str, dir: &Path) -> Result<String> {
        with_multiarch(&text.replace("{dir}", &dir.to_string_lossy()), self.name)
    }

    /// The command line with `{dir}` filled in and the program found.
    fn command_line(&self, dir: &Path) -> Result<Vec<String>> {
        resolve(self.command, dir, self)
    }
}

/// `args` of `p` filled in ([`Program::fill`]) and the program (the first word) found,
/// or an error saying which package to install.
fn resolve(args: &[&str], dir: &Path, p: &Program) -> Result<Vec<String>> {
    let mut cmd = args
        .iter()
        .map(|a| p.fill(a, dir))
        .collect::<Result<Vec<String>>>()?;
    cmd[0] = find_program(&cmd[0]).ok_or_else(|| {
        Error::Tool(format!(
            "'{}' is not installed: apt-get install {}",
            cmd[0], p.package
        ))
    })?;
    Ok(cmd)
}

/// Bumped whenever [`write_text`] changes what it writes.
const TEXT_GENERATOR_VERSION: &str = "text-v1";

/// Finds `name` on PATH, in /usr/games, or (for `cc1`) where gcc keeps it.
fn find_program(name: &str) -> Option<String> {
    if name.starts_with('/') {
        return Path::new(name).exists().then(|| name.to_string());
    }
    if name == "cc1" {
        let out = Command::new("gcc")
            .arg("-print-prog-name=cc1")
            .output()
            .ok()?;
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        return Path::new(&p).is_absolute().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/games")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

/// Writes `size` bytes of deterministic English-like text: words of a fixed
/// 8,000-word vocabulary drawn with Zipf(1) frequencies, in sentences, 72-column lines.
fn write_text(path: &Path, size: usize) -> Result<()> {
    let mut rng = SimRng::new(20261122);
    const LETTERS: &[u8] =
        b"eeeeeeetttttaaaaaoooooiiiiinnnnnsssssshhhhhrrrrrddddlllluuccmmwwffggyyppbbvkjxqz";
    let vocab: Vec<Vec<u8>> = (0..8000)
        .map(|_| {
            let len = 2 + rng.below(4) + rng.below(5);
            (0..len)
                .map(|_| LETTERS[rng.below(LETTERS.len() as u64) as usize])
                .collect()
        })
        .collect();
    let h: f64 = (1..=vocab.len()).map(|r| 1.0 / r as f64).sum();
    let cum: Vec<f64> = (1..=vocab.len())
        .scan(0.0, |c, r| {
            *c += 1.0 / (r as f64 * h);
            Some(*c)
        })
        .collect();
    let mut out = Vec::with_capacity(size + 128);
    let (mut col, mut in_sentence) = (0usize, 0u64);
    while out.len() < size {
        let u = rng.unit();
        let w = &vocab[cum.partition_point(|&c| c < u).min(vocab.len() - 1)];
        if col + w.len() + 2 > 72 {
            out.push(b'\n');
            col = 0;
        } else if col > 0 {
            out.push(b' ');
            col += 1;
        }
        if in_sentence == 0 {
            out.push(w[0].to_ascii_uppercase());
            out.extend_from_slice(&w[1..]);
            in_sentence = 5 + rng.below(15);
        } else {
            out.extend_from_slice(w);
        }
        col += w.len();
        in_sentence -= 1;
        if in_sentence == 0 {
            out.push(if rng.chance(0.1) { b'?' } else { b'.' });
            col += 1;
        } else if rng.chance(0.06) {
            out.push(b',');
            col += 1;
        }
    }
    out.push(b'\n');
    crate::files::write_bytes(path, &out)
}

/// Writes the inputs into `dir` (if missing or different), the generated ones `p`
/// uses among them.
fn write_inputs(dir: &Path, p: &Program) -> Result<()> {
    write_shared_inputs(dir)?;
    for g in inputs::GENERATED.iter().filter(|g| p.uses(g.name)) {
        let path = dir.join(g.name);
        let stamp = dir.join(format!("{}.version", g.name));
        if std::fs::read_to_string(&stamp).ok().as_deref() != Some(g.version) || !path.exists() {
            (g.write)(&path)?;
            crate::files::write_file(&stamp, g.version)?;
        }
    }
    Ok(())
}

/// Writes the shipped files and the generated text into `dir` (if missing or
/// different).
fn write_shared_inputs(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io("cannot create the trace cache", dir))?;
    for (name, text) in FILES {
        let p = dir.join(name);
        if std::fs::read_to_string(&p).ok().as_deref() != Some(*text) {
            crate::files::write_file(&p, text)?;
        }
    }
    let text = dir.join(TEXT.0);
    let stamp = dir.join("text.version");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(TEXT_GENERATOR_VERSION)
        || !text.exists()
    {
        write_text(&text, TEXT.1)?;
        crate::files::write_file(&stamp, TEXT_GENERATOR_VERSION)?;
    }
    Ok(())
}

/// Runs `p`'s setup command natively in `dir`, after removing what it makes.
fn run_setup(p: &Program, setup: &[&str], made: &Path, dir: &Path) -> Result<()> {
    let args = resolve(setup, dir, p)?;
    let _ = std::fs::remove_file(made);
    let out = Command::new(&args[0])
        .args(&args[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            what: format!("cannot run the setup of real:{}", p.name),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "the setup of real:{} ({}) failed: {}",
            p.name,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // a setup may report its failure only in its output (GAP's SaveWorkspace returns
    // false, and GAP still exits 0)
    if !made.exists() {
        let said = format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let tail: String = said.trim().chars().rev().take(2000).collect();
        return Err(Error::Tool(format!(
            "the setup of real:{} ({}) exited 0 but did not make {}: {}",
            p.name,
            args.join(" "),
            made.display(),
            tail.chars().rev().collect::<String>()
        )));
    }
    Ok(())
}

/// Checks that everything `p` requires ([`Program::requires`]) is installed, or says
/// which package to install.
fn check_requires(p: &Program) -> Result<()> {
    for (what, package) in p.requires {
        let what = with_multiarch(what, p.name)?;
        if find_program(&what).is_none() {
            return Err(Error::Tool(format!(
                "real:{} needs {what}, which is not installed: apt-get install {package}",
                p.name
            )));
        }
    }
    Ok(())
}

/// What is recorded beside each trace.
#[derive(Debug, Serialize)]
struct Recorded<'a> {
    program: &'a str,
    package: &'a str,
    package_version: String,
    /// The versions of the packages of [`Program::requires`], by package.
    requires: Vec<(&'a str, String)>,
    what: &'a str,
    command: Vec<String>,
    skip_instructions: u64,
    window_instructions: u64,
    counting: String,
    /// The window's instructions as `counting` counts them.
    instructions: u64,
    /// Instruction events in the trace (lackey's: every `rep` iteration).
    instruction_events: u64,
    events: u64,
    bytes: u64,
    file_bytes: u64,
    record_seconds: f64,
    /// The tool that wrote the trace: `lackey`, or `cstrace 1` (the same events,
    /// the skip counted instead of printed: [`crate::tracer`]).
    tracer: &'static str,
}

/// The installed version of a Debian package ("unknown" if dpkg cannot say).
fn package_version(package: &str) -> String {
    installed_version(package).unwrap_or_else(|| "unknown".into())
}

/// The version of the Debian package `package` if dpkg says it is installed (`None`:
/// not installed, removed with its configuration kept, unknown to dpkg, or no dpkg).
pub fn installed_version(package: &str) -> Option<String> {
    let o = Command::new("dpkg-query")
        .args(["-W", "-f", "${db:Status-Abbrev}|${Version}", package])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    parse_status_version(&out)
}

/// The version in dpkg-query's `${db:Status-Abbrev}|${Version}` output, if the status
/// says installed (`ii`: wanted and installed; `hi`: held and installed).
fn parse_status_version(out: &str) -> Option<String> {
    let (status, version) = out.split_once('|')?;
    let installed = matches!(status.trim_end(), "ii" | "hi");
    (installed && !version.is_empty()).then(|| version.to_string())
}

/// The Debian packages the suite needs, sorted by name, each with the suite's programs
/// that need it: valgrind (it records every trace and places windows, for all of
/// them), each program's own package and the packages of its
/// [`Program::requires`].
pub fn packages() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut by: std::collections::BTreeMap<&'static str, Vec<&'static str>> =
        std::collections::BTreeMap::new();
    for p in SUITE {
        let needs = std::iter::once(p.package).chain(p.requires.iter().map(|r| r.1));
        for package in needs {
            let users = by.entry(package).or_default();
            if !users.contains(&p.name) {
                users.push(p.name);
            }
        }
    }
    by.entry("valgrind").or_default().insert(0, "all");
    by.into_iter().collect()
}

/// Makes `p` ready to run in the cache directory `dir`, as recording and `phases`
/// both need: its inputs written, its setup run; returns its command line and its
/// standard input's path.
fn ready(p: &Program, dir: &Path) -> Result<(Vec<String>, Option<PathBuf>)> {
    write_inputs(dir, p)?;
    let cmd = p.command_line(dir)?;
    check_requires(p)?;
    if let Some((setup, made)) = p.setup {
        run_setup(p, setup, &dir.join(made), dir)?;
    }
    Ok((cmd, p.stdin_path(dir)?))
}

/// Removes the partial traces `STEM.partial-PID.*` in `dir` that a recording killed
/// before it could clean up left (its process `PID` is gone); those of recordings
/// still running are left alone.
fn remove_orphans(dir: &Path, stem: &str) {
    let prefix = format!("{stem}.partial-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !cachesched_linux::process::alive(pid) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The lock on program `p` in the cache directory `dir`, held while its setup runs and
/// while it is recorded or measured: a setup rewrites its output in place (GAP's
/// workspace, the synthesised speech), so two processes making one program ready at
/// once could trace a half-written input, and two recordings of one missing trace
/// would both spend minutes on it. Waits (saying so) while another process holds it;
/// released when the file is dropped (or the process ends, however it ends). The lock
/// file `NAME.lock` stays, empty.
fn lock(p: &Program, dir: &Path) -> Result<std::fs::File> {
    let f = open_lock(p, dir)?;
    let failed = || {
        Error::io_hint(
            "cannot lock",
            lock_path(p, dir),
            "; the trace cache's file system must support file locks: point \
             CACHESCHED_TRACES at a directory on a local disk",
        )
    };
    match f.try_lock() {
        Ok(()) => return Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => eprintln!(
            "real:{} is being made ready or recorded elsewhere (another process); waiting for it",
            p.name
        ),
        Err(std::fs::TryLockError::Error(e)) => return Err(failed()(e)),
    }
    f.lock().map_err(failed())?;
    Ok(f)
}

/// Where `p`'s lock file is in `dir`.
fn lock_path(p: &Program, dir: &Path) -> PathBuf {
    dir.join(format!("{}.lock", p.name))
}

/// Opens (creating) `p`'s lock file in `dir`, unlocked.
fn open_lock(p: &Program, dir: &Path) -> Result<std::fs::File> {
    std::fs::create_dir_all(dir).map_err(Error::io("cannot create the trace cache", dir))?;
    let path = lock_path(p, dir);
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(Error::io("cannot open the lock file", &path))
}

/// Records `p` into `dir` (even if a trace exists); returns the trace's path.
pub fn record(p: &Program, dir: &Path) -> Result<PathBuf> {
    let _held = lock(p, dir)?;
    record_locked(p, dir)
}

/// Longest recording, by [`Program::record_estimate_secs`], that the default tracer
/// choice ([`crate::tracer::Tracer::Auto`]) starts under lackey when cstrace cannot be
/// built: an hour. Beyond it lackey must be asked for (`CACHESCHED_TRACER=lackey`).
pub const LACKEY_FALLBACK_MAX_SECS: u64 = 3_600;

/// Refuses a recording of `p` that the default choice `choice` resolved to lackey
/// (cstrace could not be built; the note printed then says why) when lackey would
/// take longer than [`LACKEY_FALLBACK_MAX_SECS`]: minisat's window, 77 G instructions
/// in, would take about 27 hours, and nobody should find that out by waiting (gnugo's,
/// glpsol's and xalan's are over the hour too). The error names both ways on.
fn check_fallback(
    p: &Program,
    choice: crate::tracer::Tracer,
    tracer: &crate::tracer::Resolved,
) -> Result<()> {
    let secs = p.record_estimate_secs(tracer.skips());
    if choice != crate::tracer::Tracer::Auto || tracer.skips() || secs <= LACKEY_FALLBACK_MAX_SECS {
        return Ok(());
    }
    Err(Error::Tool(format!(
        "real:{}: cstrace cannot be built here (the note above says why), and lackey, which \
         prints the {} M instructions skipped before the window too, would take about {:.1} \
         hours: fix cstrace's build (valgrind's static core libraries and a C compiler; \
         CACHESCHED_TRACER=fast shows the error), or set CACHESCHED_TRACER=lackey to record \
         with lackey anyway",
        p.name,
        p.window.skip / M,
        secs as f64 / 3600.0
    )))
}

/// [`record`] with `p`'s lock ([`lock`]) held by the caller.
fn record_locked(p: &Program, dir: &Path) -> Result<PathBuf> {
    // the tracer first: a refused recording neither writes inputs nor runs a setup
    let choice = crate::tracer::Tracer::from_env()?;
    let tracer = choice.resolve()?;
    check_fallback(p, choice, &tracer)?;
    let (cmd, stdin) = ready(p, dir)?;
    let out = p.trace_path(dir);
    // NAME-HASH.partial-PID.cst[.zst]: the extension still says whether to compress
    let name = out.file_name().unwrap_or_default().to_string_lossy();
    let (stem, ext) = name.split_once('.').unwrap_or((&name, "cst"));
    // the process id keeps two recordings of one program from writing one file
    let tmp = out.with_file_name(format!("{stem}.partial-{}.{ext}", std::process::id()));
    remove_orphans(dir, stem);
    eprintln!(
        "recording real:{} ({} M instructions after {} M; under valgrind's {}, about {} s) -> {}",
        p.name,
        p.window.length / M,
        p.window.skip / M,
        tracer.name(),
        p.record_estimate_secs(tracer.skips()),
        out.display()
    );
    let t0 = Instant::now();
    let mut progress = crate::traces::Progress::new(format!("real:{}", p.name), p.window);
    let rec = record_window_with(
        &tracer,
        &p.traced(&cmd, stdin.as_deref()),
        &tmp,
        p.window,
        p.counting,
        &mut |n| progress.update(n),
    )
    .within(|| format!("recording real:{} failed", p.name))?;
    let secs = t0.elapsed().as_secs_f64();
    std::fs::rename(&tmp, &out).map_err(Error::io("cannot write", &out))?;
    let meta = Recorded {
        program: p.name,
        package: p.package,
        package_version: package_version(p.package),
        requires: p
            .requires
            .iter()
            .map(|(_, pkg)| (*pkg, package_version(pkg)))
            .collect(),
        what: p.what,
        command: cmd,
        skip_instructions: p.window.skip,
        window_instructions: p.window.length,
        counting: format!("{:?}", p.counting).to_lowercase(),
        instructions: rec.counted,
        instruction_events: rec.instructions,
        events: rec.events,
        bytes: rec.bytes,
        file_bytes: rec.file_bytes,
        record_seconds: (secs * 10.0).round() / 10.0,
        tracer: tracer.name(),
    };
    let json = serde_json::to_string_pretty(&meta)?;
    crate::files::write_file(&out.with_extension("json"), &(json + "\n"))?;
    eprintln!(
        "recorded real:{}: {} instructions ({} instruction events), {} events, {:.1} MB \
         ({:.1} MB on disk), {:.1} s",
        p.name,
        rec.counted,
        rec.instructions,
        rec.events,
        rec.bytes as f64 / 1e6,
        rec.file_bytes as f64 / 1e6,
        secs
    );
    Ok(out)
}

/// Runs `p` whole under valgrind's exp-bbv, in intervals of `interval` retired
/// instructions, in the cache directory `dir` (inputs written and setup run first, as
/// for a recording), and chooses its most representative window of `window`
/// instructions ([`crate::bbv::representative`]).
pub fn phases(
    p: &Program,
    dir: &Path,
    interval: u64,
    window: u64,
) -> Result<(crate::bbv::Vectors, crate::bbv::Choice)> {
    let _held = lock(p, dir)?;
    let (cmd, stdin) = ready(p, dir)?;
    let v = crate::bbv::Vectors::measure(&p.traced(&cmd, stdin.as_deref()), interval, dir)
        .within(|| format!("measuring real:{}'s basic-block vectors failed", p.name))?;
    let c = crate::bbv::representative(&v, window).within(|| format!("real:{}", p.name))?;
    Ok((v, c))
}

/// The trace of `p`, recorded first if the cache does not have it.
pub fn ensure(p: &Program) -> Result<PathBuf> {
    Ok(ensure_in(p, &cache_dir()?)?.0)
}

/// The trace of `p` in the cache directory `dir`, recorded first if `dir` does not
/// have it; with whether this call recorded it. A process that waited for another's
/// recording of it (its lock file, `NAME.lock`) takes that one.
pub fn ensure_in(p: &Program, dir: &Path) -> Result<(PathBuf, bool)> {
    let path = p.trace_path(dir);
    if path.exists() {
        return Ok((path, false));
    }
    let _held = lock(p, dir)?;
    // another process may have recorded it while this one waited for the lock
    if path.exists() {
        return Ok((path, false));
    }
    Ok((record_locked(p, dir)?, true))
}

/// Gives every group naming a real program its cached trace (recording it on first
/// use).
pub fn prepare(groups: &mut [ThreadGroup]) -> Result<()> {
    prepare_with(groups, true)
}

/// [`prepare`], or with `record` false, only from the cache: a missing trace is an
/// error naming the command that records it and about how long that takes (a plan
/// must not spend minutes recording).
pub fn prepare_with(groups: &mut [ThreadGroup], record: bool) -> Result<()> {
    for g in groups.iter_mut() {
        if let Some(name) = g.real.clone() {
            let p = program(&name)?;
            let path = if record {
                ensure(p)?
            } else {
                let path = p.trace_path(&cache_dir()?);
                if !path.exists() {
                    return Err(Error::Tool(format!(
                        "real:{name}'s trace is not recorded yet: `cachesched real record {name}` (about {} min under valgrind's lackey, {} s under cstrace)",
                        p.record_estimate_secs(false).div_ceil(60),
                        p.record_estimate_secs(true)
                    )));
                }
                path
            };
            g.trace = Some(path.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{
        check_fallback, check_requires, inputs, lock, open_lock, remove_orphans, run_setup,
        with_multiarch, write_text, Program, MULTIARCH, PLAIN, SUITE, TEXT, TEXT_GENERATOR_VERSION,
    };

    /// Every program's trace key (the hash in its trace's name) and a hash of every
    /// generated input's bytes, as recorded traces were made with them. Fails when a
    /// change moves a key (every cached trace of that program is recorded again: say
    /// so and update the table) or changes an input's bytes without a new version
    /// (traces recorded from the old bytes would be taken for the new: bump the
    /// version, then update the table).
    #[test]
    fn trace_keys_and_generated_inputs_are_pinned() {
        let keys: Vec<String> = SUITE
            .iter()
            // as on amd64, where the keys were first pinned (and traces recorded)
            .map(|p| {
                format!(
                    "{} {:016x}",
                    p.name,
                    p.definition_hash_on(Some("x86_64-linux-gnu"))
                )
            })
            .collect();
        let d = std::env::temp_dir().join(format!("cachesched-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fnv = |p: &std::path::Path| cachesched_core::hash::fnv1a(&std::fs::read(p).unwrap());
        let mut gen: Vec<String> = inputs::GENERATED
            .iter()
            .map(|g| {
                let p = d.join(g.name);
                (g.write)(&p).unwrap();
                format!("{} {} {:016x}", g.name, g.version, fnv(&p))
            })
            .collect();
        let t = d.join(TEXT.0);
        write_text(&t, TEXT.1).unwrap();
        gen.push(format!(
            "{} {TEXT_GENERATOR_VERSION} {:016x}",
            TEXT.0,
            fnv(&t)
        ));
        std::fs::remove_dir_all(&d).unwrap();
        let got = format!("{}\n{}", keys.join("\n"), gen.join("\n"));
        assert_eq!(got, PINNED, "\n{got}");
    }

    /// As of 2026-12-07: the keys and inputs of the traces recorded so far.
    const PINNED: &str = "\
gzip 7ffc1f115c76c492\n\
bzip2 5731fee48a163e11\n\
xz 30d7e23476b2e548\n\
zstd 85653c24e40c1c70\n\
sort 8f36a9a332ec69a0\n\
cc1 78815efbe1a649ca\n\
perl 459f44399de776c9\n\
python3 646fdd87c83bb8e1\n\
lua 5549ba2b1afaa9c8\n\
sqlite3 1ee4c9481aa32037\n\
stockfish f0013f6b73359c3a\n\
gnugo f1ffd01ffff4a91c\n\
povray fb310cbd0040ad43\n\
glpsol 48f70a74427ee8b9\n\
convert e47c32d652210afb\n\
minisat 514f2c8ddc44df2f\n\
hmmsearch 59d95711b096a8b8\n\
x264 69a1b7013ee102b7\n\
xalan a28a67650aae038e\n\
cbc 08596ce60899829c\n\
parser 0ac5b42f59c28be1\n\
gap ad502934abb80152\n\
sphinx 12215e912d054cfb\n\
adders.cnf cnf-miter-v2 1d22ccf855961014\n\
proteins.fa fasta-v4 e1c170d37b05f36c\n\
family.sto sto-v1 d730a7d35d90df23\n\
video.yuv yuv-v1 e864f285ed62964c\n\
auction.xml xml-v2 ef15b0b72825bc3a\n\
multicommodity.mps mps-v3 a134282613822c0a\n\
text.txt text-v1 3f68660ba6dcfac0";

    /// The package list holds valgrind and every program's package and requirement,
    /// once each, sorted, with the programs that need it; dpkg's status decides what
    /// counts as installed. Fails if a program's package or requirement is left out,
    /// a package is listed twice, or a removed package (`rc`) counts as installed.
    #[test]
    fn the_package_list_covers_the_suite() {
        let list = super::packages();
        let names: Vec<&str> = list.iter().map(|(p, _)| *p).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted, once each");
        let users = |package: &str| {
            list.iter()
                .find(|(p, _)| *p == package)
                .map(|(_, u)| u.clone())
                .unwrap_or_else(|| panic!("{package} missing from {names:?}"))
        };
        for p in SUITE {
            assert!(users(p.package).contains(&p.name), "{}", p.name);
            for (_, package) in p.requires {
                assert!(
                    users(package).contains(&p.name),
                    "{} needs {package}",
                    p.name
                );
            }
        }
        assert_eq!(users("valgrind"), ["all"]);
        assert_eq!(users("gap-libs"), ["gap"]);
        use super::parse_status_version as parse;
        assert_eq!(parse("ii |1.0.8-5+b1").as_deref(), Some("1.0.8-5+b1"));
        assert_eq!(parse("hi |2").as_deref(), Some("2"));
        assert_eq!(parse("rc |1.0.8-5+b1"), None);
        assert_eq!(parse("un |"), None);
        assert_eq!(parse("garbage"), None);
    }

    /// A program whose requirement is missing is refused before anything runs, naming
    /// the requirement and its package; one whose requirements are there passes.
    /// Fails if a missing requirement goes unnoticed or is not named.
    #[test]
    fn a_missing_requirement_names_its_package() {
        let p = Program {
            name: "t",
            requires: &[
                ("sh", "dash"),
                ("/nonexistent/cachesched/model", "some-model"),
            ],
            ..PLAIN
        };
        let e = check_requires(&p).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/cachesched/model"), "{e}");
        assert!(e.contains("apt-get install some-model"), "{e}");
        let ok = Program {
            requires: &[("sh", "dash")],
            ..p
        };
        check_requires(&ok).unwrap();
    }

    /// A setup that exits 0 without making its output (as GAP does when SaveWorkspace
    /// fails) is an error naming the file; one that makes it passes. Fails if the
    /// missing output is taken for success.
    #[test]
    fn a_setup_that_makes_nothing_is_an_error() {
        let d = std::env::temp_dir().join(format!("cachesched-setup-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let made = d.join("made.out");
        let p = Program {
            name: "t",
            package: "dash",
            ..PLAIN
        };
        let e = run_setup(&p, &["sh", "-c", "echo saved nothing"], &made, &d)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not make") && e.contains("made.out"), "{e}");
        assert!(e.contains("saved nothing"), "{e}");
        run_setup(
            &p,
            &["sh", "-c", "echo x > \"$0\"", "{dir}/made.out"],
            &made,
            &d,
        )
        .unwrap();
        assert!(made.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The default tracer choice falling back to lackey refuses a recording lackey
    /// would take hours over (minisat's, 77 G instructions in), names the variable
    /// that allows it, and lets shorter ones (gzip's) and any asked-for choice through.
    /// Fails if the bound is dropped, or applied to an explicit lackey or to a short
    /// recording.
    #[test]
    fn the_default_tracer_does_not_fall_back_to_hours_of_lackey() {
        use crate::tracer::{Resolved, Tracer};
        let find = |n: &str| SUITE.iter().find(|p| p.name == n).unwrap();
        let minisat = find("minisat");
        assert!(minisat.record_estimate_secs(false) > 20 * 3600);
        let e = check_fallback(minisat, Tracer::Auto, &Resolved::Lackey).unwrap_err();
        assert!(e.to_string().contains("CACHESCHED_TRACER=lackey"), "{e}");
        assert!(e.to_string().contains("real:minisat"), "{e}");
        check_fallback(minisat, Tracer::Lackey, &Resolved::Lackey).unwrap();
        // just over the hour: refused too
        let gnugo = find("gnugo");
        assert!(gnugo.record_estimate_secs(false) > super::LACKEY_FALLBACK_MAX_SECS);
        check_fallback(gnugo, Tracer::Auto, &Resolved::Lackey).unwrap_err();
        let gzip = find("gzip");
        assert!(gzip.record_estimate_secs(false) <= super::LACKEY_FALLBACK_MAX_SECS);
        check_fallback(gzip, Tracer::Auto, &Resolved::Lackey).unwrap();
    }

    /// While one process (here: one open file) holds a program's lock, no other can
    /// take it; once released, the next can. A second recording of one program would
    /// otherwise rerun its setup under the first one's feet. Fails if the lock is not
    /// taken within 10 s of its release. (Not at once: a child another test forks in
    /// that moment holds a copy of the descriptor, and with it the lock, until its
    /// exec closes it; this test once failed so.)
    #[test]
    fn a_programs_lock_excludes_a_second_holder_until_released() {
        let d = std::env::temp_dir().join(format!("cachesched-lock-{}", std::process::id()));
        let gap = SUITE.iter().find(|p| p.name == "gap").unwrap();
        let sphinx = SUITE.iter().find(|p| p.name == "sphinx").unwrap();
        let held = lock(gap, &d).unwrap();
        let other = open_lock(gap, &d).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        // another program's lock is its own
        let _sphinx = lock(sphinx, &d).unwrap();
        drop(held);
        let released = std::time::Instant::now();
        while let Err(e) = other.try_lock() {
            assert!(
                matches!(e, std::fs::TryLockError::WouldBlock)
                    && released.elapsed() < std::time::Duration::from_secs(10),
                "the lock was not free 10 s after its release: {e:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(other);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// No definition names an architecture's library directory itself: `{multiarch}`
    /// stands for it and resolves to this build's triplet, and a path under it is
    /// checked (and named) with the resolved triplet.
    #[test]
    fn library_paths_are_written_with_the_multiarch_triplet() {
        for p in SUITE {
            let text = format!("{:?}{:?}{:?}", p.command, p.setup, p.requires);
            for arch in ["x86_64-linux-gnu", "aarch64-linux-gnu", "i386-linux-gnu"] {
                assert!(!text.contains(arch), "real:{} names {arch}", p.name);
            }
        }
        let Some(triplet) = MULTIARCH else {
            // an architecture without a triplet here: those programs refuse, saying so
            let e = with_multiarch("/usr/lib/{multiarch}/gap/gap", "gap").unwrap_err();
            assert!(e.to_string().contains("MULTIARCH"), "{e}");
            return;
        };
        assert_eq!(
            with_multiarch("/usr/lib/{multiarch}/gap/gap", "gap").unwrap(),
            format!("/usr/lib/{triplet}/gap/gap")
        );
        let e = check_requires(&Program {
            name: "t",
            requires: &[("/usr/lib/{multiarch}/no-such-data/file", "no-such-package")],
            ..PLAIN
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&format!("/usr/lib/{triplet}/no-such-data/file"))
                && e.contains("apt-get install no-such-package"),
            "{e}"
        );
    }

    /// A partial trace whose recording process is gone is removed; one of a live
    /// recording (this process), another program's and the finished trace stay. Fails
    /// if orphans were kept or a live recording's file removed.
    #[test]
    fn orphaned_partial_traces_are_removed_and_live_ones_kept() {
        let d = std::env::temp_dir().join(format!("cachesched-orphans-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let me = std::process::id();
        // no process has pid i32::MAX (Linux's pid_max is at most 2^22)
        let files = [
            (format!("gzip-ab.partial-{}.cst.zst", i32::MAX), false),
            (format!("gzip-ab.partial-{me}.cst.zst"), true),
            (format!("mcf-cd.partial-{}.cst", i32::MAX), true),
            ("gzip-ab.cst.zst".to_string(), true),
        ];
        for (f, _) in &files {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        remove_orphans(&d, "gzip-ab");
        for (f, kept) in &files {
            assert_eq!(d.join(f).exists(), *kept, "{f}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
