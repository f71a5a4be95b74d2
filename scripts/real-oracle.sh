#!/usr/bin/env bash
# The cachegrind oracle run on the real-program suite: each program of the suite runs
# whole, on a small version of its input, once under cachegrind and once under
# `cachesched replay` (valgrind lackey streamed into this project's cache model with
# cachegrind's rules); the nine counters of the two `summary:` lines (instruction
# fetches, data reads and writes, and their L1 and last-level misses) must be equal.
# Full runs, because cachegrind cannot be limited to a window of instructions; small
# inputs, because lackey runs about 1 M instructions per second.
#
# Inputs come from the suite's trace cache (`cachesched real record PROGRAM` writes them
# there; the script says so if they are missing): the first 32 KiB of the generated
# text, the suite's scripts, scene and model, and a database built natively from
# load.sql with a twenty-fifth of its rows. Commands differ from the suite's in input
# size (gnugo plays 3 moves at level 1, povray renders 32x24, the Lua script builds
# trees of depth 8 instead of 16 and sieves to 20,000, stockfish searches its bench
# positions to depth 1 with a 16 MB hash, glpsol solves a 20 x 60 problem, convert rotates a 64x64 image, cc1 compiles a 17-line C file in place of the
# 140-line one) and in two places in the work done (xz -3 instead of -9, whose start-up
# clears 300 M instructions' worth of match-finder tables).
#
# Programs whose work depends on the clock (Lua's clock-seeded string hashes, glpsol's
# progress lines every half second, stockfish's timing) run with a frozen clock
# (libfaketime, package faketime), so that lackey's slowness (about ten times
# cachegrind's) does not change what they do: glpsol and lua then repeat themselves
# exactly. Some programs still differ from run to run, even under cachegrind (zstd;
# stockfish's and povray's threads); when replay differs, the script runs cachegrind
# four times more: a program whose five runs are equal must equal replay (else DIFFER,
# a failure); otherwise replay must equal one of them or be as close to one as they
# are to each other (within twice their largest relative counter difference).
#
# Usage: scripts/real-oracle.sh [--count] [PROGRAM...]
#   --count  only run each program under cachegrind and print its instruction count
# Caches: --I1 16384,4,32 --D1 8192,4,32 --LL 262144,8,32 (small, so that every level
# misses often). Needs valgrind and the suite's packages; prints one line per program
# and exits non-zero if any differs.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${CACHESCHED:-$repo/target/release/cachesched}
count=0
if [[ ${1:-} == --count ]]; then count=1; shift; fi
cache=$("$bin" real path gzip | xargs dirname)
[[ -f $cache/text.txt ]] || { echo "no inputs in $cache: run 'cachesched real record gzip' first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 32768 "$cache/text.txt" > "$work/text.txt"
head -n 6 "$cache/moves.gtp" > "$work/moves.gtp"
sed -e 's/50000/2000/g; s/300000/12000/g; s/200000/8000/g' "$cache/load.sql" > "$work/load.sql"
sqlite3 "$work/orders.db" ".read $work/load.sql"
sed -e 's/50000/2000/g' "$cache/queries.sql" > "$work/queries.sql"
cat > "$work/small.c" <<'C'
struct node { struct node *next; unsigned key, count; };
static unsigned hash(unsigned x) { x ^= x >> 16; x *= 0x45d9f3bu; return x ^ (x >> 16); }
unsigned count(struct node **tab, unsigned n, const unsigned *keys, unsigned m) {
    unsigned hits = 0;
    for (unsigned i = 0; i < m; i++) {
        struct node *p = tab[hash(keys[i]) % n];
        while (p && p->key != keys[i]) p = p->next;
        if (p) { p->count++; hits++; }
    }
    return hits;
}
double dot(const double *a, const double *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
C
sed -e 's/16/8/g; s/400000/20000/g' "$cache/bench.lua" > "$work/bench.lua"
sed -e 's/param m := 120;/param m := 20;/; s/param n := 400;/param n := 60;/' "$cache/transport.mod" > "$work/transport.mod"
convert-im6.q16 -limit thread 1 -size 64x64 -seed 1 plasma:fractal -strip "$work/small.miff"
I1=16384,4,32 D1=8192,4,32 LL=262144,8,32
failed=0
# Both runs get the same, fixed environment (env -i): the environment's size moves the
# stack and changes the dynamic loader's work, so runs with different environments
# differ in a few dozen instructions and the misses they cause.
one() {
  local name=$1 vars=$2; shift 2
  local -a fixed=(env -i PATH=/usr/bin:/bin:/usr/games HOME="$work")
  # shellcheck disable=SC2206
  fixed+=($vars)
  if [[ ${#programs[@]} -gt 0 && ! " ${programs[*]} " == *" $name "* ]]; then return; fi
  local cg t0 t1 ours theirs
  "${fixed[@]}" valgrind -q --tool=cachegrind --cache-sim=yes --I1=$I1 --D1=$D1 --LL=$LL \
    --cachegrind-out-file="$work/cg.out" "$@" >/dev/null 2>&1 </dev/null
  theirs=$(sed -n 's/^summary: //p' "$work/cg.out")
  if [[ $count == 1 ]]; then
    printf '%-10s %6.1f M instructions\n' "$name" "$(awk '{print $1/1e6}' <<<"$theirs")"
    return
  fi
  t0=$(date +%s.%N)
  ours=$("${fixed[@]}" "$bin" replay --I1 $I1 --D1 $D1 --LL $LL -- "$@" | sed -n 's/^summary: //p')
  t1=$(date +%s.%N)
  if [[ "$ours" == "$theirs" ]]; then
    printf '%-10s equal   %s  (%.1f M instructions, replay %.0f s)\n' "$name" "$ours" \
      "$(awk '{print $1/1e6}' <<<"$ours")" "$(echo "$t1 - $t0" | bc)"
    return
  fi
  # Different: is the program itself the same from run to run? Four more cachegrind
  # runs; a program whose runs differ (it reads the clock, seeds hashes from it) can
  # only be checked against its own spread.
  local more=()
  for _ in 1 2 3 4; do
    "${fixed[@]}" valgrind -q --tool=cachegrind --cache-sim=yes --I1=$I1 --D1=$D1 --LL=$LL \
      --cachegrind-out-file="$work/cg.out" "$@" >/dev/null 2>&1 </dev/null
    more+=("$(sed -n 's/^summary: //p' "$work/cg.out")")
  done
  python3 - "$name" "$ours" "$theirs" "${more[@]}" <<'PY' || failed=1
import sys
name, ours, *cg = sys.argv[1:]
ours = [int(x) for x in ours.split()]
cg = [[int(x) for x in c.split()] for c in cg]
def show():
    print(f"  replay     {' '.join(map(str, ours))}")
    for c in cg:
        print(f"  cachegrind {' '.join(map(str, c))}")
if ours in cg:
    print(f"{name:10} equal to one of five cachegrind runs (the program varies from run to run)")
    show()
    sys.exit(0)
if all(c == cg[0] for c in cg):
    print(f"{name:10} DIFFER  (the program repeats itself under cachegrind, replay does not)")
    show()
    sys.exit(1)
# distance between two runs: the largest relative difference of a counter
def dist(a, b):
    return max(abs(x - y) / max(x, y, 1) for x, y in zip(a, b))
own = max(dist(a, b) for i, a in enumerate(cg) for b in cg[i + 1:])
near = min(dist(ours, c) for c in cg)
inside = near <= 2 * own
print(f"{name:10} {'varies ' if inside else 'OUTSIDE'} the program's five cachegrind runs differ by up to "
      f"{own:.1e} of a counter; replay's counters are within {near:.1e} of the nearest "
      f"({'within' if inside else 'beyond'} twice the program's own spread)")
show()
sys.exit(0 if inside else 1)
PY
}
programs=("$@")
# The frozen clock: the same instant on every call. No shared memory (its name carries
# the pid, whose digits are formatted differently from run to run) and no cache of the
# setting (re-read every ten seconds of real time, so a slower run would read it more
# often and run more instructions).
# (Debian's multiarch directory: gcc, which the suite needs for cc1, names it)
faketime_lib=/usr/lib/$(gcc -print-multiarch)/faketime/libfaketime.so.1
[[ -f $faketime_lib ]] || { echo "no $faketime_lib: install the faketime package" >&2; exit 2; }
frozen="LD_PRELOAD=$faketime_lib FAKETIME_FMT=%s FAKETIME=1767225600 FAKETIME_DISABLE_SHM=1 FAKETIME_NO_CACHE=1"
c=$cache w=$work
one gzip "" gzip -9 -c $w/text.txt
one bzip2 "" bzip2 -9 -c $w/text.txt
one xz "" xz -3 -T1 -c $w/text.txt
one zstd "" zstd --single-thread -3 -c $w/text.txt
one sort "LC_ALL=C" sort -S 256M --parallel=1 -o /dev/null $w/text.txt
one cc1 "" "$(gcc -print-prog-name=cc1)" -quiet -O2 $w/small.c -o /dev/null
one perl "PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0" perl $c/words.pl $w/text.txt
one python3 "PYTHONHASHSEED=0" /usr/bin/python3 $c/work.py $w/text.txt
one lua "$frozen" lua5.4 $w/bench.lua
one sqlite3 "" sqlite3 $w/orders.db ".read $w/queries.sql"
one stockfish "$frozen" /usr/games/stockfish bench 16 1 1
one gnugo "" /usr/games/gnugo --mode gtp --gtp-input $w/moves.gtp --level 1 --seed 1 --quiet
one povray "" povray -D +WT1 +W32 +H24 +A0.3 +I$c/scene.pov +O$w/scene.png
one glpsol "$frozen" glpsol --math $w/transport.mod --seed 1
one convert "" convert-im6.q16 -limit thread 1 $w/small.miff -rotate 90 $w/rotated.miff
exit $failed
