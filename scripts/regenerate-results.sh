#!/bin/bash
# Regenerates results/: the reference output of every headline scenario (checked byte
# for byte by tests/suite/reference.rs, one test per scenario), their plots, the
# capacity-planning decision, and the plots the README shows (results/plots/). Run from
# the repository root after a deliberate model change, then review `git diff results/`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=target/release/doorbell
for s in $(sed -n '/^reference! {/,/^}/p' tests/suite/reference.rs | grep -o '"[a-z0-9-]*"' | tr -d '"'); do
    echo "run   $s"
    "$BIN" run "scenarios/$s.yaml" --out "results/$s" --quiet --force
done
echo "plan  plan-spines"
mkdir -p results/plan-spines
"$BIN" plan scenarios/plan-spines.yaml > results/plan-spines/plan.txt
mkdir -p results/plots
cp results/credit-rtt/window.png results/plots/credit-rtt-window.png
cp results/victim-flow/pfc_dcqcn_hpcc/timeseries-rate.png results/plots/victim-flow-dcqcn-rate.png
cp results/allreduce-ring/busbw.png results/plots/allreduce-ring-busbw.png
echo "done: review git diff results/"
