#!/usr/bin/env bash
# Rows of docs/workloads.md, "Real programs": for each real program of the suite (and
# each synthetic profile named after --profiles), the data miss-ratio curve (`cachesched
# mrc`: fully associative LRU, 64-byte lines; a trace's whole window, or 3 M accesses
# of a profile), the instruction side's curve at 16 and 32 KB (`mrc
# --instructions-only`; a profile's as the simulated machine fetches it, each access's
# instructions from its PC's line, over 3 M accesses) and the behaviour alone on niagara-2c and clovertown-2x2
# (`cachesched simulate`, 60 ms after 40 ms of warm-up, seed 1: L1I and L1D misses and
# L2 misses per 1,000 instructions). Real programs' recordings (the cache's .json:
# package version, instructions, events, MB, MB on disk, seconds) come first; missing
# traces are recorded (minutes each: lackey runs about a million instructions a
# second, start-up included). With --pairs REAL=PROFILE..., each real program's row is
# followed by the row of the synthetic profile of the same program (or role).
# Needs a release build.
# Usage: scripts/real-suite.sh [PROGRAM...] [--profiles PROFILE...] [--pairs REAL=PROFILE...]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cs="$repo/target/release/cachesched"
[ -x "$cs" ] || { echo "build first: cargo build --release" >&2; exit 1; }
rows=() target=programs
for a in "$@"; do
  case "$a" in
    --profiles) target=profiles; continue ;;
    --pairs) target=pairs; continue ;;
  esac
  case $target in
    programs) rows+=("real:$a") ;;
    profiles) rows+=("profile:$a") ;;
    pairs) rows+=("real:${a%%=*}" "profile:${a#*=}") ;;
  esac
done
if [ ${#rows[@]} -eq 0 ]; then
  mapfile -t rows < <("$cs" real list | awk 'NR > 2 && !/^use:/ { print "real:" $1 }')
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curve() { # sizes, mrc arguments -> " r1 | r2 | ... |"
  local sizes=$1; shift
  "$cs" mrc "$@" 2>/dev/null | awk -v sizes="$sizes" '
    NF >= 3 && $1 ~ /^[0-9]+$/ { m[$1 $2] = $3 }
    END { n = split(sizes, k, " "); for (i = 1; i <= n; i++) printf " %s |", (k[i] in m) ? m[k[i]] : "-" }'
}
data_sizes="8KB 32KB 256KB 768KB 2MB 4MB"
machines() { # mix -> " n-l1i / n-l1d / n-l2 | c-l1i / c-l1d / c-l2 |"
  for m in niagara-2c clovertown-2x2; do
    rm -f "$tmp/r.json"  # a failed run must not print the previous row's numbers
    "$cs" simulate --machine "$m" --mix "$1" --duration-ms 60 --warmup-ms 40 --seed 1 \
      --json "$tmp/r.json" --quiet > /dev/null 2>&1
    python3 - "$tmp/r.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
k = lambda n: t[n] * 1000 / t["instructions"]
print(f" {k('l1i_misses'):.1f} / {k('l1d_misses'):.1f} / {k('l2_misses'):.2f} |", end="")
PY
  done
}
echo "| workload | recorded (version; M instr, M events, MB, MB on disk, s) | 8 KB | 32 KB | 256 KB | 768 KB | 2 MB | 4 MB | instr. 16 KB | instr. 32 KB | niagara-2c L1I / L1D / L2 MPKI | clovertown-2x2 L1I / L1D / L2 MPKI |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
  p=${r#*:}
  if [ "${r%%:*}" = profile ]; then
    echo "| $p | (profile) |$(curve "$data_sizes" --profile "$p" --accesses 3000000)$(curve "16KB 32KB" --profile "$p" --accesses 3000000 --instructions-only)$(machines "$p:1")"
    continue
  fi
  "$cs" real record "$p" 2> "$tmp/rec.log" || { cat "$tmp/rec.log" >&2; exit 1; }
  trace=$("$cs" real path "$p")
  base=${trace%.zst}
  meta=$(python3 - "${base%.cst}.cst.json" "${base%.cst}.json" <<'PY'
import json, os, sys
path = next(p for p in sys.argv[1:] if os.path.exists(p))
m = json.load(open(path))
print("%s; %.0f, %.1f, %.0f, %.0f, %.0f" % (m["package_version"], m["instructions"] / 1e6,
      m["events"] / 1e6, m["bytes"] / 1e6, m.get("file_bytes", m["bytes"]) / 1e6,
      m["record_seconds"]))
PY
)
  echo "| real:$p | $meta |$(curve "$data_sizes" --trace "$trace")$(curve "16KB 32KB" --trace "$trace" --instructions-only)$(machines "real:$p:1")"
done
