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
cat > prog.c <<'C'
#include <stdio.h>
#include <stdlib.h>
struct node { int key; struct node *l, *r; char name[32]; };
static struct node *ins(struct node *t, int k) {
  if (!t) { t = calloc(1, sizeof *t); t->key = k; snprintf(t->name, 32, "n%d", k); return t; }
  if (k < t->key) t->l = ins(t->l, k); else t->r = ins(t->r, k);
  return t;
}
static int depth(struct node *t) { if (!t) return 0; int a = depth(t->l), b = depth(t->r); return 1 + (a > b ? a : b); }
int main(void) { struct node *t = 0; unsigned x = 1; for (int i = 0; i < 100000; i++) { x = x * 1103515245u + 12345u; t = ins(t, x >> 8); } printf("%d\n", depth(t)); return 0; }
C
cat > work.pl <<'PL'
my %h; open(my $f, '<', 'src.txt') or die; while (<$f>) { for my $w (split /\W+/) { $h{$w}++ } } close $f;
my @k = sort { $h{$b} <=> $h{$a} || $a cmp $b } keys %h; print scalar(@k), " $k[0]\n";
PL
cat > q.sql <<'SQL'
create table t(a integer primary key, b text, c integer);
with recursive r(i) as (select 1 union all select i+1 from r where i < 20000) insert into t select i, hex(randomblob(16)), abs(random()) % 1000 from r;
create index tc on t(c);
select c, count(*), max(b) from t group by c order by 2 desc limit 3;
select count(*) from t x join t y on x.c = y.c where x.a < 100;
SQL
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
