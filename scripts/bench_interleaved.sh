#!/usr/bin/env bash
# Times `hfuse fuse` of two builds on one graph, runs interleaved (A B A B
# ...), so that both see the same load on a shared machine, and prints each
# run and the median wall seconds and peak RSS of each. Used to show that a
# change costs the pass nothing measurable (bench/RESULTS.md).
#
#   A=build-base/build/hfuse B=build/hfuse GRAPH=/tmp/towers_1000000.json RUNS=7 \
#     bash scripts/bench_interleaved.sh
#
# The graph: ./build/hfuse-gen towers --ops 1000000 -o /tmp/towers_1000000.json
set -euo pipefail
: "${A:?the first hfuse binary}" "${B:?the second hfuse binary}" "${GRAPH:?a graph JSON}"
RUNS=${RUNS:-7}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

run() {  # binary label index
  /usr/bin/time -f "%e %M" -o "$WORK/time" "$1" fuse "$GRAPH" -o "$WORK/out_$2.json" \
    --report "$WORK/report_$2.json" >/dev/null
  read -r wall rss <"$WORK/time"
  echo "$2 $3 $wall $rss" | tee -a "$WORK/all"
}
for ((i = 1; i <= RUNS; ++i)); do
  run "$A" A "$i"
  run "$B" B "$i"
done
cmp -s "$WORK/out_A.json" "$WORK/out_B.json" && echo "fused graphs: byte-identical" ||
  echo "fused graphs: DIFFER"
for label in A B; do
  awk -v l="$label" '$1 == l { print $3, $4 }' "$WORK/all" | sort -n |
    awk -v l="$label" '{ w[NR] = $1; if ($2 > m) m = $2 }
      END { printf "%s: median %.2f s (min %.2f, max %.2f) over %d runs, peak RSS %d MiB\n",
            l, w[int((NR + 1) / 2)], w[1], w[NR], NR, m / 1024 }'
done
