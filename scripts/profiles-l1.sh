#!/usr/bin/env bash
# The profiles' L1 behaviour alone on niagara-2c (16 KB 4-way L1I with 32-byte lines,
# 8 KB 4-way write-through L1D with 16-byte lines) and clovertown-2x2 (32 KB 8-way L1s,
# 64-byte lines, prefetchers): one thread, 60 ms measured after 40 ms of warm-up,
# seed 1. Prints the rows of docs/workloads.md, "The L1 side, solo": L1I misses per
# 1,000 instructions, L1D misses per L1D reference, L1D misses per 1,000 instructions.
# Needs a release build (cargo build --release). Takes about a minute.
# Usage: scripts/profiles-l1.sh [PROFILE...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cs="$repo/target/release/cachesched"
[ -x "$cs" ] || { echo "build first: cargo build --release" >&2; exit 1; }
profiles=${*:-art mcf gzip twolf vpr crafty gcc parser vortex gap bdb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| profile | niagara-2c L1I MPKI | L1D miss ratio | L1D MPKI | clovertown L1I MPKI | L1D miss ratio | L1D MPKI |"
echo "|---|---|---|---|---|---|---|"
for p in $profiles; do
  row="| $p |"
  for m in niagara-2c clovertown-2x2; do
    "$cs" simulate --machine "$m" --mix "$p:1" --duration-ms 60 --warmup-ms 40 --seed 1 \
      --json "$tmp/r.json" --quiet > /dev/null 2>&1
    row+=$(python3 - "$tmp/r.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
i = t["instructions"]
print(f" {t['l1i_misses'] * 1000 / i:.2f} | {t['l1d_misses'] / t['l1d_refs']:.3f} | {t['l1d_misses'] * 1000 / i:.1f} |", end="")
PY
)
  done
  echo "$row"
done
