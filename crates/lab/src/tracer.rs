//! Which Valgrind tool writes a recording's memory trace: lackey (`--trace-mem=yes`),
//! or cstrace, a tool of this project (`crates/lab/tools/cstrace.c`) that writes
//! lackey's text byte for byte from a given instruction on and reaches it at
//! Valgrind's translated speed.
//!
//! Lackey prints every event of a run, the skipped part before a window included;
//! here that is about a million instructions a second, so a window after billions of
//! instructions took hours to record (povray's 2,171 M skip: 5,548 s). cstrace counts
//! the skipped instructions with a few IR operations per superblock: gzip -9 on 40 MB
//! of text, 8.6 G instructions, took 13.7 s under it against 26.7 s under exp-bbv and
//! 5.1 s under `--tool=none` (1.6 s natively); and it prints the window's events into a
//! buffer of its own, a megabyte per write: 442 M lines of gzip -9 through a pipe in
//! 12 s, against 285 s for lackey's same lines (2026-12-07, this machine).
//!
//! The tool is compiled on first use from its source (embedded in this binary) against
//! the installed Valgrind's core libraries, into the tool cache
//! (`$CACHESCHED_TOOLS`, else `cachesched/tools` under the user's cache directory),
//! one directory per source and Valgrind version. It runs with the environment
//! lackey's runs get: Debian's `valgrind` is a script that sets `LD_LIBRARY_PATH` and
//! `GLIBCXX_FORCE_NEW` before starting `valgrind.bin`, so the tool is started through
//! that same script (a link to it named `valgrind` beside the tool named
//! `valgrind.bin`), and the core, told where the real launcher is
//! (`VALGRIND_LAUNCHER`), preloads what lackey's runs preload from where they preload
//! it. The traced program's stack, and every address in its trace, are then those of a
//! lackey run (checked by this module's test).
//!
//! Where the tool cannot be built (no C compiler, no Valgrind core libraries, another
//! architecture), [`Tracer::Auto`] falls back to lackey with a line saying why; a
//! recording lackey would take more than an hour over then refuses
//! (`crate::real::LACKEY_FALLBACK_MAX_SECS`).

use crate::error::{Error, Result};
use crate::traces::{Counting, Traced};
use cachesched_core::hash::fnv1a;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The variables that configure the recorder ([`Tracer::from_env`], the tool cache),
/// removed from a traced program's environment: a variable more or less moves its
/// stack, and with it the addresses of its trace (and, with a dynamic loader that
/// scans the environment, its instruction count).
pub const RECORDER_VARS: [&str; 2] = ["CACHESCHED_TRACER", "CACHESCHED_TOOLS"];

/// The tool's source, compiled on first use.
pub const SOURCE: &str = include_str!("../tools/cstrace.c");

/// Which tool records (`--tracer`; the environment's `CACHESCHED_TRACER` where a
/// command has no such option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tracer {
    /// cstrace where it can be built, else lackey (with a line on standard error
    /// saying why). The default.
    #[default]
    Auto,
    /// cstrace; an error where it cannot be built.
    Fast,
    /// valgrind's lackey.
    Lackey,
}

impl std::str::FromStr for Tracer {
    type Err = Error;
    fn from_str(s: &str) -> Result<Tracer> {
        match s {
            "auto" => Ok(Tracer::Auto),
            "fast" => Ok(Tracer::Fast),
            "lackey" => Ok(Tracer::Lackey),
            _ => Err(Error::Invalid(format!(
                "unknown tracer '{s}': expected auto, fast or lackey"
            ))),
        }
    }
}

impl Tracer {
    /// The tracer `CACHESCHED_TRACER` names (auto when unset); an error naming the
    /// variable if it names none.
    pub fn from_env() -> Result<Tracer> {
        match std::env::var("CACHESCHED_TRACER") {
            Ok(s) if !s.is_empty() => s
                .parse()
                .map_err(|e| Error::Invalid(format!("CACHESCHED_TRACER: {e}"))),
            _ => Ok(Tracer::Auto),
        }
    }

    /// The tool this choice comes to on this machine: cstrace built (or found built),
    /// or lackey.
    pub fn resolve(self) -> Result<Resolved> {
        match self {
            Tracer::Lackey => Ok(Resolved::Lackey),
            Tracer::Fast => Ok(Resolved::Fast(FastTool::get()?.clone())),
            Tracer::Auto => match FastTool::get() {
                Ok(t) => Ok(Resolved::Fast(t.clone())),
                Err(e) => {
                    static SAID: OnceLock<()> = OnceLock::new();
                    SAID.get_or_init(|| {
                        eprintln!(
                            "note: recording with lackey, which prints the skipped \
                             instructions too (much slower): {e}"
                        )
                    });
                    Ok(Resolved::Lackey)
                }
            },
        }
    }
}

/// A tracer ready to run.
#[derive(Debug, Clone)]
pub enum Resolved {
    /// valgrind's lackey.
    Lackey,
    /// cstrace, built.
    Fast(FastTool),
}

impl Resolved {
    /// How a recording's metadata names it: `lackey` or `cstrace 1`.
    pub fn name(&self) -> &'static str {
        match self {
            Resolved::Lackey => "lackey",
            Resolved::Fast(_) => "cstrace 1",
        }
    }

    /// Starts `t`'s command under this tracer with the trace on a pipe of its own
    /// (its descriptor 3), printed from the instruction after the first `skip` (counted
    /// as `counting` says; lackey prints from the start, whatever `skip` is: the
    /// caller skips); returns the child and the pipe's read end.
    pub fn spawn(
        &self,
        t: &Traced<'_>,
        skip: u64,
        counting: Counting,
    ) -> Result<(Child, std::fs::File)> {
        let mut c = match self {
            Resolved::Lackey => {
                let mut c = Command::new("valgrind");
                c.args(["-q", "--tool=lackey", "--trace-mem=yes", "--log-fd=3"]);
                c
            }
            Resolved::Fast(f) => {
                let mut c = Command::new(&f.run);
                c.env("VALGRIND_LAUNCHER", &f.launcher).args([
                    "--tool=cstrace".to_string(),
                    "-q".into(),
                    "--cs-fd=3".into(),
                    format!("--cs-skip={skip}"),
                    format!(
                        "--cs-counting={}",
                        match counting {
                            Counting::Retired => "retired",
                            Counting::Events => "events",
                        }
                    ),
                ]);
                c
            }
        };
        t.append_to(&mut c)?
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cachesched_linux::process::spawn_with_fd3_pipe(&mut c).map_err(|source| Error::Spawn {
            what: format!(
                "cannot run valgrind ({}): install it (e.g. `apt-get install valgrind`)",
                self.name()
            ),
            source,
        })
    }

    /// Whether the tool itself skips: the trace it writes starts at the window.
    pub fn skips(&self) -> bool {
        matches!(self, Resolved::Fast(_))
    }
}

/// cstrace, built: what to run and what the core is told its launcher is.
#[derive(Debug, Clone)]
pub struct FastTool {
    /// What to start: the link to Debian's `valgrind` script beside the tool (named
    /// `valgrind.bin`), or the tool itself where `valgrind` is the launcher.
    pub run: PathBuf,
    /// `VALGRIND_LAUNCHER`: the installed launcher (`valgrind.bin` on Debian).
    pub launcher: PathBuf,
}

/// Where Valgrind's static core libraries may be (Debian's, then upstream's defaults).
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/valgrind",
    "/usr/libexec/valgrind",
    "/usr/lib/valgrind",
    "/usr/lib64/valgrind",
    "/usr/local/libexec/valgrind",
    "/usr/local/lib/valgrind",
];

/// Where its tool headers may be.
const INCLUDE_DIRS: &[&str] = &["/usr/include/valgrind", "/usr/local/include/valgrind"];

impl FastTool {
    /// The tool, built once per process (and once per machine: the tool cache keeps
    /// it).
    pub fn get() -> Result<&'static FastTool> {
        static TOOL: OnceLock<std::result::Result<FastTool, String>> = OnceLock::new();
        TOOL.get_or_init(|| {
            crate::caches::user_cache_dir("CACHESCHED_TOOLS", "tools")
                .and_then(|root| FastTool::build_in(&root))
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Tool(format!("cstrace is not available: {e}")))
    }

    /// Finds Valgrind's pieces and builds the tool under `root` (the tool cache),
    /// unless a finished build of the same source, flags and Valgrind is there.
    pub fn build_in(root: &Path) -> Result<FastTool> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            return Err(Error::Tool("it is built for x86-64 Linux only".into()));
        }
        let valgrind = on_path("valgrind").ok_or_else(|| {
            Error::Tool("valgrind is not on PATH (apt-get install valgrind)".into())
        })?;
        let lib = first_holding(
            LIB_DIRS,
            "libcoregrind-amd64-linux.a",
            "Valgrind's core library",
        )?;
        let include = first_holding(INCLUDE_DIRS, "pub_tool_basics.h", "Valgrind's tool headers")?;
        let script = std::fs::read(&valgrind).unwrap_or_default();
        // Debian's wrapper ends in `exec $0.bin "$@"`; elsewhere `valgrind` is the
        // launcher itself
        let wrapper = script.starts_with(b"#!")
            && String::from_utf8_lossy(&script).contains("exec $0.bin \"$@\"");
        let version = Command::new(&valgrind)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        // the core library's size and time too: a rebuilt package may keep its version
        let core = lib.join("libcoregrind-amd64-linux.a");
        let stamp = std::fs::metadata(&core)
            .map(|m| format!("{} {:?}", m.len(), m.modified().ok()))
            .unwrap_or_default();
        let key = fnv1a(
            format!(
                "{SOURCE}\n{version}\n{}\n{}\n{stamp}\n{wrapper}\n{CFLAGS:?}\n{LDFLAGS:?}",
                valgrind.display(),
                lib.display()
            )
            .as_bytes(),
        );
        if wrapper
            && root
                .to_string_lossy()
                .contains(|c: char| c.is_whitespace() || "'\"\\$`*?[]".contains(c))
        {
            // Debian's script runs `exec $0.bin` unquoted
            return Err(Error::Tool(format!(
                "the tool cache's path {} has a space or a shell character, which Debian's valgrind script cannot start a tool from (set CACHESCHED_TOOLS to another directory)",
                root.display()
            )));
        }
        let dir = root.join(format!("cstrace-{key:016x}"));
        let tool = FastTool {
            run: dir.join(if wrapper { "valgrind" } else { "valgrind.bin" }),
            launcher: if wrapper {
                PathBuf::from(format!("{}.bin", valgrind.display()))
            } else {
                valgrind.clone()
            },
        };
        // a finished build has its stamp, written last
        if dir.join(BUILT).is_file() {
            return Ok(tool);
        }
        std::fs::create_dir_all(root).map_err(Error::io("cannot create the tool cache", root))?;
        remove_stale_builds(root);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = root.join(format!(
            "cstrace-{key:016x}.partial-{}-{nanos}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(Error::io("cannot create", &tmp))?;
        let built = compile(&tmp, lib, include).and_then(|()| {
            if wrapper {
                std::os::unix::fs::symlink(&valgrind, tmp.join("valgrind"))
                    .map_err(Error::io("cannot link valgrind's script into", &tmp))?;
            }
            let bin = tmp.join("valgrind.bin");
            std::fs::File::open(&bin)
                .and_then(|f| f.sync_all())
                .map_err(Error::io("cannot sync", &bin))?;
            crate::files::write_file(&tmp.join(BUILT), "cstrace 1\n")
        });
        if let Err(e) = built {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        // another process may have built it meanwhile: either copy is the same; a
        // directory left without its stamp (a build stopped before it) is replaced
        if dir.exists() && !dir.join(BUILT).is_file() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        if std::fs::rename(&tmp, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
            if !dir.join(BUILT).is_file() {
                return Err(Error::Tool(format!(
                    "cannot move the built tool to {}",
                    dir.display()
                )));
            }
        }
        Ok(tool)
    }
}

/// The file a finished build writes last.
const BUILT: &str = "built";

/// The compiler's flags for the tool, as Valgrind's build gives them for amd64-linux.
const CFLAGS: &[&str] = &[
    "-m64",
    "-O2",
    "-fno-strict-aliasing",
    "-fno-builtin",
    "-fno-stack-protector",
    "-fno-pie",
    "-DVGA_amd64=1",
    "-DVGO_linux=1",
    "-DVGP_amd64_linux=1",
    "-DVGPV_amd64_linux_vanilla=1",
    "-c",
];

/// The linker's, as Valgrind links its tools: static, no start files, text at
/// 0x58000000.
const LDFLAGS: &[&str] = &[
    "-m64",
    "-static",
    "-nodefaultlibs",
    "-nostartfiles",
    "-u",
    "_start",
    "-no-pie",
    "-Wl,--build-id=none",
    "-Wl,-Ttext-segment=0x58000000",
    "-o",
];

/// Removes builds under `root` left by processes stopped before they finished (a
/// `.partial-` directory older than an hour).
fn remove_stale_builds(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if old && e.file_name().to_string_lossy().contains(".partial-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Compiles and links the tool in `dir` as `valgrind.bin` ([`CFLAGS`], [`LDFLAGS`]).
fn compile(dir: &Path, lib: &Path, include: &Path) -> Result<()> {
    let src = dir.join("cstrace.c");
    crate::files::write_file(&src, SOURCE)?;
    let obj = dir.join("cstrace.o");
    let run = |args: Vec<std::ffi::OsString>, what: &str| -> Result<()> {
        let out = Command::new("cc")
            .args(&args)
            .output()
            .map_err(|source| Error::Spawn {
                what: "cannot run cc to build cstrace: install a C compiler (apt-get install gcc)"
                    .into(),
                source,
            })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(12).collect();
            return Err(Error::Tool(format!(
                "{what} failed ({}): {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        Ok(())
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let mut cflags: Vec<std::ffi::OsString> = CFLAGS.iter().map(|s| os(s)).collect();
    cflags.push(format!("-I{}", include.display()).into());
    cflags.extend([src.into_os_string(), os("-o"), obj.clone().into_os_string()]);
    run(cflags, "compiling cstrace")?;
    let mut ldflags: Vec<std::ffi::OsString> = LDFLAGS.iter().map(|s| os(s)).collect();
    ldflags.push(dir.join("valgrind.bin").into_os_string());
    ldflags.push(obj.into_os_string());
    ldflags.push(lib.join("libcoregrind-amd64-linux.a").into_os_string());
    ldflags.push(lib.join("libvex-amd64-linux.a").into_os_string());
    ldflags.push(os("-lgcc"));
    ldflags.push(lib.join("libgcc-sup-amd64-linux.a").into_os_string());
    run(ldflags, "linking cstrace against Valgrind's core")
}

/// The first of `dirs` that holds `file` (`what` it is, for the error).
fn first_holding(dirs: &[&'static str], file: &str, what: &str) -> Result<&'static Path> {
    dirs.iter()
        .map(|d| Path::new(*d))
        .find(|d| d.join(file).is_file())
        .ok_or_else(|| Error::Tool(format!("{what} ({file}) is in none of {}", dirs.join(", "))))
}

/// `name` in the directories of `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::{FastTool, Resolved};
    use crate::traces::{record_window_with, Counting, Traced, Window};
    use std::path::Path;
    use std::process::Command;

    /// A static program (no dynamic loader, whose start reads the random bytes the
    /// kernel gives each process, so two runs differ) copying and clearing blocks
    /// with `rep movsb` and `rep stosb` (each iteration an instruction event of lackey's
    /// at one address, a retired instruction once), a zero-count `rep stosb` (one
    /// event, no access), increments of memory by one instruction (lackey's `M`
    /// lines) and a locked exchange-and-add (a compare-and-swap in Valgrind's IR), and
    /// a store that faults in every iteration, after five stores in the same
    /// superblock, into a page its handler then unprotects: lackey loses the pending
    /// events of a superblock a fault leaves, and so must cstrace.
    const PROGRAM: &str = r#"
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
static char a[1 << 16], b[1 << 16];
static char *page;
volatile long sink;
static void on_segv(int s, siginfo_t *si, void *u) {
    (void)s; (void)si; (void)u;
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
}
int main(void) {
    long s = 0, x = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, 0);
    page = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (int r = 0; r < 60; r++) {
        void *d = a; const void *src = b; unsigned long n = 300 + r * 37;
        __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) :: "memory");
        d = b; n = 200 + r;
        __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(r) : "memory");
        for (int i = 0; i < 8192; i += 64) {
            __asm__ volatile("addb $1, %0" : "+m"(a[i]));
            s += a[i] ^ b[i];
        }
        __asm__ volatile("lock xaddq %0, %1" : "+r"(x), "+m"(sink));
        mprotect(page, 4096, PROT_READ);
        __asm__ volatile("movb %%al, (%1)\n\tmovb %%al, 64(%1)\n\tmovb %%al, 128(%1)\n\t"
                         "movb %%al, 192(%1)\n\tmovb %%al, 256(%1)\n\tmovb %%al, (%2)"
                         :: "a"(r), "r"(b), "r"(page) : "memory");
        n = 0; d = a;
        __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(r) : "memory");
    }
    sink = s;
    return 0;
}
"#;

    fn compile(dir: &Path) -> String {
        let src = dir.join("reps.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let exe = dir.join("reps");
        let st = Command::new("cc")
            .args(["-O1", "-static", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .expect("cc (and libc6-dev, for -static) must be installed");
        assert!(st.success(), "compiling the test program failed");
        exe.display().to_string()
    }

    /// cstrace's windows are lackey's, byte for byte: the same events from the same
    /// instruction on, for windows placed in either count, one of them starting on a
    /// `rep` instruction's first iteration. Fails if cstrace prints any line lackey
    /// does not (an event's kind, address or size, a load and store merged where lackey
    /// keeps them apart or the reverse, events of a superblock a fault left),
    /// counts one instruction more or fewer before the window (a `rep` iteration
    /// counted as retired, or not; the instructions a fault's superblock lost), or
    /// runs the program with another environment (the stack's addresses move).
    #[test]
    fn cstrace_records_what_lackey_records() {
        let d = std::env::temp_dir().join(format!("cachesched-cstrace-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // built here, not in the user's tool cache
        let fast = Resolved::Fast(
            FastTool::build_in(&d.join("tools"))
                .expect("cstrace must build here (valgrind, its core libraries and cc)"),
        );
        let exe = compile(&d);
        let cmd = vec![exe];
        let rec = |tracer: &Resolved, out: &Path, window: Window, c: Counting| {
            record_window_with(tracer, &Traced::plain(&cmd), out, window, c, &mut |_| {}).unwrap()
        };
        // from lackey's text of the whole run: its retired instructions and events, and
        // where the first rep instruction in the second half starts
        let (retired, events, first_rep) = rep_positions(&cmd);
        assert!(
            events > retired + 10_000,
            "the rep loops make {events} events of {retired} retired instructions"
        );
        let half = retired / 2;
        let first_rep = first_rep.expect("a rep instruction in the run's second half");
        for (skip, length, c) in [
            (0, 5_000, Counting::Retired),
            (half, 20_000, Counting::Retired),
            (first_rep, 3_000, Counting::Retired),
            (first_rep + 1, 3_000, Counting::Retired),
            (events / 2, 40_000, Counting::Events),
        ] {
            let window = Window { skip, length };
            let (l, f) = (d.join("lackey.cst"), d.join("fast.cst"));
            let rl = rec(&Resolved::Lackey, &l, window, c);
            let rf = rec(&fast, &f, window, c);
            assert_eq!(rl, rf, "{window:?} {c:?}");
            assert!(rl.events > 2_000, "{window:?} {c:?}: {rl:?}");
            let (bl, bf) = (std::fs::read(&l).unwrap(), std::fs::read(&f).unwrap());
            assert!(bl == bf, "{window:?} {c:?}: the traces differ");
        }
        // a skip past the run's end is an error naming it
        let e = record_window_with(
            &fast,
            &Traced::plain(&cmd),
            &d.join("none.cst"),
            Window {
                skip: retired + 1,
                length: 10,
            },
            Counting::Retired,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("ended before"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Lackey's whole run of `cmd`: retired instructions, instruction events, and the
    /// skip that puts a window's start on the first iteration of the first `rep`
    /// instruction in the second half of the retired instructions.
    fn rep_positions(cmd: &[String]) -> (u64, u64, Option<u64>) {
        use cachesched_sim::trace::replay::{LackeyReader, TraceEvent};
        let (mut child, log) = crate::traces::spawn_lackey(cmd, &[], None).unwrap();
        let mut r = LackeyReader::new(std::io::BufReader::new(log));
        let (mut n, mut events, mut last) = (0u64, 0u64, u64::MAX);
        let mut reps = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            if let TraceEvent::Instr { addr, .. } = e {
                events += 1;
                if addr == last {
                    // the second iteration: the first was counted as n, so a window
                    // skipping n - 1 starts on it
                    reps.push(n - 1);
                } else {
                    n += 1;
                }
                last = addr;
            }
        }
        assert!(child.wait().unwrap().success());
        let first = reps.into_iter().find(|&s| s > n / 2);
        (n, events, first)
    }
}
