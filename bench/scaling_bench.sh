#!/usr/bin/env bash
# Data-parallel scaling of distributed_fused_adam on one machine of GPUS GPUs (1, 2, 4
# or 8), in one call: GPT-3 1.3B and 2.7B on 1 GPU (the baseline) and on GPUS, the
# PyTorch peers DDP and FSDP2 on GPUS with the same shapes (1 GPU: the single-GPU
# peer), then GPT-3 6.7B with tensor parallelism 2 and sequence parallelism times
# GPUS/2 data-parallel ranks (GPUS >= 2). Ends with one markdown table
# (bench/scaling_table.py): tokens/s, per GPU, scaling efficiency, exposed
# communication per step, peak memory per GPU, the peers and the ratios ours/peer.
#
# Usage: bench/scaling_bench.sh GPUS
# Needs what bench/gpu_training_bench.sh needs: a CUDA build in $BUILD (default build-dev;
# built first when missing) and the Moby-Dick dataset in .cache/data (scripts/quickstart.sh
# makes it; a machine without network gets a copy of that folder). Each run has a timeout; the whole script stays within BUDGET_S seconds
# (default 510): a run that would start with less than MIN_RUN_S (60) left is
# skipped and shows as such in the table, as do runs that did not fit in memory.
# With 2 or more GPUs the two 1-GPU baselines run at the same time on GPUs 0 and 1
# (separate GPUs, nothing shared but the host; PARALLEL_BASELINES=0 runs them one
# after the other). Results and logs: $RESULTS (default /tmp/adamant-scaling-GPUS).
set -uo pipefail  # no -e: a failed run is reported in the table and the others go on
gpus=${1:?usage: bench/scaling_bench.sh GPUS (1, 2, 4 or 8)}
case "$gpus" in
  1 | 2 | 4 | 8) ;;
  *) echo "usage: $0 GPUS, with GPUS 1, 2, 4 or 8" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 2
budget=${BUDGET_S:-510}
min_run=${MIN_RUN_S:-60}
python=${PYTHON:-python3}
results=${RESULTS:-/tmp/adamant-scaling-$gpus}
rm -rf "$results"
mkdir -p "$results"
export RESULTS=$results
started=$SECONDS

# A fresh machine has no build: make the one binary the runs need (its time counts against the
# budget, so one device call of 10 minutes can hold build and runs: BUDGET_S=540 there).
build=${BUILD:-build-dev}
export BUILD=$build
if [ ! -x "$build/adamant" ]; then
  echo "== building $build/adamant"
  cmake -S . -B "$build" -G Ninja -DADAMANT_CUDA=ON -DBUILD_TESTING=OFF > /dev/null &&
    cmake --build "$build" -j "$(nproc)" --target adamant_cli 2>&1 | tail -1
  [ -x "$build/adamant" ] || { echo "the build of $build/adamant failed" >&2; exit 1; }
fi

# run NAME CAP_S SIZE GPUS RUNS: one bench/gpu_training_bench.sh call with a timeout of at
# most CAP_S seconds and no more than the budget has left.
run() {
  local name=$1 cap=$2 left=$((budget - (SECONDS - started)))
  shift 2
  if [ "$left" -lt "$min_run" ]; then
    echo "== $name: skipped, ${left}s of the ${budget}s budget left"
    "$python" -c 'import json,sys; print(json.dumps({"status": "skipped (time budget)"}))' > "$results/$name.json"
    return
  fi
  RUN_TIMEOUT_S=$((cap < left ? cap : left)) bench/gpu_training_bench.sh "$@"
}

echo "# Scaling on $gpus GPU(s), $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
if [ "$gpus" -ge 2 ] && [ "${PARALLEL_BASELINES:-1}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0 run ours-1.3b-g1 200 1.3b 1 ours > "$results/baseline-1.3b.log" 2>&1 &
  first=$!
  CUDA_VISIBLE_DEVICES=1 run ours-2.7b-g1 200 2.7b 1 ours > "$results/baseline-2.7b.log" 2>&1 &
  second=$!
  wait "$first" "$second"
  cat "$results/baseline-1.3b.log" "$results/baseline-2.7b.log"
else
  run ours-1.3b-g1 150 1.3b 1 ours
  run ours-2.7b-g1 150 2.7b 1 ours
fi
if [ "$gpus" -gt 1 ]; then
  run ours-1.3b-g$gpus 150 1.3b "$gpus" ours
  run ours-2.7b-g$gpus 150 2.7b "$gpus" ours
  run ours-6.7b-g$gpus 180 6.7b "$gpus" ours
  for size in 1.3b 2.7b; do
    for peer in ddp fsdp2; do
      run peer-$peer-$size-g$gpus 180 "$size" "$gpus" $peer
    done
  done
else
  for size in 1.3b 2.7b; do
    run peer-single-$size-g1 180 "$size" 1 single
  done
fi
echo
echo "## Scaling table ($((SECONDS - started)) s)"
echo
echo "Ours: adamant train, distributed_fused_adam, medians of steps 3-12 (bench/run_metrics.py); peak"
echo "allocated = all of Adamant's buffers and workspaces (compare with torch.cuda.max_memory_allocated),"
echo "device in use = cudaMemGetInfo. Peers: bench/torch_gpt_peer.py, the same global batch, median of"
echo "10 steps; (x, y) = ours/peer tokens/s and peak memory."
echo
"$python" bench/scaling_table.py "$results" "$gpus"
