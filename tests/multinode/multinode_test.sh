#!/usr/bin/env bash
# Multi-host tests on one machine: hosts are network namespaces with hostnames of their
# own (netns_cluster.sh), joined by TCP; mpirun starts its daemons in them through
# netns_agent.sh. Usage (from ctest):
#   multinode_test.sh <case> <adamant binary> <data dir> <work dir>
# Cases: data_parallel, node_local, tensor_parallel, fail_fast. Exits 77 (ctest: skipped), with the
# reason, where namespaces cannot be made.
set -euo pipefail
case_name=$1
adamant=$(realpath "$2")
data=$(realpath "$3")
work=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/netns_cluster.sh"
source "$here/run_losses.sh"

if ! reason=$(netns_cluster_supported); then
  echo "SKIPPED: $reason"
  exit 77
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
trap netns_cluster_down EXIT
netns_cluster_up "adm$$" 2
cluster_options=$(netns_cluster_mpirun_options)
# The same transport on one host, so that runs differ only in where the ranks live.
local_options="--mca btl tcp,self --bind-to none --oversubscribe"

fail() {
  echo "FAILED: $*"
  exit 1
}

# A small corpus tokenized once per test.
head -c 120000 "$data/moby-dick/moby-dick.txt" >"$work/corpus.txt"
"$adamant" preprocess --input "$work/corpus.txt" --output-prefix "$work/corpus" --vocab-dir "$data/gpt2" \
  --split-paragraphs --workers 1 \
  >"$work/preprocess.log"
prefix="$work/corpus_text_document"

train_args() {  # <run dir> [overrides...]
  local run=$1
  shift
  echo "$here/multinode-tiny.yaml exp_manager.exp_dir=$run model.data.data_prefix=[$prefix]" \
    "model.tokenizer.vocab_file=$data/gpt2/encoder.json model.tokenizer.merge_file=$data/gpt2/vocab.bpe $*"
}

# Runs mpirun on host 0 of the cluster: <log> <seconds> <mpirun arguments...>. The job spans
# both hosts, which the training config states (num_nodes_override="" leaves it out).
cluster_mpirun() {
  local log=$1 seconds=$2
  shift 2
  timeout "$seconds" "$here/netns_agent.sh" "${NETNS_CLUSTER_NAME}-h0" \
    "cd $work && mpirun $cluster_options $* ${num_nodes_override-trainer.num_nodes=2}" >"$log" 2>&1
}

local_mpirun() {
  local log=$1 seconds=$2
  shift 2
  (cd "$work" && timeout "$seconds" mpirun $local_options "$@") >"$log" 2>&1
}


case $case_name in
data_parallel)
  # 4 data-parallel ranks: 2 hosts x 2, and 1 host x 4, with distributed_fused_adam.
  local_mpirun "$work/one_host.log" 120 -np 4 "$adamant" train $(train_args "$work/one_host") ||
    { cat "$work/one_host.log"; fail "one-host run"; }
  cluster_mpirun "$work/two_hosts.log" 120 -np 4 --map-by ppr:2:node "$adamant" train $(train_args "$work/two_hosts") ||
    { cat "$work/two_hosts.log"; fail "two-host run"; }
  grep -q "hosts: 2 host(s)" "$work/two_hosts.log" || { cat "$work/two_hosts.log"; fail "the run does not report 2 hosts"; }
  expect_same_losses "$work/one_host" "$work/two_hosts" "2 hosts x 2 ranks train as 1 host x 4"
  # A config that does not say the job spans 2 hosts is refused, naming the key and the layout.
  if num_nodes_override="" cluster_mpirun "$work/one_node.log" 60 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/one_node"); then
    fail "a 2-host job with trainer.num_nodes=1 was accepted"
  fi
  grep -q "trainer.num_nodes is 1, but the launcher started 4 MPI rank(s) on 2 host(s) (2, 2 per host)" \
    "$work/one_node.log" || { cat "$work/one_node.log"; fail "no error naming trainer.num_nodes and the hosts"; }
  echo "ok: a 2-host job whose config says trainer.num_nodes=1 is refused"
  # Checkpoint on the shared filesystem: one model file, one optimizer shard per rank.
  ckpt="$work/two_hosts/multinode/checkpoints/step_00000006"
  for f in model.adm optim_rank_0.adm optim_rank_1.adm optim_rank_2.adm optim_rank_3.adm; do
    [[ -f $ckpt/$f ]] || fail "checkpoint lacks $f"
  done
  [[ $(ls "$ckpt" | wc -l) -eq 5 ]] || fail "checkpoint holds other files: $(ls "$ckpt")"
  # Stop after step 3 (its checkpoint), resume across the hosts and finish: the same losses.
  cluster_mpirun "$work/first.log" 120 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/resumed" trainer.max_steps=3) || { cat "$work/first.log"; fail "first half"; }
  cluster_mpirun "$work/second.log" 120 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/resumed" exp_manager.resume_if_exists=true) || { cat "$work/second.log"; fail "resume"; }
  grep -q "resumed from" "$work/second.log" || { cat "$work/second.log"; fail "the second run did not resume"; }
  expect_same_losses "$work/one_host" "$work/resumed" "a run checkpointed and resumed across 2 hosts"
  ;;
node_local)
  # Checkpoints on each host's own disk: the same folder path, a different disk per host.
  local_mpirun "$work/one_host.log" 120 -np 4 "$adamant" train $(train_args "$work/one_host") ||
    { cat "$work/one_host.log"; fail "one-host run"; }
  export NETNS_CLUSTER_LOCAL_DISK="$work/disk"
  node_local="exp_manager.checkpoint_callback_params.node_local=true"
  cluster_mpirun "$work/first.log" 120 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/disk" trainer.max_steps=3 $node_local) || { cat "$work/first.log"; fail "first half"; }
  h0="$work/disk.${NETNS_CLUSTER_NAME}-h0/multinode/checkpoints/step_00000003"
  h1="$work/disk.${NETNS_CLUSTER_NAME}-h1/multinode/checkpoints/step_00000003"
  [[ $(cd "$h0" && echo *) == "model.adm optim_rank_0.adm optim_rank_1.adm" ]] || fail "host 0 holds $(ls "$h0")"
  [[ $(cd "$h1" && echo *) == "model.adm optim_rank_2.adm optim_rank_3.adm" ]] || fail "host 1 holds $(ls "$h1")"
  echo "ok: each host's disk holds the model and its own ranks' optimizer shards"
  cluster_mpirun "$work/second.log" 120 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/disk" exp_manager.resume_if_exists=true $node_local) || { cat "$work/second.log"; fail "resume"; }
  grep -q "resumed from" "$work/second.log" || { cat "$work/second.log"; fail "the second run did not resume"; }
  # metrics.jsonl is rank 0's, on host 0's disk.
  expect_same_losses "$work/one_host" "$work/disk.${NETNS_CLUSTER_NAME}-h0" "node-local checkpoints resumed on 2 hosts"
  # A save cut off before host 1 renamed its folder: the hosts disagree, and every rank says so.
  rm -rf "$work/disk.${NETNS_CLUSTER_NAME}-h1/multinode/checkpoints/step_00000006"
  if cluster_mpirun "$work/disagree.log" 60 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/disk" trainer.max_steps=9 exp_manager.resume_if_exists=true $node_local); then
    fail "hosts with different newest checkpoints resumed"
  fi
  grep -q "ranks disagree on the newest checkpoint .*: step 6 on some, 3 on others" "$work/disagree.log" ||
    { cat "$work/disagree.log"; fail "no error naming both steps"; }
  echo "ok: hosts whose newest node-local checkpoints differ are refused, naming both steps"
  # One host's disk alone cannot resume the run (another cluster size needs every host's shards), and says so.
  unset NETNS_CLUSTER_LOCAL_DISK
  mkdir -p "$work/moved/multinode/checkpoints"
  cp -r "$h0" "$work/moved/multinode/checkpoints/"
  echo step_00000003 >"$work/moved/multinode/checkpoints/latest"
  if local_mpirun "$work/moved.log" 60 -np 4 "$adamant" train \
    $(train_args "$work/moved" exp_manager.resume_if_exists=true); then
    fail "a checkpoint missing half of its optimizer shards was resumed"
  fi
  grep -q "copy every host's optim_rank_\*.adm into one folder" "$work/moved.log" ||
    { cat "$work/moved.log"; fail "no error naming the missing shards and the fix"; }
  echo "ok: resuming one host's part on another layout names the missing shards"
  ;;
tensor_parallel)
  # Tensor parallel 2 inside each host, data parallel 2 across the hosts.
  local_mpirun "$work/one_host.log" 120 -np 4 "$adamant" train \
    $(train_args "$work/one_host" model.tensor_model_parallel_size=2) || { cat "$work/one_host.log"; fail "one host"; }
  cluster_mpirun "$work/two_hosts.log" 120 -np 4 --map-by ppr:2:node "$adamant" train \
    $(train_args "$work/two_hosts" model.tensor_model_parallel_size=2) || { cat "$work/two_hosts.log"; fail "two hosts"; }
  expect_same_losses "$work/one_host" "$work/two_hosts" "tensor parallel 2 within each of 2 hosts"
  # Ranks dealt round-robin over the hosts would split every tensor-parallel group.
  if cluster_mpirun "$work/across.log" 60 -np 4 --map-by node "$adamant" train \
    $(train_args "$work/across" model.tensor_model_parallel_size=2); then
    cat "$work/across.log"
    fail "a tensor-parallel group across hosts was accepted"
  fi
  grep -q "spans hosts ${NETNS_CLUSTER_NAME}-h0 and ${NETNS_CLUSTER_NAME}-h1" "$work/across.log" ||
    { cat "$work/across.log"; fail "no error naming the hosts"; }
  grep -q "trainer.allow_irregular_node_layout" "$work/across.log" || fail "the error does not name the key"
  echo "ok: a tensor-parallel group across hosts is refused, naming the hosts and the key"
  ;;
fail_fast)
  # Each rank records its process id, so that the test can stop or kill one on host 1.
  launch="/bin/sh -c 'echo \$\$ > $work/pid.\$OMPI_COMM_WORLD_RANK; exec $adamant train \"\$@\"' rank"
  for how in STOP KILL; do
    run="$work/$how"
    rm -f "$work"/pid.*
    cluster_mpirun "$work/$how.log" 90 -np 4 --map-by ppr:2:node "$launch" \
      $(train_args "$run" trainer.max_steps=100000 trainer.collective_timeout_s=4 \
        exp_manager.create_checkpoint_callback=false) &
    job=$!
    for _ in $(seq 600); do  # until training is under way (at most 60 s)
      [[ -f $run/multinode/metrics.jsonl ]] && [[ $(grep -c '"type":"train"' "$run/multinode/metrics.jsonl") -ge 2 ]] && break
      sleep 0.1
    done
    [[ -f $work/pid.3 ]] || { kill "$job"; wait "$job" || true; cat "$work/$how.log"; fail "rank 3 never started"; }
    started=$(date +%s)
    kill -"$how" "$(cat "$work/pid.3")"
    status=0
    wait "$job" || status=$?
    ended=$(date +%s)
    [[ $status -ne 0 && $status -ne 124 ]] || { cat "$work/$how.log"; fail "SIG$how: the job did not end (status $status)"; }
    [[ $((ended - started)) -le 30 ]] || fail "SIG$how: the job took $((ended - started)) s to end"
    if [[ $how == STOP ]]; then
      # A stalled rank: the ranks waiting for it report themselves and end the job.
      grep -Eq "rank [0-3] on host ${NETNS_CLUSTER_NAME}-h[01] has waited [0-9.]+ s for [a-z_]+ over the [a-z-]+ group" \
        "$work/$how.log" || { cat "$work/$how.log"; fail "no watchdog report"; }
    else
      # A dead rank: the launcher sees it and ends the job, naming the rank and its host.
      grep -Eq "rank 3 .*${NETNS_CLUSTER_NAME}-h1|${NETNS_CLUSTER_NAME}-h1.*rank 3" "$work/$how.log" ||
        { cat "$work/$how.log"; fail "the death of rank 3 on host 1 is not named"; }
    fi
    echo "ok: SIG$how of rank 3 on host 1 ended the job in $((ended - started)) s"
    grep -E "has waited|noticed that process" "$work/$how.log" | head -2
  done
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
