/* A transportation problem with generated costs: 120 plants, 400 markets; the
   simplex method over a sparse 48,000-column problem. */
param m := 120;
param n := 400;
set I := 1..m;
set J := 1..n;
param supply{i in I} := 100 + Uniform(0, 900);
param demand{j in J} := (sum{i in I} supply[i]) / n * 0.95;
param cost{i in I, j in J} := Uniform(1, 100) + abs(i * n / m - j) / 10;
var x{i in I, j in J} >= 0;
minimize total: sum{i in I, j in J} cost[i, j] * x[i, j];
s.t. sup{i in I}: sum{j in J} x[i, j] <= supply[i];
s.t. dem{j in J}: sum{i in I} x[i, j] >= demand[j];
solve;
printf "total %.2f\n", total;
end;
