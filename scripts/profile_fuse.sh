#!/usr/bin/env bash
# Where a whole `hfuse fuse` process spends its time: samples it with perf
# (DWARF call stacks, 1000 Hz) and prints, for each phase, the share of all
# samples spent under it and under each function it calls directly.
#
#   bash scripts/profile_fuse.sh GRAPH.json            # build/hfuse
#   BUILD=build-x bash scripts/profile_fuse.sh GRAPH.json
#
# Needs perf (apt-get install linux-perf). The fused graph goes to a scratch
# file, never beside GRAPH.
set -euo pipefail
cd "$(dirname "$0")/.."
graph=${1:?usage: profile_fuse.sh GRAPH.json}
BUILD=${BUILD:-build}
command -v perf >/dev/null || { echo "profile_fuse.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
perf record -q -F 1000 --call-graph dwarf,8192 -o "$work/perf.data" \
  "$BUILD/hfuse" fuse "$graph" -o "$work/out.json" >/dev/null 2>"$work/perf.log"
perf script -i "$work/perf.data" -F ip,sym 2>/dev/null >"$work/stacks.txt"
python3 - "$work/stacks.txt" <<'PY'
import collections, re, sys

# One sample per blank-line-separated block, leaf first.
samples, cur = [], []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        if cur:
            samples.append(cur)
        cur = []
        continue
    parts = line.split(None, 1)
    name = parts[1] if len(parts) > 1 else "?"
    cur.append(re.sub(r"\(.*", "", name.replace("(anonymous namespace)", "anon")))
if cur:
    samples.append(cur)
total = len(samples)
print(f"{total} samples (1 ms each)")

PHASES = [
    ("read (parse, build, verify)", "hfuse::LoadModel"),
    ("  graph JSON in the writer's form", "hfuse::anon::FastReader::Read"),
    ("fuse-group-ops", "hfuse::FuseGroupOps"),
    ("  one op type's round", "hfuse::anon::Round::Run"),
    ("  canonical sort", "hfuse::SortTensors"),
    ("write", "hfuse::anon::Writer::Write"),
    ("page faults (anywhere)", "asm_exc_page_fault"),
]
for title, fn in PHASES:
    under, child = 0, collections.Counter()
    for s in samples:
        at = [i for i, f in enumerate(s) if f == fn]
        if not at:
            continue
        under += 1
        i = at[-1]
        child[s[i - 1] if i > 0 else "(itself)"] += 1
    print(f"\n{100 * under / total:5.1f}%  {title}: {fn}")
    for name, k in child.most_common(6):
        print(f"   {100 * k / total:5.1f}%  {name[:90]}")
PY
