# Object-heavy text processing: word counts, bigram dictionary, a small class per
# word, sorting and a string join (dicts, lists, reference counting, allocation).
import sys
from collections import defaultdict


class Entry:
    __slots__ = ("word", "count", "lengths")

    def __init__(self, word):
        self.word = word
        self.count = 0
        self.lengths = []


entries = {}
bigrams = defaultdict(int)
prev = None
with open(sys.argv[1]) as f:
    for line in f:
        for w in line.lower().split():
            w = w.strip(".,;:!?")
            if not w:
                continue
            e = entries.get(w)
            if e is None:
                e = entries[w] = Entry(w)
            e.count += 1
            if len(e.lengths) < 8:
                e.lengths.append(len(line))
            if prev is not None:
                bigrams[(prev, w)] += 1
            prev = w
top = sorted(entries.values(), key=lambda e: (-e.count, e.word))[:100]
pairs = sorted(bigrams.items(), key=lambda kv: (-kv[1], kv[0]))[:100]
print(" ".join(e.word for e in top))
print(len(entries), len(bigrams), pairs[0])
