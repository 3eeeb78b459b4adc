#!/usr/bin/env bash
# Compares what two hfuse binaries write for `hfuse fuse` (fused graph, report,
# printed table) on every conformance graph and on examples/: the check that a
# refactoring changed no output byte. Usage:
#   scripts/compare_fuse_outputs.sh OLD_HFUSE NEW_HFUSE [WORK_DIR]
set -euo pipefail
old=$1 new=$2 work=${3:-/tmp/hfuse_compare}
cd "$(dirname "$0")/.."
rm -rf "$work" && mkdir -p "$work/old" "$work/new"
graphs=()
while IFS= read -r f; do graphs+=("$f"); done < <(
  find ../shared/conformance -name '*.json' ! -name '*.expected.json' | sort
  ls examples/*.json examples/*.onnx)
fails=0
for g in "${graphs[@]}"; do
  key=$(echo "$g" | tr '/.' '__')
  ext=json; [[ $g == *.onnx ]] && ext=onnx
  opts=()
  exp=${g%.json}.expected.json
  if [[ -f $exp ]] && grep -q -- '--no-group-gemm' "$exp"; then opts+=(--no-group-gemm); fi
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    d=$work/$side/$key; mkdir -p "$d"
    (cd "$d" && "$bin" fuse "$OLDPWD/$g" -o out.$ext --report report.json --dump-dir dumps \
       "${opts[@]}" > stdout.txt 2> stderr.txt; echo $? > rc)
    sed -i "s#$OLDPWD/##g" "$d/stdout.txt" "$d/stderr.txt"
  done
  if ! diff -r "$work/old/$key" "$work/new/$key" > /dev/null; then
    echo "DIFFERS: $g"; fails=$((fails + 1))
  fi
done
echo "${#graphs[@]} graphs compared, $fails differ"
[[ $fails == 0 ]]
