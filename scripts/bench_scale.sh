#!/usr/bin/env bash
# Times whole `hfuse fuse` processes on generated graphs of 10^3 to 10^6 ops
# (tools/hfuse_gen: towers, and lanes with edges across lanes) and prints a
# table: wall and CPU seconds and peak RSS (from /usr/bin/time -v), and what
# the pass did. The graphs go to a scratch folder (never the repository).
#
#   bash scripts/bench_scale.sh                   # build/ , all sizes
#   BUILD=build-h6 SIZES="1000 10000" bash scripts/bench_scale.sh
#   SHAPES=towers bash scripts/bench_scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
SIZES=${SIZES:-"1000 10000 100000 1000000"}
SHAPES=${SHAPES:-"towers lanes"}
WORK=${WORK:-${TMPDIR:-/tmp}/hfuse_scale}
HFUSE="$BUILD/hfuse"
GEN="$BUILD/hfuse-gen"

for tool in "$HFUSE" "$GEN"; do
  if [[ ! -x "$tool" ]]; then
    echo "bench_scale.sh: $tool not found; build it: cmake --build $BUILD --target hfuse hfuse-gen" >&2
    exit 1
  fi
done
if [[ ! -x /usr/bin/time ]]; then
  echo "bench_scale.sh: /usr/bin/time not found (apt-get install time)" >&2
  exit 1
fi
mkdir -p "$WORK"

# One field of /usr/bin/time -v's report.
field() { sed -n "s/^[[:space:]]*$1: //p" "$2"; }
# "m:ss.ss" or "h:mm:ss" to seconds.
seconds() { awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; printf "%.2f", s }' <<<"$1"; }

printf '%-7s %9s %8s %8s %8s %9s %7s %8s %10s\n' shape ops wall_s user_s sys_s peak_MiB groups ops_out file_MB
for shape in $SHAPES; do
  for n in $SIZES; do
    graph="$WORK/${shape}_$n.json"
    if [[ ! -s "$graph" ]]; then
      if [[ $shape == towers ]]; then
        "$GEN" towers --ops "$n" -o "$graph"
      else
        "$GEN" lanes --ops "$n" --width 64 --cross 0.15 --seed 1 -o "$graph"
      fi
    fi
    out="$WORK/${shape}_$n.fused.json"
    report="$WORK/${shape}_$n.report.json"
    timing="$WORK/${shape}_$n.time.txt"
    /usr/bin/time -v -o "$timing" "$HFUSE" fuse "$graph" -o "$out" --report "$report" >/dev/null
    wall=$(seconds "$(field 'Elapsed (wall clock) time (h:mm:ss or m:ss)' "$timing")")
    user=$(field 'User time (seconds)' "$timing")
    sys=$(field 'System time (seconds)' "$timing")
    rss_kb=$(field 'Maximum resident set size (kbytes)' "$timing")
    groups=$(grep -c '"op":' "$report" || true)
    ops_after=$(sed -n 's/.*"ops_after": \([0-9]*\).*/\1/p' "$report")
    size_mb=$(awk -v b="$(stat -c %s "$graph")" 'BEGIN { printf "%.1f", b / 1e6 }')
    printf '%-7s %9s %8s %8s %8s %9.0f %7s %8s %10s\n' "$shape" "$n" "$wall" "$user" "$sys" \
      "$(awk -v k="$rss_kb" 'BEGIN { print k / 1024 }')" "$groups" "$ops_after" "$size_mb"
  done
done
