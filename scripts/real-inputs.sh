# Sourced by scripts/real-l1.sh and scripts/real-mrc.sh: writes their small inputs
# into the current directory. write_inputs ROWS: prog.c (a binary-tree C program for
# gcc), work.pl (a perl word count over src.txt), q.sql (an SQLite table of ROWS rows,
# an index, a group-by and a self-join).
write_inputs() {
  local rows=$1
  cat > prog.c <<'EOF'
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
EOF
  cat > work.pl <<'EOF'
my %h; open(my $f, '<', 'src.txt') or die; while (<$f>) { for my $w (split /\W+/) { $h{$w}++ } } close $f;
my @k = sort { $h{$b} <=> $h{$a} || $a cmp $b } keys %h; print scalar(@k), " $k[0]\n";
EOF
  local join_rows=$((rows / 200))
  cat > q.sql <<EOF
create table t(a integer primary key, b text, c integer);
with recursive r(i) as (select 1 union all select i+1 from r where i < $rows) insert into t select i, hex(randomblob(16)), abs(random()) % 1000 from r;
create index tc on t(c);
select c, count(*), max(b) from t group by c order by 2 desc limit 3;
select count(*) from t x join t y on x.c = y.c where x.a < $join_rows;
EOF
}
