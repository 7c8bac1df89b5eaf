#!/usr/bin/env bash
# GPT-3 training throughput on the GPU machine: Adamant against the PyTorch peer
# (bench/torch_gpt_peer.py: bf16 autocast, SDPA, torch.compile, fused AdamW), same
# shapes, same machine, one after the other. Needs a CUDA build in $BUILD (default
# build-dev) and the Moby-Dick dataset from scripts/quickstart.sh in .cache/data.
#
# Usage: bench/gpu_training_bench.sh [SIZE] [GPUS] [RUNS]
#   SIZE  126m | 1.3b | 2.7b | 6.7b (default 126m). 6.7b runs tensor parallel 2 with
#         sequence parallelism times GPUS/2 data-parallel ranks.
#   GPUS  GPUs to use (default 1); one micro-batch per data-parallel rank per step.
#   RUNS  comma-separated, in order: ours (the config as shipped), ours-graph and
#         ours-direct (with model.enable_cuda_graph true or false: recorded passes on or off),
#         and the peers ddp, fsdp2, zero (DDP +
#         ZeroRedundancyOptimizer) or single (one GPU). Default: ours,single on one
#         GPU, ours,ddp on more, ours,fsdp2 for 6.7b.
# Environment: BUILD, STEPS (ours, default 12), MICRO_BATCH (per rank; default per size),
#   SEQ (sequence length, default 2048), HIDDEN_DROPOUT and ATTENTION_DROPOUT (default 0, in
#   both programs: embeddings and residual branches, and inside attention), GELU (exact, the
#   configs' form; tanh: model.openai_gelu=true for ours, --gelu tanh for the peer; fused: the
#   tanh form in our up projection's GEMM epilogue, model.bias_activation_fusion=true),
#   RUN_TIMEOUT_S (each run, default 600), RESULTS (a folder: each run also writes
#   <RESULTS>/<run>.json, or {"status": ...} when it failed), PEER_ARGS (more arguments
#   for bench/torch_gpt_peer.py, e.g. --fsdp-mixed-precision), EXTRA_ARGS (more config
#   overrides for ours, e.g. model.activations_checkpoint_granularity=selective), PYTHON, TORCHRUN.
# Ours prints the medians of steps 3 and later
# (bench/run_metrics.py): tokens/s, exposed communication per step and peak memory per GPU.
set -euo pipefail
cd "$(dirname "$0")/.."  # paths below (configs, BUILD, the data) are the repository's
size=${1:-126m}
gpus=${2:-1}
build=${BUILD:-build-dev}
steps=${STEPS:-12}
timeout_s=${RUN_TIMEOUT_S:-600}
python=${PYTHON:-python3}
torchrun=${TORCHRUN:-torchrun}
results=${RESULTS:-}
seq=${SEQ:-2048}
hidden_dropout=${HIDDEN_DROPOUT:-0}
attention_dropout=${ATTENTION_DROPOUT:-0}
gelu=${GELU:-exact}
read -r -a peer_args <<< "${PEER_ARGS:-}"
read -r -a extra_args <<< "${EXTRA_ARGS:-}"
case "$gelu" in
  exact) ;;
  tanh) extra_args+=(model.openai_gelu=true); peer_args+=(--gelu tanh) ;;
  fused) extra_args+=(model.bias_activation_fusion=true); peer_args+=(--gelu tanh) ;;
  *) echo "GELU=$gelu: expected exact, tanh or fused" >&2; exit 2 ;;
esac
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tp=1
case "$size" in
  126m) config=configs/gpt3-126m.yaml; shape=(--layers 12 --hidden 768 --heads 12); mbs=8 ;;
  1.3b) config=configs/gpt3-1.3b.yaml; shape=(--layers 24 --hidden 2048 --heads 16); mbs=4 ;;
  2.7b) config=configs/gpt3-2.7b.yaml; shape=(--layers 32 --hidden 2560 --heads 32); mbs=4 ;;
  6.7b) config=configs/gpt3-6.7b.yaml; shape=(--layers 32 --hidden 4096 --heads 32); mbs=2; tp=2 ;;
  *) echo "usage: $0 [126m|1.3b|2.7b|6.7b] [gpus] [ours,ddp,fsdp2,zero,single]" >&2; exit 2 ;;
esac
mbs=${MICRO_BATCH:-$mbs}
if [ $((gpus % tp)) -ne 0 ]; then
  echo "GPT-3 $size runs tensor parallel $tp: the GPU count ($gpus) must be a multiple of it" >&2
  exit 2
fi
dp=$((gpus / tp))
gbs=$((mbs * dp))
if [ "$size" = 6.7b ]; then default_runs=ours,fsdp2; elif [ "$gpus" -eq 1 ]; then default_runs=ours,single; else default_runs=ours,ddp; fi
runs=${3:-$default_runs}
[ -n "$results" ] && mkdir -p "$results"
logs=$(mktemp -d /tmp/adamant-bench-logs.XXXXXX)

# run_status LOG RC: ok, "did not fit" (out of memory), "timed out" or "failed".
run_status() {
  if [ "$2" -eq 0 ]; then echo ok
  elif grep -qiE "out of memory|OutOfMemoryError|cudaErrorMemoryAllocation" "$1"; then echo "did not fit"
  elif [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then echo "timed out"
  else echo failed
  fi
}

# record NAME STATUS [JSON_FILE]: the run's figures (or its status alone) into $RESULTS.
record() {
  [ -n "$results" ] || return 0
  if [ "$2" = ok ] && [ -s "${3:-}" ]; then
    "$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); r["status"]="ok"; print(json.dumps(r))' "$3" \
      > "$results/$1.json"
  else
    "$python" -c 'import json,sys; print(json.dumps({"status": sys.argv[1]}))' "$2" > "$results/$1.json"
  fi
}

# ours [graph|direct]: recorded passes forced on or off (else as the config says).
ours() {
  local variant=${1:-} graph_args=()
  [ "$variant" = graph ] && graph_args=(model.enable_cuda_graph=true)
  [ "$variant" = direct ] && graph_args=(model.enable_cuda_graph=false)
  local name=ours${variant:+-$variant}-$size-g$gpus-s$seq-d$hidden_dropout-$attention_dropout
  local exp=/tmp/adamant-bench-$size-$gpus log=$logs/$name.log
  echo "== Adamant GPT-3 $size, $gpus GPU(s) (dp $dp x tp $tp), micro-batch $mbs, seq $seq, dropout $hidden_dropout / $attention_dropout, distributed_fused_adam${variant:+, passes: $variant}"
  rm -rf "$exp"
  local rc=0
  timeout --kill-after=20 "$timeout_s" mpirun --allow-run-as-root -np "$gpus" --bind-to none -x NCCL_NVLS_ENABLE=0 \
    "$build/adamant" train "$config" trainer.max_steps="$steps" trainer.limit_val_batches=0 \
    trainer.log_every_n_steps=1 model.global_batch_size=$gbs model.micro_batch_size=$mbs \
    model.hidden_dropout="$hidden_dropout" model.attention_dropout="$attention_dropout" \
    model.encoder_seq_length="$seq" exp_manager.create_checkpoint_callback=false \
    exp_manager.resume_if_exists=false exp_manager.exp_dir="$exp" "${graph_args[@]}" "${extra_args[@]}" > "$log" 2>&1 || rc=$?
  local status
  status=$(run_status "$log" $rc)
  grep -E "^(model|parallel|optimizer|memory|matmul|recorded|peak memory|done)|step +(1|$((steps - 1))|$steps)/" "$log" || true
  local metrics=
  [ -d "$exp" ] && metrics=$(find "$exp" -name metrics.jsonl | head -1)
  if [ "$status" = ok ] && [ -n "$metrics" ]; then
    "$python" bench/run_metrics.py "$metrics" --human
    "$python" bench/run_metrics.py "$metrics" --label micro_batch="$mbs" > "$logs/$name.json"
  else
    [ "$status" = ok ] && status="failed (no metrics.jsonl)"
    echo "adamant: $status (exit $rc); last lines of $log:"
    tail -5 "$log"
  fi
  record "$name" "$status" "$logs/$name.json"
}

peer() {
  local kind=$1 name=peer-$1-$size-g$gpus-s$seq-d$hidden_dropout-$attention_dropout
  local log=$logs/$name.log json=$logs/$name.json
  local peer_mbs=$((gbs / gpus))  # the same global batch over all GPUs
  if [ "$peer_mbs" -lt 1 ]; then
    echo "PyTorch $kind: the global batch $gbs is smaller than the GPU count"
    record "$name" "failed (batch)"
    return
  fi
  echo "== PyTorch GPT-3 $size, $gpus GPU(s), $kind, micro-batch $peer_mbs, seq $seq, dropout $hidden_dropout / $attention_dropout"
  local rc=0
  if [ "$kind" = single ]; then
    timeout --kill-after=20 "$timeout_s" "$python" bench/torch_gpt_peer.py "${shape[@]}" --seq "$seq" \
      --micro-batch "$peer_mbs" --steps 20 --hidden-dropout "$hidden_dropout" --attention-dropout "$attention_dropout" \
      --json "$json" "${peer_args[@]}" > "$log" 2>&1 || rc=$?
  else
    timeout --kill-after=20 "$timeout_s" "$torchrun" --standalone --nproc_per_node "$gpus" bench/torch_gpt_peer.py \
      "${shape[@]}" --seq "$seq" --micro-batch "$peer_mbs" --steps 20 --parallel "$kind" \
      --hidden-dropout "$hidden_dropout" --attention-dropout "$attention_dropout" --json "$json" \
      "${peer_args[@]}" > "$log" 2>&1 || rc=$?
  fi
  local status
  status=$(run_status "$log" $rc)
  if [ "$status" = ok ]; then
    grep "^torch" "$log" || true
  else
    echo "torch $kind: $status (exit $rc); last lines of $log:"
    tail -5 "$log"
  fi
  record "$name" "$status" "$json"
}

for run in ${runs//,/ }; do
  case "$run" in
    ours) ours ;;
    ours-graph) ours graph ;;
    ours-direct) ours direct ;;
    ddp | fsdp2 | zero | single) peer "$run" ;;
    *) echo "unknown run '$run': use ours, ours-graph, ours-direct, ddp, fsdp2, zero or single" >&2; exit 2 ;;
  esac
done
