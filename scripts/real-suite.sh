#!/usr/bin/env bash
# The real-program suite's rows of docs/workloads.md, "Real programs": for each program,
# its recording (instructions, events, trace size, seconds, from the cache's .json),
# its data miss-ratio curve (`cachesched mrc --trace`: fully associative LRU, 64-byte
# lines, the whole window) and its behaviour alone on niagara-2c and clovertown-2x2
# (`cachesched simulate --mix real:NAME:1`, 60 ms after 40 ms of warm-up, seed 1:
# L1I and L1D misses per 1,000 instructions, L2 misses per 1,000 instructions).
# Records missing traces first (about 40 s each). Needs a release build.
# Usage: scripts/real-suite.sh [PROGRAM...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cs="$repo/target/release/cachesched"
[ -x "$cs" ] || { echo "build first: cargo build --release" >&2; exit 1; }
programs=${*:-$("$cs" real list | awk 'NR > 2 && !/^use:/ { print $1 }')}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| program | package version | recorded: events, MB, s | 8 KB | 32 KB | 256 KB | 768 KB | 2 MB | 4 MB | niagara-2c L1I / L1D / L2 MPKI | clovertown L1I / L1D / L2 MPKI |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for p in $programs; do
  "$cs" real record "$p" >&2
  trace=$("$cs" real path "$p")
  meta=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["package_version"], m["events"], round(m["bytes"]/1e6), m["record_seconds"])' "${trace%.cst}.json")
  read -r version events mb secs <<<"$meta"
  mrc=$("$cs" mrc --trace "$trace" 2>/dev/null | awk '
    NF >= 3 && $1 ~ /^[0-9]+$/ { m[$1 $2] = $3 }
    END { n = split("8KB 32KB 256KB 768KB 2MB 4MB", k, " "); for (i = 1; i <= n; i++) printf " %s |", (k[i] in m) ? m[k[i]] : "-" }')
  row="| $p | $version | $events, $mb, $secs |$mrc"
  for m in niagara-2c clovertown-2x2; do
    "$cs" simulate --machine "$m" --mix "real:$p:1" --duration-ms 60 --warmup-ms 40 --seed 1 \
      --json "$tmp/r.json" --quiet > /dev/null 2>&1
    row+=$(python3 - "$tmp/r.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
i = t["instructions"]
k = lambda n: t[n] * 1000 / i
print(f" {k('l1i_misses'):.1f} / {k('l1d_misses'):.1f} / {k('l2_misses'):.2f} |", end="")
PY
)
  done
  echo "$row"
done
