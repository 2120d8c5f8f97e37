#!/usr/bin/env bash
# Cross-process benchmarks of lockword's SharedMutex (in Go, in C through
# c/lockword.c: lockword-c, and Go and C processes on one word:
# lockword-mixed) against gofrs/flock,
# flock(2) on a kept descriptor, and a C pthread mutex with
# PTHREAD_PROCESS_SHARED + PTHREAD_MUTEX_ROBUST (cpeer/pthread_robust.c, built here
# with gcc). Runs are interleaved (Go, then C, COUNT times) so that a noisy
# neighbour hurts both alike; the summary gives medians and ratios.
#
#   bench/run.sh                         # COUNT=5 BENCHTIME=200ms
#   COUNT=10 BENCHTIME=1s bench/run.sh   # the lead's idle-machine run
#
# Raw results go to $OUT (default bench/results.txt, benchstat format).
# On a shared machine wrap it: flock /tmp/lockword-bench.lock bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-200ms}
OUT=${OUT:-bench/results.txt}

case $BENCHTIME in
*ms) target_ms=${BENCHTIME%ms} ;;
*s) target_ms=$(( ${BENCHTIME%s} * 1000 )) ;;
*) echo "BENCHTIME must be like 200ms or 1s" >&2; exit 2 ;;
esac

if ! command -v gcc >/dev/null 2>&1; then
  (apt-get update && apt-get install -y gcc) >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -Wall -pthread -o "$tmp/pthread_robust" bench/cpeer/pthread_robust.c
go test -c -o "$tmp/bench.test" ./bench

{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -srm), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "# COUNT=$COUNT BENCHTIME=$BENCHTIME $(go version)"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for i in $(seq "$COUNT"); do
    (cd bench && "$tmp/bench.test" -test.run '^$' -test.bench BenchmarkCrossProcess -test.benchtime "$BENCHTIME" -test.count 1) | grep '^Benchmark'
    for p in 1 2 4; do
      "$tmp/pthread_robust" "$p" "$target_ms" "$tmp/pthread.map"
    done
  done
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"

echo
echo "Medians over $COUNT runs (uncontended: ns per Lock+Unlock; contended: M acquisitions/s):"
awk '
/^Benchmark/ {
  split($1, parts, "/"); kind = parts[2]; sub("kind=", "", kind)
  procs = parts[3]; sub("procs=", "", procs); sub("-[0-9]+$", "", procs)
  for (i = 2; i < NF; i++) if ($(i+1) == "Macq/s") v = $i
  for (i = 2; i < NF; i++) if ($(i+1) == "ns/op") ns = $i
  key = kind SUBSEP procs
  n[key]++; mac[key, n[key]] = v; nso[key, n[key]] = ns; kinds[kind] = 1; ps[procs] = 1
}
function median(arr, key, cnt,   i, j, t, a) {
  for (i = 1; i <= cnt; i++) a[i] = arr[key, i] + 0
  for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return cnt % 2 ? a[(cnt + 1) / 2] : (a[cnt / 2] + a[cnt / 2 + 1]) / 2
}
END {
  printf "%-16s %14s %14s %14s\n", "kind", "procs=1 ns/op", "procs=2 Macq/s", "procs=4 Macq/s"
  split("lockword lockword-c lockword-mixed pthread-robust flock-fd gofrs-flock", order, " ")
  for (o = 1; o <= 6; o++) {
    k = order[o]; if (!(k in kinds)) continue
    u[k] = median(nso, k SUBSEP 1, n[k SUBSEP 1])
    c2[k] = median(mac, k SUBSEP 2, n[k SUBSEP 2]); c4[k] = median(mac, k SUBSEP 4, n[k SUBSEP 4])
    printf "%-16s %14.1f %14.2f %14.2f\n", k, u[k], c2[k], c4[k]
  }
  p = "pthread-robust"; g = "gofrs-flock"; l = "lockword"
  if ((p in u) && (l in u)) {
    printf "\nlockword vs pthread robust: uncontended %.2fx the time (target <= 1.0x); contended %.2fx at 2 procs, %.2fx at 4 (target >= 1.5x)\n", u[l] / u[p], c2[l] / c2[p], c4[l] / c4[p]
  }
  c = "lockword-c"; x = "lockword-mixed"
  if ((p in u) && (c in u)) {
    printf "lockword C library vs pthread robust: uncontended %.2fx the time (target <= 1.0x); contended %.2fx at 2 procs, %.2fx at 4 (target >= 1.5x)\n", u[c] / u[p], c2[c] / c2[p], c4[c] / c4[p]
  }
  if ((x in c2) && (l in c2)) {
    printf "mixed Go+C vs all-Go contended: %.2fx at 2 procs, %.2fx at 4 (target 0.8x to 1.25x)\n", c2[x] / c2[l], c4[x] / c4[l]
  }
  if ((g in u) && (l in u)) printf "lockword vs gofrs/flock: uncontended %.0fx faster (target >= 100x)\n", u[g] / u[l]
}' "$OUT"
