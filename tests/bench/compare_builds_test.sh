#!/usr/bin/env bash
# bench/compare_builds.sh without a GPU: a scratch repository holds the script, the table script
# and a stand-in for gpu_training_bench.sh whose tokens/s depend on the build and the case, so the
# table's figures are known. Three calls: every run in order with the cases' settings and the
# table; a second call that keeps every result and runs nothing; FRESH=1 with no time left, which
# skips every run and says so. Then BEFORE as a source archive, a failed run's reason, and both
# builds packed (scripts/pack_build.sh's folders).
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo
mkdir -p "$repo/bench"
cp "$source_dir/bench/compare_builds.sh" "$source_dir/bench/compare_table.py" "$repo/bench/"
cat > "$repo/bench/stand_in_bench.sh" << 'STAND_IN'
#!/usr/bin/env bash
# gpu_training_bench.sh's arguments (SIZE GPUS RUNS) and RESULTS folder: one run's JSON, with the
# "status" that script adds.
set -eu
echo "$BUILD $1 $3 dropout ${HIDDEN_DROPOUT:-0}/${ATTENTION_DROPOUT:-0} seq ${SEQ:-2048} mb ${MICRO_BATCH:-default} gelu ${GELU:-exact}" >> "$CALLS"
[ -z "${LIBS:-}" ] || echo "$BUILD ${LD_LIBRARY_PATH:-}" >> "$LIBS"
mkdir -p "$RESULTS"
echo "model: a line the call's output leaves out"
if [ "${FAIL_AFTER:-0}" = 1 ] && [ "$BUILD" = build-gpu ]; then
  echo '{"status": "failed"}' > "$RESULTS/ours-$1.json"
  echo "adamant: failed (exit 2); last lines of ours.log:"
  echo "error: data prefix 'corpus': no corpus.bin; run adamant preprocess"
  echo "== stand-in: $3 $1"
  echo "model: a line the call's output leaves out"
  exit 0
fi
if [ "$3" = single ]; then
  echo '{"tokens_per_s": 400000, "peak_gib": 8.7, "status": "ok"}' > "$RESULTS/peer-single-$1.json"
else
  tokens=440000
  [ "$BUILD" = build-before ] || [ "$BUILD" = packed-before ] && tokens=400000
  [ "${HIDDEN_DROPOUT:-0}" = 0.1 ] && tokens=$((tokens - 40000))
  echo "{\"status\": \"ok\", \"tokens_per_s\": $tokens, \"peak_allocated_gib\": 7.4, \"mfu\": 0.466}" \
    > "$RESULTS/ours-$1.json"
fi
echo "== stand-in: $3 $1"
STAND_IN
chmod +x "$repo/bench/"*.sh
git -C "$repo" init -q
git -C "$repo" add bench
git -C "$repo" -c user.name=test -c user.email=test@example.com commit -q -m "scratch"

compare() {  # OUTPUT [VAR=value ...]: one call of the script on two cases
  local output=$1
  shift
  (cd "$repo" && env CALLS="$work/calls" SKIP_BUILDS=1 BENCH=bench/stand_in_bench.sh RESULTS="$work/results" \
    BEFORE_TREE="$work/before" "$@" bench/compare_builds.sh HEAD 126m:dropout,1.3b:seq4096:mb2:fused > "$output" 2>&1)
}
fail() {
  echo "FAIL: $1"
  shift
  cat "$@"
  exit 1
}

compare "$work/first"
expected_calls="build-before 126m ours dropout 0.1/0.1 seq 2048 mb default gelu exact
build-gpu 126m ours dropout 0.1/0.1 seq 2048 mb default gelu exact
build-before 126m ours dropout 0.1/0.1 seq 2048 mb default gelu exact
build-gpu 126m ours dropout 0.1/0.1 seq 2048 mb default gelu exact
build-gpu 126m single dropout 0.1/0.1 seq 2048 mb default gelu exact
build-before 1.3b ours dropout 0/0 seq 4096 mb 2 gelu fused
build-gpu 1.3b ours dropout 0/0 seq 4096 mb 2 gelu fused
build-before 1.3b ours dropout 0/0 seq 4096 mb 2 gelu fused
build-gpu 1.3b ours dropout 0/0 seq 4096 mb 2 gelu fused
build-gpu 1.3b single dropout 0/0 seq 4096 mb 2 gelu fused"
[ "$(cat "$work/calls")" = "$expected_calls" ] || fail "the runs, in order, with their settings" "$work/calls"
grep -qF "| GPT-3 126M | 0.1 / 0.1 | 360,000, 360,000 | 400,000, 400,000 | +11.1% | 400,000 | **1.00x** | 7.4 | 8.7 | 46.6% |" \
  "$work/first" || fail "the dropout case's row" "$work/first"
grep -qF "| GPT-3 1.3B, sequence 4096, micro-batch 2, tanh GELU in the GEMM epilogues | 0 / 0 | 400,000, 400,000 | 440,000, 440,000 | +10.0% | 400,000 | **1.10x** |" \
  "$work/first" || fail "the 1.3B case's row" "$work/first"
grep -q "== before: .* scratch" "$work/first" || fail "the before tree at BEFORE" "$work/first"

compare "$work/second"
[ "$(wc -l < "$work/calls")" -eq 10 ] || fail "a second call ran again what had a result" "$work/calls"
[ "$(grep -c "kept from an earlier call" "$work/second")" -eq 10 ] || fail "the kept runs" "$work/second"
grep -qF "| +11.1% |" "$work/second" || fail "the table from the kept results" "$work/second"

compare "$work/third" FRESH=1 BUDGET_S=0
[ "$(wc -l < "$work/calls")" -eq 10 ] || fail "a run started with no time left" "$work/calls"
grep -qF "| GPT-3 126M | 0.1 / 0.1 | skipped (time budget), skipped (time budget) | skipped (time budget), skipped (time budget) |  | skipped (time budget) |" \
  "$work/third" || fail "skipped runs in the table, and no result of an earlier call" "$work/third"
# BEFORE as a source archive (a machine without the history): unpacked into the before tree once,
# then kept while the archive is not newer.
git -C "$repo" archive HEAD | gzip > "$work/before.tar.gz"
rm -rf "$work/before" "$work/results" "$work/calls"
compare_archive() {  # OUTPUT: as compare, BEFORE the archive
  (cd "$repo" && env CALLS="$work/calls" SKIP_BUILDS=1 BENCH=bench/stand_in_bench.sh RESULTS="$work/results" \
    BEFORE_TREE="$work/before" bench/compare_builds.sh "$work/before.tar.gz" 126m:dropout > "$1" 2>&1)
}
compare_archive "$work/fourth"
grep -q "== before: the source in .*before.tar.gz" "$work/fourth" || fail "the archive as the before tree" "$work/fourth"
[ -f "$work/before/bench/compare_builds.sh" ] || fail "the archive unpacked into BEFORE_TREE" "$work/fourth"
grep -qF "| +11.1% |" "$work/fourth" || fail "the table with the archive as the before tree" "$work/fourth"
echo stale > "$work/before/marker"
compare_archive "$work/fifth"
[ -f "$work/before/marker" ] || fail "an archive no newer than its unpacking unpacked again" "$work/fifth"
touch -d '+1 minute' "$work/before.tar.gz"
compare_archive "$work/sixth"
[ ! -f "$work/before/marker" ] || fail "a newer archive not unpacked again" "$work/sixth"
(cd "$repo" && bench/compare_builds.sh "$work/missing.tar.gz" 126m > "$work/seventh" 2>&1) && fail "a missing archive accepted" "$work/seventh"
grep -q "no such archive" "$work/seventh" || fail "the missing archive's error" "$work/seventh"
# A failed run: the log's last lines that the bench prints show in the call's output, up to the
# bench's next headline; its other lines do not.
rm -rf "$work/before" && git -C "$repo" worktree prune
compare "$work/eighth" FRESH=1 FAIL_AFTER=1
grep -qF "error: data prefix 'corpus': no corpus.bin; run adamant preprocess" "$work/eighth" ||
  fail "a failed run's reason" "$work/eighth"
! grep -q "a line the call's output leaves out" "$work/eighth" || fail "a line outside a failure's last lines" "$work/eighth"
# Both builds packed elsewhere: nothing is built (no SKIP_BUILDS, and the scratch repository has
# no CMake project to build), each build's runs are set up by its own env.sh (the stand-ins name
# the build's libraries), and GPU_TESTS runs the test programs packed with the after build under
# its env.sh.
for packed in packed-before packed-after; do
  mkdir -p "$repo/$packed/lib"
  printf '#!/bin/sh\n' > "$repo/$packed/adamant"
  chmod +x "$repo/$packed/adamant"
  echo "export LD_LIBRARY_PATH=$packed-libraries" > "$repo/$packed/env.sh"
done
mkdir -p "$repo/packed-after/tests/kernels"
printf '#!/bin/sh\necho "model: a line the call leaves out"\necho "[  PASSED  ] 3 tests. (libraries: $LD_LIBRARY_PATH)"\n' \
  > "$repo/packed-after/tests/kernels/stand_in_tests"
chmod +x "$repo/packed-after/tests/kernels/stand_in_tests"
rm -rf "$work/results" "$work/calls"
(cd "$repo" && env -u LD_LIBRARY_PATH CALLS="$work/calls" LIBS="$work/libs" BENCH=bench/stand_in_bench.sh \
  RESULTS="$work/results" BUILD=packed-after GPU_TESTS=1 PEER=0 ROUNDS=1 bench/compare_builds.sh packed-before \
  126m:dropout > "$work/ninth" 2>&1) || fail "two packed builds" "$work/ninth"
grep -q "== before: the packed build in packed-before" "$work/ninth" || fail "the packed before build" "$work/ninth"
grep -q "== after: the packed build in packed-after" "$work/ninth" || fail "the packed after build" "$work/ninth"
grep -qF "[  PASSED  ] 3 tests. (libraries: packed-after-libraries)" "$work/ninth" ||
  fail "the packed test programs, with their libraries" "$work/ninth"
[ "$(cat "$work/libs")" = "packed-before packed-before-libraries
packed-after packed-after-libraries" ] || fail "each packed build's own env.sh" "$work/libs"
grep -qF "| +11.1% |" "$work/ninth" || fail "the table of two packed builds" "$work/ninth"
echo "compare_builds.sh: runs, table, kept results, time budget, source archives, failures' reasons and packed builds as expected"
