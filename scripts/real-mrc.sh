#!/usr/bin/env bash
# Data miss-ratio curves of real programs (fully associative LRU, 64-byte lines, exact
# stack distances): each program is recorded with `cachesched trace record` (valgrind
# lackey) and its trace read by `cachesched mrc --trace`. Prints the miss ratio at
# 64 B to 2 MB per program, the rows of docs/workloads.md, "Short reuse".
# Input: the first 120,000 bytes of the simulator crate's sources at commit 1d8b8a5
# (fixed, so the numbers do not drift with the code). Needs valgrind, gzip, bzip2, xz,
# perl, sqlite3, gcc and a release build (cargo build --release). Takes about 8 minutes
# and 1 GB of disk in WORKDIR (sqlite3's trace is 575 MB).
# Usage: scripts/real-mrc.sh [WORKDIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cs="$repo/target/release/cachesched"
[ -x "$cs" ] || { echo "build first: cargo build --release" >&2; exit 1; }
work=${1:-$(mktemp -d)}
mkdir -p "$work" && cd "$work"
commit=1d8b8a5
files=$(git -C "$repo" ls-tree -r --name-only "$commit" crates/sim/src | grep -E '^crates/sim/src/[^/]+\.rs$'; \
        git -C "$repo" ls-tree -r --name-only "$commit" crates/sim/src | grep -E '^crates/sim/src/[^/]+/[^/]+\.rs$')
for f in $files; do git -C "$repo" show "$commit:$f"; done > all-src.txt
head -c 120000 all-src.txt > src.txt
# shellcheck source=scripts/real-inputs.sh
source "$repo/scripts/real-inputs.sh"
write_inputs 20000
cc1=$(gcc -print-prog-name=cc1)
rec() { local name=$1; shift; [ -s "$name.trace" ] || "$cs" trace record --out "$name.trace" -- "$@" >&2; }
rec gzip gzip -c src.txt
rec bzip2 bzip2 -c src.txt
rec xz xz -c -3 src.txt
rec perl perl work.pl
rec sqlite3 sqlite3 :memory: ".read q.sql"
rec cc1 "$cc1" -quiet -O2 prog.c -o /dev/null
sizes="64B 256B 1KB 4KB 8KB 16KB 32KB 64KB 256KB 768KB 2MB"
printf '%-8s' program; for s in $sizes; do printf ' %7s' "$s"; done; echo
for p in gzip bzip2 xz perl sqlite3 cc1; do
  "$cs" mrc --trace "$p.trace" --out "$p-mrc" 2>/dev/null | awk -v p="$p" -v sizes="$sizes" '
    NF >= 3 && $1 ~ /^[0-9]+$/ { m[$1 $2] = $3 }
    END { printf "%-8s", p; n = split(sizes, k, " "); for (i = 1; i <= n; i++) printf " %7s", (k[i] in m) ? m[k[i]] : "-"; print "" }'
done
