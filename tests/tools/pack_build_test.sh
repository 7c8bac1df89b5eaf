#!/usr/bin/env bash
# scripts/pack_build.sh on this build's adamant: the program copied as it is, the libraries it
# loads outside the C/C++ runtimes, CUDA and Open MPI in lib/, and env.sh making the program load
# those copies; a missing program or build folder refused with exit status 2 and the fix.
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: pack_build_test.sh BUILD}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $1"
  [ $# -gt 1 ] && cat "$2"
  exit 1
}

"$source_dir/scripts/pack_build.sh" "$build" "$work/packed" adamant > "$work/log"
cmp -s "$build/adamant" "$work/packed/adamant" || fail "the program not copied as it is"
ls "$work/packed/lib" | grep -q '^libyaml-cpp\.so' || fail "yaml-cpp not packed" "$work/log"
for runtime in libc.so.6 libstdc++.so.6 libm.so.6 libgcc_s.so.1 libcudart.so libmpi.so.40; do
  ! ls "$work/packed/lib" | grep -q "^${runtime//+/\\+}" || fail "$runtime packed: the machine's own must be used"
done
# The packed program loads the packed copies first.
yaml=$(bash -c "source '$work/packed/env.sh' && ldd '$work/packed/adamant'" | awk '/libyaml-cpp/ {print $3}')
[ "$yaml" = "$work/packed/lib/$(basename "$yaml")" ] || fail "env.sh: yaml-cpp loads from '$yaml', not the packed lib/"
bash -c "source '$work/packed/env.sh' && '$work/packed/adamant' config-keys" > "$work/keys" 2>&1 ||
  fail "the packed program did not run" "$work/keys"
grep -q "model.micro_batch_size" "$work/keys" || fail "the packed program's output" "$work/keys"

# A library of the user's own under /opt (not the CUDA toolkit's) is packed, and the program loads the copy.
if command -v cc > /dev/null && [ -w /opt ]; then
  opt_lib=$(mktemp -d /opt/adamant-pack-test.XXXXXX)
  trap 'rm -rf "$work" "$opt_lib"' EXIT
  mkdir -p "$work/opt_build"
  printf 'int adamant_pack_test_value(void) { return 42; }\n' > "$work/lib.c"
  printf 'int adamant_pack_test_value(void);\nint main(void) { return adamant_pack_test_value() == 42 ? 0 : 1; }\n' \
    > "$work/main.c"
  cc -shared -fPIC -o "$opt_lib/libadamantpacktest.so" "$work/lib.c"
  cc -o "$work/opt_build/uses_opt" "$work/main.c" -L"$opt_lib" -ladamantpacktest -Wl,-rpath,"$opt_lib"
  "$source_dir/scripts/pack_build.sh" "$work/opt_build" "$work/opt_packed" uses_opt > "$work/opt.log"
  [ -f "$work/opt_packed/lib/libadamantpacktest.so" ] || fail "a library under /opt not packed" "$work/opt.log"
  rm -rf "$opt_lib"
  bash -c "source '$work/opt_packed/env.sh' && '$work/opt_packed/uses_opt'" ||
    fail "the program did not run from the packed copy of its /opt library"
fi

# Bad input: exit status 2 and a message with the fix.
set +e
"$source_dir/scripts/pack_build.sh" "$build" "$work/other" tests/no_such_program > "$work/missing" 2>&1
status=$?
"$source_dir/scripts/pack_build.sh" "$work/no_build" "$work/other" adamant > "$work/no_build.log" 2>&1
build_status=$?
set -e
[ "$status" -eq 2 ] && grep -q "TARGET 'tests/no_such_program': no program .*cmake --build" "$work/missing" ||
  fail "a missing program: exit $status" "$work/missing"
[ "$build_status" -eq 2 ] && grep -q "BUILD '.*no_build': no such folder" "$work/no_build.log" ||
  fail "a missing build folder: exit $build_status" "$work/no_build.log"
echo "pack_build.sh: program, libraries, env.sh and errors as expected"
