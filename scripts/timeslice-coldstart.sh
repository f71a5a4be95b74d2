#!/usr/bin/env bash
# Figure 3 of the longer-timeslices paper on this host, by progress instead of miss
# counters: two pointer chases of SIZE KiB each share CPU 0 under 45 ms slices
# (`cachesched run --policy timeslice:slice_ms=45`); each records its steps per 1 ms bin
# from the start of every run on the CPU (`cachesched burn --profile-bin-us 1000`).
# Prints, per size, the mean rate in the first bins as a share of the run's steady rate
# (bins 20-40 ms) and the time the cold start costs (the sum over bins of the share of
# the steady rate not reached, in ms). REPEATS rounds (default 3), sizes interleaved.
# Takes about 2 minutes. Usage: scripts/timeslice-coldstart.sh [BINARY] [REPEATS]
# With PAUSE_PID set, that process is stopped during the measurement (see
# scripts/host-measure.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$repo/target/release/cachesched}
reps=${2:-3}
# shellcheck source=scripts/host-measure.sh
source "$repo/scripts/host-measure.sh"
host_measure_setup
for rep in $(seq "$reps"); do
  for c in "512 80000000" "1536 40000000" "3072 16000000" "8192 12000000"; do
    set -- $c
    "$bin" run --policy timeslice:slice_ms=45 -- "$bin" burn --threads 2 --cpu 0 \
      --chase-kb "$1" --steps "$2" --ms 60000 --profile-bin-us 1000 --report 2>/dev/null |
      sed "s/^/$1 /" >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, sys, collections, statistics as st
prof = collections.defaultdict(list)  # size -> per thread-run: list of per-bin rates
runs = collections.Counter()
for line in open(sys.argv[1]):
    size, js = line.split(" ", 1)
    j = json.loads(js)
    p = j.get("run_profile")
    if not p or len(p["steps_per_ms"]) < 40:
        continue
    prof[int(size)].append(p["steps_per_ms"])
    runs[int(size)] += p["runs"]
print("| working set | runs | 0-1 ms | 1-2 ms | 2-3 ms | 3-4 ms | 4-5 ms | 5-10 ms | 10-20 ms | steady (20-40 ms): steps per us | cold start costs (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for size in sorted(prof):
    shares, costs, steady_all = [], [], []
    for r in prof[size]:
        steady = st.mean(r[20:40])
        steady_all.append(steady)
        sh = [x / steady for x in r]
        shares.append(sh)
        costs.append(sum(max(0.0, 1 - x) for x in sh[:20]))
    m = lambda a, b: st.mean(st.mean(s[a:b]) for s in shares)
    cells = [m(i, i + 1) for i in range(5)] + [m(5, 10), m(10, 20)]
    kib = f"{size // 1024} MiB" if size >= 1024 and size % 1024 == 0 else f"{size} KiB"
    if size == 1536:
        kib = "1.5 MiB"
    print(f"| {kib} | {runs[size]} | " + " | ".join(f"{100 * c:.0f}%" for c in cells)
          + f" | {st.mean(steady_all) / 1000:.1f} | {st.mean(costs):.2f} ± {st.stdev(costs) if len(costs) > 1 else 0:.2f} (sd over threads) |")
PY
