# Word frequencies of a text, the most frequent first, and a concordance of the
# commonest words (hashes, arrays, sorting, string handling).
my (%count, %next);
my $prev = '';
while (my $line = <>) {
    for my $w (split /[^a-z]+/, lc $line) {
        next if $w eq '';
        $count{$w}++;
        $next{$prev}{$w}++ if $prev ne '';
        $prev = $w;
    }
}
my @words = sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count;
my $n = 0;
for my $w (@words[0 .. 199]) {
    my $f = $next{$w} || {};
    my @after = sort { $f->{$b} <=> $f->{$a} || $a cmp $b } keys %$f;
    $n += scalar(@after);
    print "$w $count{$w} ", join(',', @after[0 .. ($#after < 4 ? $#after : 4)]), "\n";
}
print scalar(@words), " words, $n successors\n";
