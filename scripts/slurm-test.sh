#!/bin/bash
# Proves the sharded sweep on a real Slurm: brings up a single-node Slurm on this machine
# (munge, slurmctld, slurmd: Debian's slurm-wlm and munge packages, installed if missing),
# submits scripts/sweep.sbatch as a 4-task array over scenarios/sweep-load.yaml (twice:
# --array=0-3 and --array=1-4), waits for each (bounded), merges the shards and checks that the merged sweep.csv is byte for
# byte the one a local, unsharded sweep writes. The daemons run as root from a temporary
# folder, are started and stopped by their own pid files, and are always stopped on exit.
#
# Run by hand (as root) with `bash scripts/slurm-test.sh`; .ci/run calls it when CI is set.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SCENARIO=scenarios/sweep-load.yaml
TASKS=4
TIMEOUT=${SLURM_TEST_TIMEOUT:-300}

fail() {
    echo "slurm-test: $*" >&2
    # The logs go with the temporary folder: show them first.
    for log in "${WORK:-/nonexistent}"/munge/munged.log "${WORK:-/nonexistent}"/slurmctld.log "${WORK:-/nonexistent}"/slurmd.log; do
        [ -s "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }
    done
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (to install packages and run the Slurm daemons)"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "slurm-test: installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
        || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null 2>&1; } \
        || fail "cannot install slurm-wlm and munge with apt-get"
fi

cargo build --release --quiet
BIN="$ROOT/target/release/doorbell"

WORK=$(mktemp -d /tmp/doorbell-slurm.XXXXXX)
chmod 755 "$WORK"
HOST=$(hostname -s)
stop() {
    local pids=()
    for f in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munged.pid"; do
        [ -s "$f" ] && pids+=("$(cat "$f")")
    done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    # Wait for them to go (up to 10 s), then make sure.
    for _ in $(seq 1 20); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break
        sleep 0.5
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap stop EXIT

# munge: a fresh key, our own socket, pid and log files.
mkdir -p "$WORK/munge" "$WORK/state" "$WORK/spool"
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$WORK/munge/munge.key"
chmod 700 "$WORK/munge"
munged --force --key-file="$WORK/munge/munge.key" --socket="$WORK/munge/socket" \
    --pid-file="$WORK/munged.pid" --log-file="$WORK/munge/munged.log" \
    --seed-file="$WORK/munge/seed" \
    || fail "munged did not start "

CPUS=$(nproc)
cat > "$WORK/slurm.conf" <<CONF
ClusterName=doorbell
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/socket
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldPort=16817
SlurmdPort=16818
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$WORK/slurm.conf"
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start "
slurmd -f "$SLURM_CONF" || fail "slurmd did not start "

# Wait for the node to be ready.
for _ in $(seq 1 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)$'; then
        break
    fi
    sleep 1
done
sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)$' \
    || { cat "$WORK/slurmctld.log" "$WORK/slurmd.log" >&2 2>/dev/null || true; fail "the Slurm node did not come up within 60 s"; }

"$BIN" sweep "$SCENARIO" --quiet --no-plot --out "$WORK/local"
# The array job twice: numbered from 0 and from 1 (the shard index counts from the first).
for ARRAY in "0-$((TASKS - 1))" "1-$TASKS"; do
    OUTDIR="$WORK/out-$ARRAY"
    JOB=$(DOORBELL="$BIN" OUT="$OUTDIR" sbatch --parsable --array="$ARRAY" \
        --chdir="$ROOT" --output="$WORK/task-%A-%a.out" --export=ALL \
        scripts/sweep.sbatch "$SCENARIO") || fail "sbatch refused the job"
    echo "slurm-test: submitted array job $JOB (--array=$ARRAY)"
    deadline=$((SECONDS + TIMEOUT))
    while squeue -h -j "$JOB" 2>/dev/null | grep -q .; do
        if [ $SECONDS -ge $deadline ]; then
            scancel "$JOB" || true
            # Let the tasks wind down before the daemons go.
            for _ in $(seq 1 15); do squeue -h -j "$JOB" 2>/dev/null | grep -q . || break; sleep 1; done
            fail "array job $JOB did not finish within $TIMEOUT s"
        fi
        sleep 2
    done
    for i in $(seq 0 $((TASKS - 1))); do
        [ -s "$OUTDIR/shard-$i-of-$TASKS/sweep.json" ] \
            || { cat "$WORK"/task-"$JOB"-*.out >&2 2>/dev/null || true; fail "array $ARRAY: shard $i left no results"; }
    done
    # Merge, and compare with the same sweep run here without Slurm.
    "$BIN" merge "$OUTDIR"/shard-*-of-$TASKS --out "$WORK/merged-$ARRAY" >/dev/null
    cmp "$WORK/merged-$ARRAY/sweep.csv" "$WORK/local/sweep.csv" \
        || fail "array $ARRAY: the merged sweep.csv differs from the local sweep"
done
echo "slurm-test: ok: two $TASKS-task Slurm arrays (from 0 and from 1) merged into the same sweep.csv as a local run"
