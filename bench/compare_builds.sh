#!/usr/bin/env bash
# A change's effect on GPT-3 training throughput, measured as BENCHMARKS.md asks: the build
# of an earlier revision and the working tree's build, side by side on the same GPU in one
# sitting, alternating (ROUNDS each), then the PyTorch peer once per case, and one markdown
# table (bench/compare_table.py): tokens/s before and after, the gain, after / PyTorch,
# peak memory and MFU.
#
# Usage: bench/compare_builds.sh BEFORE [CASES]
#   BEFORE  the revision to compare with (a commit, tag or branch), checked out in a
#           worktree at $BEFORE_TREE (default .cache/compare-before) and built there; or a
#           .tar.gz of its source (`git archive REV | gzip`), unpacked there, for a machine
#           that gets the working tree without the repository's history; or a folder holding
#           a packed build (scripts/pack_build.sh: its adamant and env.sh), built elsewhere.
#   CASES   comma-separated, each SIZE[:dropout][:seqN][:mbN][:tanh|:fused] (SIZE as
#           gpu_training_bench.sh takes it; dropout: hidden and attention 0.1; seqN: sequence N;
#           mbN: micro-batch N; tanh, fused: its GELU=tanh or GELU=fused, the tanh GELU by separate
#           kernels or in the GEMM epilogues, the peer's tanh GELU either way).
#           Default: 126m:dropout,126m,1.3b:dropout,126m:seq8192:mb2.
# Both builds train this tree's configs and data (.cache/data, as gpu_training_bench.sh needs).
# Environment: BUILD (the working tree's CUDA build, default build-gpu), BEFORE_BUILD (default
#   build-before), JOBS (parallel compile jobs in all, default the CPU count; a quarter go to
#   the earlier build), ROUNDS (default 2), PEER (0: skip the peer), GPU_TESTS (1: run
#   `ctest -L gpu` on the working tree's build before timing), BUDGET_S (default 540): a run
#   that would start with less than MIN_RUN_S (default 75) left is skipped, and shows so in
#   the table; builds are incremental and runs with a result are kept (FRESH=1: run all
#   again), so a second call goes on where the first stopped.
#   RESULTS (default /tmp/adamant-compare) keeps each run's JSON; gpu_training_bench.sh's
#   STEPS, PYTHON and EXTRA_ARGS pass through. SKIP_BUILDS=1 uses the two builds as they are,
#   and BENCH names another script with gpu_training_bench.sh's arguments and RESULTS files
#   (tests/bench/compare_builds_test.sh runs the script so, without a GPU). BUILD too may be a
#   packed build: then nothing is built for it, GPU_TESTS runs the test programs packed under
#   BUILD/tests, and each packed build's runs load the libraries packed with it. With both
#   builds packed on another machine, a call spends its time on the runs alone.
set -uo pipefail  # no -e: a failed run shows in the table and the others go on
before=${1:?usage: bench/compare_builds.sh BEFORE [CASES]}
cases=${2:-126m:dropout,126m,1.3b:dropout,126m:seq8192:mb2}
cd "$(dirname "$0")/.." || exit 2
build=${BUILD:-build-gpu}
before_build=${BEFORE_BUILD:-build-before}
before_tree=${BEFORE_TREE:-.cache/compare-before}
jobs=${JOBS:-$(nproc)}
rounds=${ROUNDS:-2}
budget=${BUDGET_S:-540}
min_run=${MIN_RUN_S:-75}
python=${PYTHON:-python3}
results=${RESULTS:-/tmp/adamant-compare}
bench=${BENCH:-bench/gpu_training_bench.sh}
started=$SECONDS
mkdir -p "$results"

# Each case's settings, checked before anything is built.
declare -A case_size case_env
for spec in ${cases//,/ }; do
  IFS=: read -r -a parts <<< "$spec"
  case "${parts[0]}" in
    126m | 1.3b | 2.7b) ;;
    *) echo "case '$spec': the size must be 126m, 1.3b or 2.7b (one GPU)" >&2; exit 2 ;;
  esac
  env_of=()
  for part in "${parts[@]:1}"; do
    case "$part" in
      dropout) env_of+=(HIDDEN_DROPOUT=0.1 ATTENTION_DROPOUT=0.1) ;;
      seq[0-9]*) env_of+=(SEQ="${part#seq}") ;;
      mb[0-9]*) env_of+=(MICRO_BATCH="${part#mb}") ;;
      tanh | fused) env_of+=(GELU="$part") ;;
      *) echo "case '$spec': '$part' is none of dropout, seqN, mbN, tanh, fused" >&2; exit 2 ;;
    esac
  done
  case_size[$spec]=${parts[0]}
  case_env[$spec]="${env_of[*]}"
done

# A packed build (scripts/pack_build.sh): programs and an env.sh for the libraries beside them,
# which its programs run under (in a subshell, so that each build's runs get only its own).
is_packed() { [ -f "$1/env.sh" ] && [ -x "$1/adamant" ]; }

before_packed=0
after_packed=0
is_packed "$build" && after_packed=1
if is_packed "$before"; then
  before_packed=1
  before_build=$before
  echo "== before: the packed build in $before"
elif [[ "$before" == *.tar.gz ]]; then
  # A source archive: unpacked again only when it is newer than the last unpacking, so that a
  # second call keeps the earlier build's files (and their times) as they are.
  [ -f "$before" ] || { echo "BEFORE '$before': no such archive" >&2; exit 2; }
  if [ ! -f "$before_tree/.unpacked" ] || [ "$before" -nt "$before_tree/.unpacked" ]; then
    rm -rf "$before_tree" && mkdir -p "$before_tree" && tar -xzf "$before" -C "$before_tree" || exit 2
    touch "$before_tree/.unpacked"
  fi
  echo "== before: the source in $before"
else
  # The revision as a commit of this repository (HEAD~1 means this tree's, not the worktree's).
  if ! before_commit=$(git rev-parse --verify --quiet "$before^{commit}"); then
    echo "BEFORE '$before' is not a revision of this repository (git rev-parse finds no commit)" >&2
    exit 2
  fi
  if [ -d "$before_tree" ]; then
    git -C "$before_tree" checkout --quiet --detach "$before_commit" || exit 2
  else
    git worktree add --force --detach "$before_tree" "$before_commit" > /dev/null || exit 2
  fi
  echo "== before: $(git -C "$before_tree" log -1 --format='%h %s' | cut -c1-100)"
fi
if [ "$after_packed" = 1 ]; then
  echo "== after: the packed build in $build"
else
  echo "== after: the working tree at $(git log -1 --format='%h' 2> /dev/null) $(git diff --quiet HEAD 2> /dev/null || echo '(with changes)')"
fi

configure() {  # SOURCE BUILD
  [ -f "$2/build.ninja" ] || cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DADAMANT_CUDA=ON \
    > "$2.configure.log" 2>&1
}

# Both builds at once (a packed one is not built): the earlier one needs only the trainer.
build_both() {
  local before_jobs=$(((jobs + 3) / 4)) after_targets=(--target adamant) before_pid after_rc=0 before_rc=0
  # A quarter of the jobs to the earlier build when both are made here, all to the one that is.
  [ "$after_packed" = 1 ] && before_jobs=$jobs
  [ "$before_packed" = 1 ] && before_jobs=0
  if [ "$before_packed" = 0 ]; then
    (configure "$before_tree" "$before_build" && cmake --build "$before_build" -j "$before_jobs" --target adamant \
      > "$before_build.log" 2>&1) &
    before_pid=$!
  fi
  [ "${GPU_TESTS:-0}" = 1 ] && after_targets=()
  if [ "$after_packed" = 0 ]; then
    configure . "$build" && cmake --build "$build" -j $((jobs - before_jobs > 0 ? jobs - before_jobs : 1)) \
      "${after_targets[@]}" > "$build.log" 2>&1
    after_rc=$?
  fi
  if [ "$before_packed" = 0 ]; then
    wait "$before_pid"
    before_rc=$?
  fi
  if [ "$after_rc" -ne 0 ] || [ "$before_rc" -ne 0 ]; then
    echo "a build failed (after: exit $after_rc, before: exit $before_rc); the last lines of each log:"
    tail -20 "$build.log" "$before_build.log" 2>/dev/null
    return 1
  fi
  echo "== built in $((SECONDS - started)) s"
}
if [ "${SKIP_BUILDS:-0}" != 1 ] && [ "$before_packed$after_packed" != 11 ]; then build_both || exit 1; fi

if [ "${GPU_TESTS:-0}" = 1 ]; then
  if [ "$after_packed" = 1 ]; then
    # The test programs packed with the build (ctest needs the build folder).
    for test in "$build"/tests/*/*; do
      [ -f "$test" ] && [ -x "$test" ] || continue
      echo "== test ${test#"$build"/}"
      (source "$build/env.sh" && NCCL_NVLS_ENABLE=0 "$test" 2>&1) | grep -E "PASSED|FAILED|tests ran" | tail -12
    done
  else
    (cd "$build" && NCCL_NVLS_ENABLE=0 ctest -L gpu --output-on-failure) | tail -30
  fi
fi

# run NAME BUILD RUNS: one gpu_training_bench.sh call of the current case into $results/<case>/NAME.
run() {
  local folder=$results/$spec/$1
  if [ "${FRESH:-0}" != 1 ] && grep -qs '"status": "ok"' "$folder"/*.json; then
    echo "== $spec $1: kept from an earlier call (FRESH=1 runs it again)"
    return
  fi
  if [ $((budget - (SECONDS - started))) -lt "$min_run" ]; then
    rm -rf "$folder"  # no result of an earlier build may stand for this one
    mkdir -p "$folder"
    echo '{"status": "skipped (time budget)"}' > "$folder/skipped.json"
    echo "== $spec $1: skipped, $((budget - (SECONDS - started))) s left"
    return
  fi
  rm -rf "$folder"
  # shellcheck disable=SC2206 # the case's settings are words VAR=value
  local settings=(${case_env[$spec]})
  (if is_packed "$2"; then source "$2/env.sh"; fi
    env "${settings[@]}" RESULTS="$folder" BUILD="$2" "$bench" "${case_size[$spec]}" 1 "$3") | show_run
}

# A run's headline lines, and after a failure the log's last lines that the bench prints after
# "last lines of" (up to its next "==" line): the reason a run failed shows in the call's output.
show_run() {
  awk '/^==/ { failing = 0 }
       failing || /^==|tokens\/s|did not fit|failed|timed out/ { print }
       /last lines of/ { failing = 1 }'
}

for spec in ${cases//,/ }; do
  for round in $(seq 1 "$rounds"); do
    run "before-$round" "$before_build" ours
    run "after-$round" "$build" ours
  done
  [ "${PEER:-1}" = 1 ] && run peer "$build" single
done
read -r -a case_list <<< "${cases//,/ }"
"$python" bench/compare_table.py "$results" "${case_list[@]}"
