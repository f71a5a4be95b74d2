#!/usr/bin/env bash
# L1 behaviour of real programs under cachegrind, at a niagara-like L1D (8 KB 4-way;
# 32-byte lines, cachegrind's minimum on an AVX host; the T1 has 16) with a 16 KB 4-way
# 32-byte L1I, and at a Core-like 32 KB 8-way 64-byte L1D and L1I. Prints, per program:
# data references per instruction, L1D miss ratio and misses per 1,000 instructions,
# L1I misses per 1,000 instructions, LL data misses per 1,000 instructions (4 MB).
# Inputs are made here, deterministically: the simulator crate's own source text.
# Needs valgrind, gzip, bzip2, xz, perl, sqlite3, gcc. Takes about 3 minutes.
# Usage: scripts/real-l1.sh [WORKDIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work" && cd "$work"
cat "$repo"/crates/sim/src/*.rs "$repo"/crates/sim/src/*/*.rs > src.txt
# shellcheck source=scripts/real-inputs.sh
source "$repo/scripts/real-inputs.sh"
write_inputs 60000
one() {
  local name=$1; shift
  for cfg in "8192,4,32 16384,4,32" "32768,8,64 32768,8,64"; do
    read -r d1 i1 <<<"$cfg"
    out=$(valgrind --tool=cachegrind --cache-sim=yes --trace-children=yes --D1="$d1" --I1="$i1" \
      --LL=4194304,16,64 --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null)
    python3 - "$name" "$d1" "$out" <<'PY'
import re, sys
name, d1, out = sys.argv[1:]
def tot(key):
    pat = r'==\d+== ' + key.replace(' ', r'\s+') + r':\s+([\d,]+)'
    return sum(int(m.group(1).replace(',', '')) for m in re.finditer(pat, out))
i, d = tot('I refs'), tot('D refs')
d1m, i1m, llm = tot('D1 misses'), tot('I1 misses'), tot('LLd misses')
print(f"{name:8} D1={d1:11} instr {i/1e6:6.1f}M  refs/instr {d/i:.3f}  L1D miss {d1m/d:.4f}"
      f"  L1D MPKI {d1m*1000/i:6.2f}  L1I MPKI {i1m*1000/i:6.2f}  LLd MPKI {llm*1000/i:5.2f}")
PY
  done
}
one gzip gzip -c src.txt
one bzip2 bzip2 -c src.txt
one xz xz -c -3 src.txt
one perl perl work.pl
one sqlite3 sqlite3 :memory: ".read q.sql"
one gcc gcc -O2 -c prog.c -o /dev/null
