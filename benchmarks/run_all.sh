#!/usr/bin/env bash
# Every benchmark with the arguments benchmarks/README.md reports, one after another, each
# output (with the machine's load before and after) in $OUT/NAME.txt. Run it on a quiet machine:
#   bash benchmarks/run_all.sh [OUT]        (default /tmp/gpubot-bench)
# A run at 65,000 nodes takes some minutes each; SKIP="scale digest65k" leaves those out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-/tmp/gpubot-bench}"
mkdir -p "$OUT"
run() {
  local name="$1"; shift
  case " ${SKIP:-} " in *" $name "*) echo "skip $name"; return;; esac
  {
    echo "# $*"
    echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)  at $(date -u +%FT%TZ)"
    /usr/bin/env time -v "$@" 2>&1
    echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)  at $(date -u +%FT%TZ)"
  } > "$OUT/$name.txt" 2>&1
  echo "$name: $(tail -1 "$OUT/$name.txt")"
}
run scale python benchmarks/scale_bench.py --nodes 65000 --modes bound pending gather gather-pod gather-pending
run digest-validate python benchmarks/digest_bench.py --nodes 1000 --validate
run digest65k python benchmarks/digest_bench.py --nodes 32500 65000 --anomalous-only --rounds 3
run replay python benchmarks/replay_bench.py --nodes 2000 --rounds 2
run cli python benchmarks/cli_bench.py --rounds 5
run must-gather python benchmarks/must_gather_bench.py
run walk python benchmarks/walk_bench.py
run http python benchmarks/http_bench.py
run slack python benchmarks/slack_bench.py
run cluster python benchmarks/cluster_bench.py
run alerts python benchmarks/alerts_bench.py
run regex python benchmarks/regex_bench.py
run dra python benchmarks/dra_bench.py
