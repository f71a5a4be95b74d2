#!/usr/bin/env bash
# Why Figures 6-8's schedules differ so little on the simulated t1-dual: each of the
# nine programs' L2 misses per 1,000 instructions alone on t1-dual with the whole
# 256 KB L2, 128 KB (an equal share) and 64 KB (one thread, 250 ms measured after
# 150 ms of warm-up, seed 1), beside what it showed as the principal of its fast and
# slow schedules under FX, and every program's L2 misses per 1,000 cycles over all the
# FX runs (its pressure on the cache per unit of time), from the results of
# `cachesched reproduce cachefair --only fig6-8` in results/cachefair/fig6-8.
# Prints the tables of docs/cachefair.md ("What the missing variability comes from").
# Needs a release build (cargo build --release) and python3. Takes about a minute.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cs="$repo/target/release/cachesched"
[ -x "$cs" ] || { echo "build first: cargo build --release" >&2; exit 1; }
res="$repo/results/cachefair/fig6-8"
[ -d "$res" ] || { echo "run first: cachesched reproduce cachefair --only fig6-8" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
progs="art crafty gcc gzip mcf parser twolf vortex vpr"
for p in $progs; do
  for kb in 256 128 64; do
    "$cs" simulate --machine t1-dual --llc-kb "$kb" --mix "$p:1" --duration-ms 400 \
      --warmup-ms 150 --seed 1 --json "$tmp/$p-$kb.json" > /dev/null 2>&1
  done
done
python3 - "$tmp" "$res" $progs <<'PY'
import json, sys, statistics as st
from collections import defaultdict
tmp, res, progs = sys.argv[1], sys.argv[2], sys.argv[3:]
mpki = lambda c: 1000 * c["l2_misses"] / c["instructions"]
def fx_runs(mix):
    return [x for x in json.load(open(f"{res}/{mix}/results.json")) if x["variant"] == "fx"]
print("| program | alone, 256 KB | 128 KB | 64 KB | principal, fast schedule | slow schedule | FX runs (seeds) |")
print("|---|---|---|---|---|---|---|")
for p in progs:
    solo = [mpki(json.load(open(f"{tmp}/{p}-{kb}.json"))["threads"][0]["counters"]) for kb in (256, 128, 64)]
    mix = [[mpki(x["result"]["threads"][0]["counters"]) for x in fx_runs(f"{p}-{s}")] for s in ("fast", "slow")]
    print(f"| {p} | {solo[0]:.1f} | {solo[1]:.1f} | {solo[2]:.1f} | {st.mean(mix[0]):.1f} | {st.mean(mix[1]):.1f} | {len(mix[0])}, {len(mix[1])} |")
per_cycle, cpi = defaultdict(list), defaultdict(list)
for p in progs:
    for s in ("fast", "slow"):
        for x in fx_runs(f"{p}-{s}"):
            for t in x["result"]["threads"]:
                c = t["counters"]
                per_cycle[t["name"]].append(1000 * c["l2_misses"] / c["cycles"])
                cpi[t["name"]].append(c["cycles"] / c["instructions"])
print()
print("| program | CPI in the mixes | L2 misses per 1,000 cycles |")
print("|---|---|---|")
for p in progs:
    print(f"| {p} | {st.mean(cpi[p]):.2f} | {st.mean(per_cycle[p]):.2f} |")
PY
