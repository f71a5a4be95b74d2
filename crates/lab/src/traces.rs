//! Program traces recorded with valgrind's lackey: a command's memory references
//! streamed, or a window of its run written as a binary trace; and a trace file
//! replayed through cachegrind's cache rules ([`replay_file`]).

use crate::error::{Error, Result, ResultExt};
use crate::tracer::{Resolved, Tracer};
use cachesched_sim::trace::replay::{parse_cg_cache, CgSim, LackeyReader, TraceEvent};
use cachesched_sim::trace::{
    is_binary_trace, is_compressed, read_trace_file, replay_binary, replay_binary_slice, verify,
    TraceWriter,
};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Runs the valgrind command `c` to its end, its output discarded (the tools write
/// their results to files); an error saying to install valgrind if it cannot start.
pub fn run_valgrind(c: &mut Command) -> Result<std::process::ExitStatus> {
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| Error::Spawn {
            what: "cannot run valgrind: install it (e.g. `apt-get install valgrind`)".into(),
            source,
        })
}

/// The standard input of a traced command: the file at `stdin`, else nothing.
pub fn stdin_of(stdin: Option<&Path>) -> Result<Stdio> {
    Ok(match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).map_err(Error::io("cannot open", p))?),
        None => Stdio::null(),
    })
}

/// A command to trace: its arguments, what is added to its environment, the file (if
/// any) that is its standard input, and the exit codes that mean it ran to its end
/// as intended (0 for most programs; a SAT solver's 10 and 20).
#[derive(Clone, Copy, Debug)]
pub struct Traced<'a> {
    /// The command and its arguments.
    pub cmd: &'a [String],
    /// Variables added to its environment.
    pub env: &'a [(&'a str, &'a str)],
    /// Its standard input (none: `/dev/null`).
    pub stdin: Option<&'a Path>,
    /// The exit codes of a run that ended as intended.
    pub exit_codes: &'a [i32],
}

impl<'a> Traced<'a> {
    /// Whether a run that ended with `status` ended as intended: with one of its exit
    /// codes (a signal is never one).
    pub fn succeeded(&self, status: std::process::ExitStatus) -> bool {
        status.code().is_some_and(|c| self.exit_codes.contains(&c))
    }

    /// `cmd` alone: no environment added, no standard input, exit code 0.
    pub fn plain(cmd: &'a [String]) -> Traced<'a> {
        Traced {
            cmd,
            env: &[],
            stdin: None,
            exit_codes: &[0],
        }
    }

    /// Appends the command to `c` (a valgrind command line) with its environment and
    /// standard input: the variables added, the recorder's own
    /// ([`crate::tracer::RECORDER_VARS`]) removed, since a variable more or less moves
    /// the program's stack and every address on it. Recordings and exp-bbv's runs
    /// start their programs through it alike.
    pub fn append_to<'c>(&self, c: &'c mut Command) -> Result<&'c mut Command> {
        for v in crate::tracer::RECORDER_VARS {
            c.env_remove(v);
        }
        Ok(c.args(self.cmd)
            .envs(self.env.iter().copied())
            .stdin(stdin_of(self.stdin)?))
    }
}

/// Starts `valgrind --tool=lackey` on `cmd` (with `env` added, and the file `stdin`,
/// if any, as its standard input) with the trace on a pipe of its own (valgrind's
/// descriptor 3), so that whatever the program writes to its stderr cannot mix into
/// the trace; returns the child and the pipe.
pub fn spawn_lackey(
    cmd: &[String],
    env: &[(&str, &str)],
    stdin: Option<&Path>,
) -> Result<(Child, std::fs::File)> {
    let t = Traced {
        cmd,
        env,
        stdin,
        exit_codes: &[0],
    };
    Resolved::Lackey.spawn(&t, 0, Counting::Events)
}

/// Streams the events of `t`'s command (lackey's, from the tracer
/// [`Tracer::from_env`] names) into `f`, until the command ends or `f` answers `false`
/// (then the command is killed: a window of its run is all that was wanted).
pub fn trace_command(t: &Traced<'_>, f: impl FnMut(TraceEvent) -> Result<bool>) -> Result<()> {
    trace_command_with(&Tracer::from_env()?.resolve()?, t, f)
}

/// [`trace_command`] under `tracer`.
pub fn trace_command_with(
    tracer: &Resolved,
    t: &Traced<'_>,
    mut f: impl FnMut(TraceEvent) -> Result<bool>,
) -> Result<()> {
    with_tracer(tracer, t, 0, Counting::Events, |reader| {
        while let Some(ev) = reader.next_event()? {
            if !f(ev)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
}

/// Lackey's output as [`with_tracer`] hands it over.
type LackeyLog = LackeyReader<BufReader<Batched<std::fs::File>>>;

/// A pipe's read end read in batches: a read that returns less than [`Batched::LOW`]
/// bytes is followed by a nap of [`Batched::NAP`], so the writer's next chunks
/// accumulate in the pipe instead of each waking the reader. Valgrind writes its log
/// a few hundred bytes at a time; read eagerly, a recording's reader woke about
/// 88,000 times a second and took a third of the CPU lackey and it used (two
/// recordings on this machine's two cores, 2026-12-07).
pub struct Batched<R> {
    /// The pipe.
    inner: R,
}

impl<R> Batched<R> {
    /// Reads shorter than this are followed by a nap.
    pub const LOW: usize = 64 << 10;
    /// How long the nap is: long enough for lackey to write tens of kilobytes, short
    /// enough that even a 64 KiB pipe (if it could not be enlarged) holds what it
    /// writes meanwhile.
    pub const NAP: std::time::Duration = std::time::Duration::from_millis(1);

    /// Reads `inner` in batches.
    pub fn new(inner: R) -> Batched<R> {
        Batched { inner }
    }
}

impl<R: std::io::Read> std::io::Read for Batched<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 && n < Self::LOW.min(buf.len()) {
            std::thread::sleep(Self::NAP);
        }
        Ok(n)
    }
}

/// Runs `t`'s command under `tracer` ([`Resolved::spawn`]: lackey's output from the
/// instruction after the first `skip`, counted as `counting` says, where the tracer
/// skips; from the start under lackey) and hands the output to `read`, which answers
/// whether it read to the end (`false`: it wanted no more, and the command is killed);
/// a command that was read to its end must have succeeded.
fn with_tracer(
    tracer: &Resolved,
    t: &Traced<'_>,
    skip: u64,
    counting: Counting,
    read: impl FnOnce(&mut LackeyLog) -> Result<bool>,
) -> Result<()> {
    let (mut child, log) = tracer.spawn(t, skip, counting)?;
    let mut reader = LackeyReader::new(BufReader::with_capacity(1 << 20, Batched::new(log)));
    // cstrace prints nothing while it skips (seconds to a minute), so the reader,
    // which looks at the interrupt flag between events, would wait that long: a
    // watcher stops the traced command at once on Ctrl-C or SIGTERM
    let stop = crate::interrupt::interrupt_flag();
    let done = std::sync::atomic::AtomicBool::new(false);
    let pid = i32::try_from(child.id()).unwrap_or(0);
    let res = std::thread::scope(|sc| {
        sc.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if stop.load(std::sync::atomic::Ordering::Relaxed) && pid > 0 {
                    cachesched_linux::process::send(pid, 9);
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let r = read(&mut reader);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    if stop.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = child.kill();
        let _ = child.wait();
        return match res {
            Err(e @ Error::Interrupted { .. }) => Err(e),
            // stopped during cstrace's skip: nothing was traced yet
            _ => Err(Error::Interrupted { instructions: 0 }),
        };
    }
    if !matches!(res, Ok(true)) {
        let _ = child.kill();
    }
    let status = child.wait().map_err(Error::TraceIo)?;
    let finished = res?;
    if finished && !t.succeeded(status) {
        return Err(Error::Tool(format!(
            "traced command exited with {status} (expected exit codes: {:?})",
            t.exit_codes
        )));
    }
    Ok(())
}

/// Which part of a run to record, in instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Instructions executed before recording starts.
    pub skip: u64,
    /// Instructions recorded (`u64::MAX`: to the end).
    pub length: u64,
}

impl Window {
    /// The whole run.
    pub const ALL: Window = Window {
        skip: 0,
        length: u64::MAX,
    };
}

/// How a [`Window`]'s instructions are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// Every instruction event lackey reports, each iteration of a `rep`-prefixed
    /// string instruction included (how the suite's first windows were given).
    Events,
    /// Instructions as the processor retires them and valgrind's exp-bbv counts them:
    /// a `rep`-prefixed instruction once, however many iterations it makes (lackey
    /// reports each iteration as an instruction at the same address, so an
    /// instruction event at the address of the one before it is not counted). Windows
    /// chosen from basic-block vectors ([`crate::bbv`]) are given in this count.
    Retired,
}

impl Counting {
    /// Whether an instruction event at `addr`, after one at `last` (`u64::MAX`: none
    /// yet), counts.
    pub fn counts(self, addr: u64, last: u64) -> bool {
        self == Counting::Events || addr != last
    }
}

/// What a recording wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recording {
    /// Events written.
    pub events: u64,
    /// Bytes of the trace, uncompressed.
    pub bytes: u64,
    /// Bytes of the file (less than `bytes` if it is compressed).
    pub file_bytes: u64,
    /// Instruction events written (lackey's count: every `rep` iteration).
    pub instructions: u64,
    /// The window's instructions as the window counts them ([`Counting`]: retired
    /// instructions or events), its length unless the program ended first.
    pub counted: u64,
}

/// zstd level of compressed traces. On the 99.6 MB trace of real:lua, level 3 made
/// 4.8 MB, level 9 3.7 MB and level 19 2.9 MB; level 9 took about 1 s per 100 MB and
/// level 19 42 s (the `zstd` tool, one thread, 2026-12-06).
pub const ZSTD_LEVEL: i32 = 9;

/// Records `cmd`'s events within `window` (counted as `counting` says) into a binary
/// trace at `out`, `env` added to its environment and `stdin` (if any) its standard
/// input; a name ending in `.zst` is written
/// zstd-compressed. The command is stopped once the window is recorded. A failed or
/// interrupted recording leaves no half-written trace behind. `progress` is called with
/// the instructions counted so far (skipped ones included) every 2^20 instruction
/// events ([`Progress`] prints them).
/// The tracer is the one [`Tracer::from_env`] names ([`record_window_with`] takes
/// one).
pub fn record_window(
    t: &Traced<'_>,
    out: &Path,
    window: Window,
    counting: Counting,
    progress: &mut dyn FnMut(u64),
) -> Result<Recording> {
    let tracer = Tracer::from_env()?.resolve()?;
    record_window_with(&tracer, t, out, window, counting, progress)
}

/// [`record_window`] with `tracer`. Whichever it is, the trace holds the same events:
/// cstrace skips the window's start itself and prints what lackey prints from there.
pub fn record_window_with(
    tracer: &Resolved,
    t: &Traced<'_>,
    out: &Path,
    window: Window,
    counting: Counting,
    progress: &mut dyn FnMut(u64),
) -> Result<Recording> {
    let compress = out.extension().is_some_and(|e| e == "zst");
    record_into(tracer, t, out, window, counting, compress, progress).inspect_err(|_| {
        let _ = std::fs::remove_file(out);
    })
}

/// A recording's progress line on standard error, at most once per
/// [`Progress::EVERY`]: instructions counted of the run's part to go through (the skip
/// and the window), the share, the time so far and, at the rate so far, the time left.
/// A recording of a 200 M window after billions of skipped instructions takes an hour
/// or more under lackey.
pub struct Progress {
    /// What is recorded, as the line names it (`real:glpsol`).
    label: String,
    /// Instructions to go through: the skip and the window (`None`: to the run's end).
    total: Option<u64>,
    /// When the recording started.
    start: std::time::Instant,
    /// When the last line was printed.
    last: std::time::Instant,
}

impl Progress {
    /// How often a line is printed at most.
    pub const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

    /// Progress of recording `window` of `label`.
    pub fn new(label: impl Into<String>, window: Window) -> Progress {
        let now = std::time::Instant::now();
        Progress {
            label: label.into(),
            // `u64::MAX`: to the end, however long that is
            total: (window.length != u64::MAX)
                .then(|| window.skip.checked_add(window.length))
                .flatten(),
            start: now,
            last: now,
        }
    }

    /// The line for `counted` instructions after `elapsed`.
    pub fn line(&self, counted: u64, elapsed: std::time::Duration) -> String {
        let m = |n: u64| n / 1_000_000;
        let mins = elapsed.as_secs_f64() / 60.0;
        match self.total {
            Some(total) if total > 0 => {
                let done = counted.min(total) as f64 / total as f64;
                let left = if done > 0.0 {
                    format!(", about {:.0} min left", mins * (1.0 - done) / done)
                } else {
                    String::new()
                };
                format!(
                    "{}: {} M of {} M instructions ({:.0}%) in {mins:.0} min{left}",
                    self.label,
                    m(counted),
                    m(total),
                    done * 100.0
                )
            }
            _ => format!(
                "{}: {} M instructions in {mins:.0} min",
                self.label,
                m(counted)
            ),
        }
    }

    /// Prints the line for `counted` if [`Progress::EVERY`] has passed since the last.
    pub fn update(&mut self, counted: u64) {
        let now = std::time::Instant::now();
        if now.duration_since(self.last) >= Self::EVERY {
            self.last = now;
            eprintln!("{}", self.line(counted, now.duration_since(self.start)));
        }
    }
}

/// Where a recording writes: the file, or a zstd stream into it, counting the bytes
/// of the trace that pass (uncompressed).
struct Sink {
    /// The file.
    out: SinkFile,
    /// Bytes written into it so far, before compression.
    written: u64,
}

/// [`Sink`]'s file.
enum SinkFile {
    /// Uncompressed.
    Plain(BufWriter<std::fs::File>),
    /// zstd-compressed at [`ZSTD_LEVEL`].
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<std::fs::File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.out {
            SinkFile::Plain(w) => w.write(buf)?,
            SinkFile::Zstd(w) => w.write(buf)?,
        };
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.out {
            SinkFile::Plain(w) => w.flush(),
            SinkFile::Zstd(w) => w.flush(),
        }
    }
}

impl Sink {
    /// Ends the zstd frame (if any) and flushes everything to the file.
    fn finish(self) -> std::io::Result<()> {
        match self.out {
            SinkFile::Plain(mut w) => w.flush(),
            SinkFile::Zstd(w) => w.finish()?.flush(),
        }
    }
}

/// [`record_window`]'s work, leaving the file as it is on error.
fn record_into(
    tracer: &Resolved,
    t: &Traced<'_>,
    out: &Path,
    window: Window,
    counting: Counting,
    compress: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Recording> {
    let f = std::fs::File::create(out).map_err(Error::io("cannot create", out))?;
    let file = if compress {
        SinkFile::Zstd(
            zstd::stream::write::Encoder::new(BufWriter::new(f), ZSTD_LEVEL)
                .map_err(Error::TraceIo)?,
        )
    } else {
        SinkFile::Plain(BufWriter::new(f))
    };
    let sink = Sink {
        out: file,
        written: 0,
    };
    let mut w = TraceWriter::new(sink).map_err(Error::TraceIo)?;
    let stop = crate::interrupt::interrupt_flag();
    // Ctrl-C or SIGTERM: stop the traced command too, not only ourselves
    let interrupted = || stop.load(std::sync::atomic::Ordering::Relaxed);
    let mut copied = Copied::default();
    // a tracer that skips prints from the window's first instruction: what is left to
    // count is the window, and the progress adds the skip
    let (tool_skip, left) = if tracer.skips() {
        (
            window.skip,
            Window {
                skip: 0,
                length: window.length,
            },
        )
    } else {
        (0, window)
    };
    let mut progress_all = |n: u64| progress(n.saturating_add(tool_skip));
    with_tracer(tracer, t, tool_skip, counting, |reader| {
        let (to_end, c) = copy_window(
            reader,
            &mut w,
            left,
            counting,
            &mut progress_all,
            &interrupted,
        )?;
        copied = c;
        Ok(to_end)
    })?;
    if tool_skip > 0 && copied.counted == 0 {
        return Err(Error::Tool(format!(
            "'{}' ended before the {} instructions to skip ({} printed nothing)",
            t.cmd.join(" "),
            window.skip,
            tracer.name()
        )));
    }
    copied.counted = copied.counted.saturating_add(tool_skip);
    if copied.counted <= window.skip {
        return Err(Error::Tool(format!(
            "'{}' ended after {} instructions, before the {} to skip",
            t.cmd.join(" "),
            copied.counted,
            window.skip
        )));
    }
    let events_written = w.events;
    let sink = w.finish().map_err(Error::TraceIo)?;
    let bytes = sink.written;
    sink.finish().map_err(Error::TraceIo)?;
    let file_bytes = std::fs::metadata(out)
        .map_err(Error::io("cannot read the size of", out))?
        .len();
    Ok(Recording {
        events: events_written,
        bytes,
        file_bytes,
        instructions: copied.in_window,
        counted: copied
            .counted
            .min(window.skip.saturating_add(window.length))
            - window.skip,
    })
}

/// What [`copy_window`] counted.
#[derive(Debug, Default, Clone, Copy)]
struct Copied {
    /// Instructions as the window counts them, up to the last one read.
    counted: u64,
    /// Instruction events written.
    in_window: u64,
}

/// The instructions a recording has gone through, counted as its window counts them,
/// with the progress report and the interrupt check every 2^20 instruction events:
/// what [`copy_window`]'s skip and its window share.
struct Count<'a> {
    /// How the window counts.
    counting: Counting,
    /// Instructions counted (skipped ones included).
    counted: u64,
    /// Every instruction event.
    events: u64,
    /// The last instruction's address (`u64::MAX`: none yet).
    last_addr: u64,
    /// Gets `counted` every 2^20 events.
    progress: &'a mut dyn FnMut(u64),
    /// Asked every 2^20 events: Ctrl-C or SIGTERM.
    interrupted: &'a dyn Fn() -> bool,
}

impl Count<'_> {
    /// Whether an instruction at `addr` would count.
    fn counts(&self, addr: u64) -> bool {
        self.counting.counts(addr, self.last_addr)
    }

    /// Counts an instruction event at `addr`; fails if the recording was interrupted
    /// (so the traced command is stopped too, not only ourselves).
    fn instruction(&mut self, addr: u64) -> Result<()> {
        self.events += 1;
        self.counted += u64::from(self.counts(addr));
        self.last_addr = addr;
        if self.events.is_multiple_of(1 << 20) {
            if (self.interrupted)() {
                return Err(Error::Interrupted {
                    instructions: self.events,
                });
            }
            (self.progress)(self.counted);
        }
        Ok(())
    }
}

/// Copies `window` of lackey's output in `reader` (counted as `counting` says) into
/// `w`: the skip passed over without reading its events
/// ([`LackeyReader::skip_until`]), then the window's events. Answers whether the
/// output was read to its end (`false`: the window ended first) and what it counted.
/// `progress` gets the count every 2^20 instruction events, when `interrupted` is
/// also asked.
fn copy_window<R: std::io::BufRead, W: Write>(
    reader: &mut LackeyReader<R>,
    w: &mut TraceWriter<W>,
    window: Window,
    counting: Counting,
    progress: &mut dyn FnMut(u64),
    interrupted: &dyn Fn() -> bool,
) -> Result<(bool, Copied)> {
    let end = window.skip.saturating_add(window.length);
    let mut c = Count {
        counting,
        counted: 0,
        events: 0,
        last_addr: u64::MAX,
        progress,
        interrupted,
    };
    // the skip, up to the instruction that would be the window's first
    let mut failed = None;
    reader.skip_until(|addr| {
        if c.counts(addr) && c.counted == window.skip {
            return true;
        }
        match c.instruction(addr) {
            Ok(()) => false,
            Err(e) => {
                failed = Some(e);
                true
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut in_window = 0u64;
    while let Some(e) = reader.next_event()? {
        if let TraceEvent::Instr { addr, .. } = e {
            c.instruction(addr)?;
            if c.counted > end {
                let counted = c.counted;
                return Ok((false, Copied { counted, in_window }));
            }
            if c.counted > window.skip {
                in_window += 1;
            }
        }
        if c.counted > window.skip {
            w.write(e).map_err(Error::TraceIo)?;
        }
    }
    let counted = c.counted;
    Ok((true, Copied { counted, in_window }))
}

/// The caches of a replay, each as cachegrind writes them: `size_bytes,ways,line_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSpecs {
    /// The first-level instruction cache (cachegrind's `--I1`).
    pub i1: String,
    /// The first-level data cache (`--D1`).
    pub d1: String,
    /// The last-level cache (`--LL`).
    pub ll: String,
}

impl Default for CacheSpecs {
    /// 32 KB 8-way L1s and an 8 MB 16-way last level, 64-byte lines.
    fn default() -> CacheSpecs {
        CacheSpecs {
            i1: "32768,8,64".into(),
            d1: "32768,8,64".into(),
            ll: "8388608,16,64".into(),
        }
    }
}

impl CacheSpecs {
    /// A cold simulator of these caches.
    pub fn sim(&self) -> Result<CgSim> {
        Ok(CgSim::new(
            parse_cg_cache("I1", &self.i1)?,
            parse_cg_cache("D1", &self.d1)?,
            parse_cg_cache("LL", &self.ll)?,
        )?)
    }
}

/// Replays a trace file into `sim`: binary (zstd-compressed or not) or lackey text,
/// told apart by its first bytes; `-` reads standard input. A binary file is
/// memory-mapped rather than read (a compressed one decompressed into memory), and
/// checked whole first (end record, hash): a damaged one is refused, not replayed in
/// part.
pub fn replay_file(sim: &mut CgSim, path: &str) -> Result<()> {
    if path != "-" {
        let map = cachesched_linux::Mapped::open(Path::new(path))
            .map_err(Error::io("cannot open trace file", path))?;
        if is_compressed(&map) {
            let bytes = read_trace_file(Path::new(path)).map_err(Error::io("cannot read", path))?;
            verify(&bytes).within(|| format!("in trace '{path}'"))?;
            replay_binary_slice(sim, &bytes).within(|| format!("in trace '{path}'"))?;
            return Ok(());
        }
        if is_binary_trace(&map) {
            verify(&map).within(|| format!("in trace '{path}'"))?;
            replay_binary_slice(sim, &map).within(|| format!("in trace '{path}'"))?;
            return Ok(());
        }
    }
    let input: Box<dyn BufRead> = if path == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin().lock()))
    } else {
        let f = std::fs::File::open(path).map_err(Error::io("cannot open trace file", path))?;
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    replay_stream(sim, input, path)
}

/// The first 8 bytes of `input` (fewer at its end; a pipe may hand over fewer at a
/// time than a magic number holds) and a reader that still starts with them.
fn peek<'a>(
    mut input: Box<dyn BufRead + 'a>,
    path: &str,
) -> Result<(Vec<u8>, Box<dyn BufRead + 'a>)> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    (&mut input)
        .take(8)
        .read_to_end(&mut head)
        .map_err(Error::io("cannot read", path))?;
    Ok((
        head.clone(),
        Box::new(std::io::Cursor::new(head).chain(input)),
    ))
}

/// Replays the trace streamed from `input` (`path` names it in errors): a binary trace,
/// zstd-compressed or not (decompressed as it streams: standard input has no size to
/// check in advance), or lackey's text.
fn replay_stream(sim: &mut CgSim, input: Box<dyn BufRead>, path: &str) -> Result<()> {
    let (head, mut input) = peek(input, path)?;
    if is_compressed(&head) {
        let d = zstd::stream::read::Decoder::with_buffer(input)
            .map_err(Error::io("cannot decompress", path))?;
        input = Box::new(BufReader::with_capacity(1 << 20, d));
    }
    let (head, input) = peek(input, path)?;
    let binary = is_binary_trace(&head);
    if binary {
        replay_binary(sim, input).within(|| format!("in trace '{path}'"))?;
    } else {
        let mut reader = LackeyReader::new(input);
        while let Some(ev) = reader
            .next_event()
            .within(|| format!("in trace '{path}'"))?
        {
            sim.event(ev);
        }
    }
    Ok(())
}

#[cfg(test)]
mod counting_tests {
    use super::Counting;

    /// lackey's instruction addresses for `mov; rep stosb` (3 iterations); `add`;
    /// `jmp` back to the `mov`: a loop of two turns.
    const STREAM: [u64; 12] = [
        0x10, 0x13, 0x13, 0x13, 0x15, 0x18, 0x10, 0x13, 0x13, 0x13, 0x15, 0x18,
    ];

    fn count(c: Counting) -> usize {
        let mut last = u64::MAX;
        STREAM
            .iter()
            .filter(|&&a| {
                let n = c.counts(a, last);
                last = a;
                n
            })
            .count()
    }

    /// A traced command ends as intended only with one of its exit codes: a SAT
    /// solver's 10 is a failure for a command expecting 0 and success for one
    /// expecting 10 or 20 (fails if `exit_codes` were ignored again). Runs `sh` under
    /// valgrind (about a second).
    #[test]
    fn a_traced_commands_exit_codes_decide_whether_it_failed() {
        use super::{trace_command_with, Resolved, TraceEvent, Traced};
        // lackey: the fallback keeps its tests (cstrace's equality is tracer.rs's),
        // and nothing is built into the user's tool cache
        let trace_command =
            |t: &Traced<'_>, f: &mut dyn FnMut(TraceEvent) -> crate::error::Result<bool>| {
                trace_command_with(&Resolved::Lackey, t, f)
            };
        let cmd: Vec<String> = ["sh", "-c", "exit 10"].map(String::from).to_vec();
        let mut n = 0u64;
        let e = trace_command(&Traced::plain(&cmd), &mut |_e: TraceEvent| {
            n += 1;
            Ok(true)
        })
        .unwrap_err();
        assert!(e.to_string().contains("exit status: 10"), "{e}");
        assert!(n > 1000, "{n} events: the command was traced");
        let sat = Traced {
            exit_codes: &[10, 20],
            ..Traced::plain(&cmd)
        };
        trace_command(&sat, &mut |_e| Ok(true)).unwrap();
    }

    /// A window of `sh`'s run recorded both ways holds its length in counted
    /// instructions; counted by retired instructions it holds at least as many
    /// instruction events (a `rep` string instruction is one retired instruction and
    /// an event per iteration). Fails if the window's count were off by its skip, or
    /// if the events were counted short of the retired instructions.
    #[test]
    fn progress_lines_give_the_share_and_the_time_left() {
        use super::{Progress, Window};
        use std::time::Duration;
        let window = Window {
            skip: 4_620_000_000,
            length: 200_000_000,
        };
        let p = Progress::new("real:glpsol", window);
        // a quarter of 4,820 M in 20 minutes: 60 minutes to go at that rate
        assert_eq!(
            p.line(1_205_000_000, Duration::from_secs(1200)),
            "real:glpsol: 1205 M of 4820 M instructions (25%) in 20 min, about 60 min left"
        );
        assert_eq!(
            p.line(0, Duration::ZERO),
            "real:glpsol: 0 M of 4820 M instructions (0%) in 0 min"
        );
        // a whole run has no total to share
        let all = Progress::new("t.cst", Window::ALL);
        assert_eq!(
            all.line(3_000_000, Duration::from_secs(120)),
            "t.cst: 3 M instructions in 2 min"
        );
    }

    #[test]
    fn a_window_holds_the_events_reading_all_of_them_finds_there() {
        use super::{copy_window, Window};
        use cachesched_sim::trace::format::TraceWriter;
        use cachesched_sim::trace::replay::{LackeyReader, TraceEvent};
        use std::io::BufReader;
        // lackey's output for a small run, once (a second run differs: the shell's
        // environment and stack move its addresses)
        let d = std::env::temp_dir().join(format!("cachesched-skip-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let log = d.join("lackey.txt");
        let ok = std::process::Command::new("valgrind")
            .args(["-q", "--tool=lackey", "--trace-mem=yes"])
            .arg(format!("--log-file={}", log.display()))
            .args(["sh", "-c", "exit 0"])
            .status()
            .unwrap();
        assert!(ok.success());
        let text = std::fs::read(&log).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        let all: Vec<TraceEvent> = LackeyReader::new(&text[..]).map(|e| e.unwrap()).collect();
        // a skip that ends just before a `rep` iteration (an instruction at the address
        // of the one before: not counted when retired instructions are, so the window
        // starts after it), and one that need not
        let (mut n, mut last) = (0u64, u64::MAX);
        let mut before_rep = None;
        for e in &all {
            if let TraceEvent::Instr { addr, .. } = *e {
                if addr == last && n > 1_000 {
                    before_rep = Some(n);
                    break;
                }
                n += u64::from(addr != last);
                last = addr;
            }
        }
        let before_rep = before_rep.expect("a rep-prefixed instruction in the shell's run");
        let length = 30_000u64;
        for (skip, c) in [
            (20_000, Counting::Events),
            (20_000, Counting::Retired),
            (before_rep, Counting::Retired),
        ] {
            // the window as reading every event of the run finds it
            let (mut n, mut last) = (0u64, u64::MAX);
            let mut want = Vec::new();
            for &e in &all {
                if let TraceEvent::Instr { addr, .. } = e {
                    n += u64::from(c.counts(addr, last));
                    last = addr;
                    if n > skip + length {
                        break;
                    }
                }
                if n > skip {
                    want.push(e);
                }
            }
            assert!(n > skip + length, "{c:?}: the run has {n} instructions");
            let mut w = TraceWriter::new(Vec::new()).unwrap();
            for e in want {
                w.write(e).unwrap();
            }
            let want = w.finish().unwrap();
            assert!(want.len() > 30_000, "{c:?}: {} bytes", want.len());
            // 4 KB buffers cut lackey's lines at their edges
            for cap in [4096, 1 << 20] {
                let mut r = LackeyReader::new(BufReader::with_capacity(cap, &text[..]));
                let mut w = TraceWriter::new(Vec::new()).unwrap();
                let window = Window { skip, length };
                let (to_end, copied) =
                    copy_window(&mut r, &mut w, window, c, &mut |_| {}, &|| false).unwrap();
                assert!(!to_end);
                assert_eq!(copied.counted, skip + length + 1, "{c:?}");
                // the binary form folds events (runs of hits): compare what each writes
                let got = w.finish().unwrap();
                assert!(
                    got == want,
                    "{c:?}, buffer {cap}: {} bytes, want {}",
                    got.len(),
                    want.len()
                );
            }
        }
    }

    #[test]
    fn a_windows_counted_instructions_are_its_length() {
        use super::{record_window_with, Recording, Resolved, Traced, Window};
        let cmd: Vec<String> = ["sh", "-c", "exit 0"].map(String::from).to_vec();
        let d = std::env::temp_dir().join(format!("cachesched-window-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let window = Window {
            skip: 20_000,
            length: 30_000,
        };
        let rec = |c: Counting| -> Recording {
            record_window_with(
                &Resolved::Lackey,
                &Traced::plain(&cmd),
                &d.join("w.cst"),
                window,
                c,
                &mut |_| {},
            )
            .unwrap()
        };
        let e = rec(Counting::Events);
        assert_eq!((e.counted, e.instructions), (30_000, 30_000));
        // uncompressed, the trace's bytes are the file's (the last buffer included)
        assert_eq!(e.bytes, e.file_bytes);
        let r = rec(Counting::Retired);
        assert_eq!(r.counted, 30_000);
        assert!(r.instructions >= r.counted, "{r:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A zstd-compressed trace streamed (as `replay -` reads standard input) replays to
    /// the same counts as the same trace uncompressed; before, its first bytes were
    /// taken for lackey's text and refused. Fails if compression were not detected.
    #[test]
    fn a_compressed_stream_replays_as_the_uncompressed_one() {
        use super::{replay_stream, CacheSpecs, TraceEvent, TraceWriter};
        let mut w = TraceWriter::new(Vec::new()).unwrap();
        for i in 0..20_000u64 {
            w.write(TraceEvent::Instr {
                addr: 0x40_0000 + (i % 500) * 4,
                size: 4,
            })
            .unwrap();
            w.write(TraceEvent::Load {
                addr: 0x1000_0000 + (i * 4096) % (1 << 24),
                size: 8,
            })
            .unwrap();
        }
        let plain = w.finish().unwrap();
        let packed = zstd::encode_all(plain.as_slice(), 3).unwrap();
        assert_ne!(plain[..4], packed[..4]);
        // a pipe handing over one byte at a time: the magic numbers are read whole
        let replay = |bytes: Vec<u8>, at_a_time: usize| {
            let mut sim = CacheSpecs::default().sim().unwrap();
            let r = std::io::BufReader::with_capacity(at_a_time, std::io::Cursor::new(bytes));
            replay_stream(&mut sim, Box::new(r), "-").unwrap();
            sim.report("t")
        };
        let a = replay(plain.clone(), 1 << 16);
        assert_eq!(a, replay(packed.clone(), 1 << 16));
        assert_eq!(a, replay(plain, 1));
        assert_eq!(a, replay(packed, 1));
        assert!(a.contains("20,000") || a.contains("20000"), "{a}");
    }

    #[test]
    fn retired_counts_a_rep_instruction_once_and_events_every_iteration() {
        assert_eq!(count(Counting::Events), 12);
        // per turn: mov, rep stosb once, add, jmp; the jmp's target (0x10) differs
        // from the jmp, so the loop's next turn counts again
        assert_eq!(count(Counting::Retired), 8);
    }
}
