#!/bin/bash
# Measures what `run --threads N` gains over one thread, for two doorbell binaries in the
# same minutes: each round runs A on one thread, A split, B on one thread, B split, one
# run at a time (a split run needs every core). On a shared VM whole runs move by up to
# 2x within the hour (issue 17: permutation-8192 took 10.1-19.6 s on one thread within
# one hour of stop 63), so a ratio taken from sets run at different moments moves with
# whichever runs met a slow minute; interleaved rounds give each build's ratio under the
# same minutes. Prints each round's wall seconds (A 1, A N, B 1, B N), then each build's
# split time over its one-thread time and the builds' ratios at each thread count.
#
# Needs GNU time at /usr/bin/time. Both binaries must know `--threads`.
#
# Usage: scripts/split-gain.sh ROUNDS THREADS BIN_A BIN_B SCENARIO [run options...]
#   e.g. scripts/split-gain.sh 8 2 ./new ./old benches/scenarios/permutation-8192.yaml
set -euo pipefail
if [ $# -lt 5 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
rounds=$1 threads=$2 a=$3 b=$4 scenario=$5
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 "$rounds"); do
    line="$i"
    for bin in "$a" "$b"; do
        for t in 1 "$threads"; do
            /usr/bin/time -f "%e" -o "$work/t" "$bin" run "$scenario" --out "$work/out" \
                --quiet --no-plot --force --threads "$t" "$@" > /dev/null
            line="$line $(tail -1 "$work/t")"
        done
    done
    echo "$line"
done | awk -v n="$threads" '
    { print; a1 += $2; an += $3; b1 += $4; bn += $5 }
    END {
        printf "A: %d threads %.4f of one (%.2fx); B: %.4f (%.2fx)\n", n, an / a1, a1 / an, bn / b1, b1 / bn
        printf "A/B wall: one thread %.4f, %d threads %.4f, over %d rounds\n", a1 / b1, n, an / bn, NR
    }'
