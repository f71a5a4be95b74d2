# GAP input for cachesched's real-program suite, after SPEC CPU2000 254.gap's reference
# input, which "has multiple parts, one part of it is the standard gap speed-benchmark,
# exercising mostly the combinatorial functions and big number library, then some test
# functions for the finite field, permutation group and subgroup lattice computations, a
# program comparing two different methods of finding normalizers in solvable groups and
# finally a test exercising the collector for so-called ag-groups"
# (http://www.spec.org/cpu2000/CINT2000/254.gap/docs/254.gap.html). The same six parts,
# in that order, written for GAP 4. Deterministic: the random sources are reset first.
Reset(GlobalMersenneTwister, 1);;
Reset(GlobalRandomSource, 1);;
t := Runtime();;
part := function(name)
    Print(name, " ", Runtime() - t, " ms\n");
    t := Runtime();
end;;

# 1. combinatorial functions and big numbers
s := 0;;
for n in [1 .. 80] do
    s := s + Bell(n) + NrPartitions(4 * n) + Stirling2(2 * n, n);
od;
f := Factorial(5000);;
s := s + Binomial(8000, 4000) mod f + Fibonacci(50000) mod 1000000007;;
l := List([1 .. 800], i -> Binomial(800, i) * Fibonacci(i));;
s := s + Sum(l) mod 998244353;;
Print(s mod 1000000007, "\n");
part("combinatorics");

# 2. finite fields
F := GF(2, 16);;
z := Z(2 ^ 16);;
x := One(F);;
acc := Zero(F);;
for i in [1 .. 200000] do
    x := x * z + One(F);
    acc := acc + x ^ 3;
od;
Print(acc = Zero(F), "\n");
m := RandomMat(50, 50, GF(7 ^ 3));;
Print(RankMat(m), " ", DeterminantMat(m) <> Zero(GF(7 ^ 3)), "\n");
R := PolynomialRing(GF(3), 1);;
y := IndeterminatesOfPolynomialRing(R)[1];;
Print(Length(Factors(y ^ 243 - y)), "\n");
part("finite fields");

# 3. permutation groups
cube := Group(
    ( 1, 3, 8, 6)( 2, 5, 7, 4)( 9,33,25,17)(10,34,26,18)(11,35,27,19),
    ( 9,11,16,14)(10,13,15,12)( 1,17,41,40)( 4,20,44,37)( 6,22,46,35),
    (17,19,24,22)(18,21,23,20)( 6,25,43,16)( 7,28,42,13)( 8,30,41,11),
    (25,27,32,30)(26,29,31,28)( 3,38,43,19)( 5,36,45,21)( 8,33,48,24),
    (33,35,40,38)(34,37,39,36)( 3, 9,46,32)( 2,12,47,29)( 1,14,48,27),
    (41,43,48,46)(42,45,47,44)(14,22,30,38)(15,23,31,39)(16,24,32,40));;
Print(Size(cube), "\n");
m24 := MathieuGroup(24);;
Print(Size(m24), " ", Length(Orbits(Stabilizer(m24, [1, 2, 3], OnSets))), "\n");
Print(Length(ConjugacyClasses(MathieuGroup(12))), "\n");
g := SymmetricGroup(12);;
h := Group(Random(g), Random(g));;
Print(Size(h), "\n");
part("permutation groups");

# 4. subgroup lattice
Print(Length(ConjugacyClassesSubgroups(LatticeSubgroups(SymmetricGroup(4)))), "\n");
Print(Length(ConjugacyClassesSubgroups(AlternatingGroup(5))), "\n");
part("subgroup lattice");

# 5. normalizers in a solvable group, two ways
s2 := SylowSubgroup(SymmetricGroup(16), 2);;
pc := Image(IsomorphismPcGroup(s2));;
ok := true;;
for i in [1 .. 6] do
    u := Subgroup(pc, [Random(pc), Random(pc)]);
    n1 := Normalizer(pc, u);
    n2 := Stabilizer(pc, u, function(v, g) return v ^ g; end);
    ok := ok and Size(n1) = Size(n2);
od;
Print(ok, "\n");
part("normalizers");

# 6. the collector of a pc (ag) group
s3 := Image(IsomorphismPcGroup(SylowSubgroup(SymmetricGroup(27), 3)));;
e := One(s3);;
gens := Pcgs(s3);;
for i in [1 .. 40000] do
    e := e * gens[1 + (i * 7) mod Length(gens)] ^ (1 + i mod 2);
od;
Print(Order(e), "\n");
part("collector");
QUIT;
