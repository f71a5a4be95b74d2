#!/usr/bin/env bash
# Does a thread's cached working set survive its time off the CPU on this host? Two
# measurements on CPU 0, each a fixed amount of pointer chasing (A: 3 MiB, 12 M steps;
# `cachesched burn`), reported as A's CPU time per step (ns):
#  1. A alone, alternating WORK ms of chasing with SLEEP ms asleep (nothing of ours runs
#     while it sleeps);
#  2. A sharing CPU 0 with a second chase B of 0 (none), 64 KiB (fits the L1/L2, evicts
#     next to nothing of A's) or 3 MiB (the study's pair), under Linux's slices and under
#     `cachesched run --policy timeslice:slice_ms=N`.
# Conditions interleaved, REPEATS rounds (default 3). Takes about 4 minutes.
# Usage: scripts/timeslice-decay.sh [BINARY] [REPEATS]
# With PAUSE_PID set, that process is stopped (SIGSTOP) during the measurement and
# continued after, so that a simulation batch does not load the other CPU meanwhile.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$repo/target/release/cachesched}
reps=${2:-3}
# shellcheck source=scripts/host-measure.sh
source "$repo/scripts/host-measure.sh"
host_measure_setup
a="$bin burn --threads 1 --cpu 0 --chase-kb 3072 --steps 12000000 --ms 60000 --report"
for rep in $(seq "$reps"); do
  for c in "15 0" "15 1" "15 4" "15 15" "15 45" "4 4" "4 15" "45 45"; do
    set -- $c
    echo "sleep $1 $2 $($a --work-us $(($1 * 1000)) --sleep-us $(($2 * 1000)) 2>/dev/null | tail -1)" >>"$out"
  done
  for bkb in 0 64 3072; do
    cmd=$a
    [ "$bkb" != 0 ] && cmd="$a & $bin burn --threads 1 --cpu 0 --chase-kb $bkb --ms 1200 >/dev/null & wait"
    for s in linux 3 15 45; do
      if [ "$s" = linux ]; then r=$(sh -c "$cmd" 2>/dev/null | tail -1)
      else r=$("$bin" run --policy "timeslice:slice_ms=$s" -- sh -c "$cmd" 2>/dev/null | tail -1); fi
      echo "pair $bkb $s $r" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import json, sys, collections, statistics as st
t95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26}
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, x, y, js = line.split(" ", 3)
    j = json.loads(js)
    d[(kind, x, y)].append((j["cpu_ms"] * 1e6 / j["steps"], j["involuntary_switches"]))
def show(v):
    ns = [a for a, _ in v]
    h = t95.get(len(ns), 2.0) * st.stdev(ns) / len(ns) ** 0.5 if len(ns) > 1 else float("nan")
    return f"{st.mean(ns):.1f} ± {h:.1f}", f"{st.mean(s for _, s in v):.0f}"
print("| A alone: work ms | sleep ms | ns per step | switches |\n|---|---|---|---|")
for (k, x, y), v in d.items():
    if k == "sleep":
        m, s = show(v)
        print(f"| {x} | {y} | {m} | {s} |")
print("\n| B's working set | slices | A: ns per step | A: switches |\n|---|---|---|---|")
for (k, x, y), v in d.items():
    if k == "pair":
        m, s = show(v)
        print(f"| {'none' if x == '0' else x + ' KiB'} | {y if y == 'linux' else y + ' ms'} | {m} | {s} |")
print(f"\n{len(set(len(v) for v in d.values()))} repeat count(s): {sorted(set(len(v) for v in d.values()))}")
PY
