#!/usr/bin/env bash
# Runs the timeslice reproduction's files one after the other in the order given
# (default: every file of experiments/timeslice/), each on all workers, into the run
# cache; runs already there are read, not made again, so only the runs the cache lacks
# are made (none, with run-cache/ unpacked and the model version unchanged).
# With runs to make it takes hours: run it in the background and pack the run cache as
# it goes (scripts/run-cache.sh pack), since a machine of this project lives 3 hours.
#
#   scripts/timeslice-remaining.sh [FILE ...]     FILE: a scenario stem of experiments/timeslice/
#
# Environment: JOBS (workers, default: the CPUs), OUT (reports, default: results).
# A file whose window checks fail is reported and the next one still runs; the exit
# status is 1 if any failed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    for f in experiments/timeslice/*.toml; do
        files+=("$(basename "$f" .toml)")
    done
fi
for f in "${files[@]}"; do
    if [ ! -f "experiments/timeslice/$f.toml" ]; then
        echo "no scenario file experiments/timeslice/$f.toml" >&2
        exit 2
    fi
done
cargo build --release --locked || exit 2
scripts/run-cache.sh unpack || exit 2
status=0
for f in "${files[@]}"; do
    echo "== $f ($(date -u +%FT%TZ))"
    if ! target/release/cachesched reproduce timeslice --only "$f" \
        --jobs "${JOBS:-$(nproc)}" --out "${OUT:-results}"; then
        echo "== $f: failed or a check did not pass (its report says which)" >&2
        status=1
    fi
done
exit $status
