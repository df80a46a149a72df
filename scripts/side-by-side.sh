#!/bin/bash
# Compares two doorbell binaries on one scenario by running them at the same time, each
# pinned to its own core, and swapping the cores every round: both see the same
# neighbours on a shared machine, which moves whole runs by up to 2x within the hour
# (issue 17's VMs), so their ratio holds where alternating runs spread by 10% or more.
# Prints each round's user seconds (A, then B) and the ratio of the sums.
#
# A check of the method (stop 54, a 2-core Intel Xeon VM): a binary against a copy of
# itself, 6 rounds of websearch-128, 0.999x.
#
# Needs two free cores (taskset from util-linux) and GNU time at /usr/bin/time.
#
# Usage: scripts/side-by-side.sh ROUNDS BIN_A BIN_B SCENARIO [run options...]
#   e.g. scripts/side-by-side.sh 6 ./new ./old benches/scenarios/websearch-128.yaml
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
rounds=$1 a=$2 b=$3 scenario=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 "$rounds"); do
    ca=$((i % 2))
    cb=$((1 - ca))
    /usr/bin/time -f "%U" -o "$work/a" taskset -c "$ca" "$a" run "$scenario" \
        --out "$work/out-a" --quiet --no-plot --force "$@" > /dev/null &
    /usr/bin/time -f "%U" -o "$work/b" taskset -c "$cb" "$b" run "$scenario" \
        --out "$work/out-b" --quiet --no-plot --force "$@" > /dev/null &
    wait
    echo "$i $(tail -1 "$work/a") $(tail -1 "$work/b")"
done | awk '{ print; a += $2; b += $3 } END { printf "A/B user time %.4f over %d rounds\n", a / b, NR }'
