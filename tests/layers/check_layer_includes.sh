#!/usr/bin/env bash
# Preprocesses one include of a header of each layer with the flags of one layer's target and
# checks that exactly the allowed layers' headers are found.
#   check_layer_includes.sh <c++ compiler> <flags file> <layer> <allowed,layers> <layer=header>...
set -u
compiler=$1 flags=$2 layer=$3 allowed=",$4,"
shift 4
failures=0
for probe in "$@"; do
  other=${probe%%=*} header=${probe#*=}
  if ! errors=$(printf '#include "%s"\n' "$header" | "$compiler" "@$flags" -E -o /dev/null -x c++ - 2>&1); then
    compiled=no
  else
    compiled=yes
  fi
  if [[ $allowed == *",$other,"* ]]; then
    if [[ $compiled == yes ]]; then
      echo "ok: $layer/ may include $header, and it preprocesses"
    else
      echo "FAIL: $layer/ may include $header, but it does not preprocess:"
      echo "$errors"
      failures=$((failures + 1))
    fi
  else
    # gcc: "<header>: No such file or directory"; clang: "'<header>' file not found"
    if [[ $compiled == no && ($errors == *"$header: No such file or directory"* ||
      $errors == *"'$header' file not found"*) ]]; then
      echo "ok: $layer/ may not include $header, and it is not found"
    elif [[ $compiled == no ]]; then
      echo "FAIL: $layer/ including $header failed for another reason than the header being out of reach:"
      echo "$errors"
      failures=$((failures + 1))
    else
      echo "FAIL: $layer/ may not include $header (a layer above or beside it), but it is found"
      failures=$((failures + 1))
    fi
  fi
done
exit $((failures > 0))
