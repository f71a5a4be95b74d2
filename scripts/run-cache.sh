#!/usr/bin/env bash
# Carries the run cache (finished simulator runs, see crates/lab/src/caches/runs.rs)
# through the repository, so that a reproduction longer than one machine's life goes on
# where it stopped on another, and the reports can be rebuilt from the runs themselves.
#
#   scripts/run-cache.sh unpack [DIR]   extract every archive of run-cache/ into DIR
#   scripts/run-cache.sh pack [DIR]     archive DIR's runs that no archive holds yet
#                                       into run-cache/runs-<UTC time>.tar.xz
#
# DIR defaults to $CACHESCHED_RUNS, else ~/.cache/cachesched/runs (where cachesched
# looks). A run's file name is its key: a hash of its whole configuration, of the
# model version (docs/model.md) and of the bytes of the traces it replays, so runs of
# another version, or of another recording of a real program, are kept but never read.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
store="$repo/run-cache"
cmd=${1:-}
dir=${2:-${CACHESCHED_RUNS:-${XDG_CACHE_HOME:-$HOME/.cache}/cachesched/runs}}
case "$cmd" in
  unpack)
    mkdir -p "$dir"
    n=0
    for a in "$store"/runs-*.tar.xz; do
      [ -e "$a" ] || continue
      tar -xJf "$a" -C "$dir"
      n=$((n + 1))
    done
    # entries archived before entries held their own key (a bare result, named by its
    # key): given their file name's key, the form the run cache reads now
    w=0
    for f in "$dir"/*.json; do
      [ -e "$f" ] || continue
      if [ "$(head -c 8 "$f")" != '{"key":"' ]; then
        k=$(basename "$f" .json)
        { printf '{"key":"%s","result":' "$k"; cat "$f"; printf '}'; } > "$f.tmp" && mv "$f.tmp" "$f"
        w=$((w + 1))
      fi
    done
    [ "$w" -eq 0 ] || echo "$w entries of the older form given their keys"
    echo "$n archive(s) extracted into $dir ($(find "$dir" -name '*.json' | wc -l) runs there)"
    ;;
  pack)
    [ -d "$dir" ] || { echo "no run cache at $dir: give its directory" >&2; exit 1; }
    mkdir -p "$store"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for a in "$store"/runs-*.tar.xz; do
      if [ -e "$a" ]; then tar -tJf "$a"; fi
    done | sort -u > "$tmp/held"
    (cd "$dir" && find . -maxdepth 1 -name '*.json' -printf '%f\n' | sort) > "$tmp/all"
    comm -23 "$tmp/all" "$tmp/held" > "$tmp/new"
    if [ ! -s "$tmp/new" ]; then
      echo "every run of $dir is archived already"
      exit 0
    fi
    out="$store/runs-$(date -u +%Y%m%dT%H%M%SZ).tar.xz"
    tar -cJf "$out" -C "$dir" --sort=name --owner=0 --group=0 --mtime=@0 -T "$tmp/new"
    echo "$(wc -l < "$tmp/new") run(s) archived into $out ($(du -h "$out" | cut -f1))"
    ;;
  *)
    echo "usage: $0 pack|unpack [DIR]" >&2
    exit 2
    ;;
esac
