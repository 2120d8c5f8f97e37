#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md, one after another (about 6 minutes on
# 2 cores). Run it on a quiet machine:
#   flock /tmp/lockword-bench.lock bench/all.sh [OUTDIR]
# Raw results (benchstat format) go to OUTDIR (default bench/results).
set -u
cd "$(dirname "$0")/.."
O=${1:-bench/results}; mkdir -p "$O"
{ date -u; uptime; go version; grep -m1 'model name' /proc/cpuinfo; nproc; git log --oneline | head -1; } > $O/env.txt
go test -run '^$' -bench '^BenchmarkUncontended$|^BenchmarkContended$/^kind=(sync|mutex|spin|ticket|shared)$' -benchtime 200ms -count 8 -cpu 2 . > $O/core.txt 2>&1
go test -run '^$' -bench '^BenchmarkContendedWork$/^kind=(sync|mutex|spin)$' -benchtime 200ms -count 5 -cpu 2 . > $O/corework.txt 2>&1
go test -run '^$' -bench '^BenchmarkFair$/^kind=(sync|mutex|ticket)$' -benchtime 300ms -count 5 -cpu 2 . > $O/fair.txt 2>&1
go test -run '^$' -bench 'TicketNaive' -benchtime 300ms -count 3 -cpu 2 . > $O/naive.txt 2>&1
go test -run '^$' -bench 'RW99|RWUncontended' -benchtime 300ms -count 8 -cpu 2 . > $O/rw.txt 2>&1
go test -run '^$' -bench 'RingSPSC' -benchtime 300ms -count 8 -cpu 2 ./bench > $O/ring.txt 2>&1
go test -run '^$' -bench 'RingUncontended|SeqLockUncontended|UncontendedUpdate|^BenchmarkCounter$|CounterSlowUpdate|Snapshot' -benchtime 200ms -count 5 -cpu 2 . > $O/lockfree.txt 2>&1
go test -run "^$" -bench SharedRing -benchtime 200ms -count 5 ./bench/ > $O/sharedring.txt 2>&1
COUNT=5 BENCHTIME=300ms OUT=$O/cross.txt bench/run.sh 2>&1 | tee $O/cross-summary.txt | tail -8
{ date -u; uptime; } >> $O/env.txt
