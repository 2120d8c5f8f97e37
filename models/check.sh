#!/usr/bin/env bash
# Model-check every lock-word protocol with SPIN (see models/README.md).
#
# Usage: models/check.sh [name...]   (names: mutex, ticket, ...; default all)
#
# Needs spin and gcc on PATH; installs nothing (.ci/run installs spin). For
# each model it runs the correct protocol, which must pass, and each
# mutation in mutations.txt (-DBROKEN_...), which SPIN must reject with a
# counterexample trail. Prints one line per run: states stored, depth
# reached, wall and CPU seconds. Exits 1 if any correct model fails or any
# mutation passes. LOCKWORD_SLOW_MODELS=1 adds the long exhaustive runs
# (the nightly set, see README.md).
set -euo pipefail
cd "$(dirname "$0")"

for tool in spin gcc; do
  command -v "$tool" >/dev/null || { echo "check.sh: $tool not found (apt-get install -y spin gcc)" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
only=("$@")

# run_one MODEL EXPECT MODE [SPIN-MACROS...]
#   EXPECT: pass, or fail (a negative control: SPIN must find an error)
#   MODE:   safety (assertions and invalid end states), or ltl:NAME (the
#           model's ltl NAME: acceptance cycles under weak fairness).
#   Every run is an exhaustive search (no -DBITSTATE).
run_one() {
  local model=$1 expect=$2 mode=$3; shift 3
  local name=${model%.pml}
  local dir="$work/$name$(printf '%s' "$mode$*" | tr -c 'A-Za-z0-9' '_')"
  mkdir -p "$dir"
  cp ./*.pml "$dir/"
  # -O2 (a pseudo-macro in the table) for the big state spaces, where it
  # halves the search; gcc -O2 costs 3-10 CPU seconds more than -O0 (the
  # larger the model, the more), so a run whose search takes less than
  # about 10 CPU seconds compiles with -O0.
  # pan's defaults (a 2^24-slot hash table, a stack for 2 M steps) cost
  # about 1 CPU second to allocate and clear, more than most searches
  # here (a mutation stops within a few thousand states): a run gets a
  # 2^20-slot table and 200 K steps of depth unless it asks for more, -O2
  # runs (millions of states) a 2^24-slot table. Too little depth is
  # never silent: a truncated search fails the run.
  local cflags=(-w -O0) panflags=(-m200000 -w20) macros=()
  for m in "$@"; do
    if [ "$m" = -O2 ]; then cflags[1]=-O2; panflags[1]=-w24; else macros+=("$m"); fi
  done
  set -- "${macros[@]}"
  case $mode in
    safety) cflags+=(-DSAFETY -DNOCLAIM -DCOLLAPSE) ;;
    ltl:*)  cflags+=(-DNFAIR=4 -DCOLLAPSE); panflags+=(-a -f -N "${mode#ltl:}") ;;
    *) echo "check.sh: bad mode $mode" >&2; exit 2 ;;
  esac
  local start end out cpu
  start=$(date +%s.%N)
  # CPU seconds as well as wall: on a shared host the wall clock measures
  # the load, the CPU time what the budget (2 cores) pays: building pan
  # (spin and gcc) and running it.
  local timer=() btimer=()
  if [ -x /usr/bin/time ]; then
    timer=(/usr/bin/time -f 'cpu %U %S' -o time.log)
    btimer=(/usr/bin/time -f 'cpu %U %S' -o build.log)
  fi
  (cd "$dir" && "${btimer[@]}" sh -c 'spin -a "$@" >spin.log 2>&1 && gcc '"${cflags[*]}"' -o pan pan.c >gcc.log 2>&1' sh "$@" "$model") || {
    echo "FAIL  $name $mode $*: spin or gcc failed:"; cat "$dir/spin.log" "$dir/gcc.log" 2>/dev/null | head -20
    return 1
  }
  out=$(cd "$dir" && "${timer[@]}" ./pan "${panflags[@]}" 2>&1) || true
  end=$(date +%s.%N)
  cpu=$(cat "$dir/time.log" "$dir/build.log" 2>/dev/null | awk '/^cpu/ { t += $2 + $3 } END { if (NR) printf "%.1f", t }')
  local errors states depth secs verdict
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' <<<"$out" | tail -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if grep -q 'max search depth too small' <<<"$out"; then
    verdict="FAIL (search truncated: raise -m)"
  elif [ -z "$errors" ]; then
    verdict="FAIL (pan did not finish)"
  elif [ "$expect" = pass ] && [ "$errors" = 0 ]; then
    verdict="ok"
  elif [ "$expect" = fail ] && [ "$errors" != 0 ] && ls "$dir"/*.trail >/dev/null 2>&1; then
    verdict="ok (rejected: $(grep -m1 -o 'pan:1: [^(]*' <<<"$out" | sed 's/pan:1: //;s/ *$//'))"
  elif [ "$expect" = fail ]; then
    verdict="FAIL (broken variant passed)"
  else
    verdict="FAIL ($errors errors: $(grep -m1 -o 'pan:1: .*' <<<"$out")); trail: spin -t -p $* $model"
  fi
  printf '%-12s %-16s %-40s states=%-9s depth=%-6s %6ss cpu=%-6s %s\n' \
    "$name" "$mode" "${*:-(as in Go)}" "$states" "$depth" "$secs" "${cpu:-?}" "$verdict"
  [[ $verdict == ok* ]]
}

# run queues a run (same arguments as run_one); the queue is worked off
# JOBS at a time (default 2, the CI machine's cores), printed in order.
specs=()
run() {
  local name=${1%.pml}
  if [ ${#only[@]} -gt 0 ] && [[ " ${only[*]} " != *" $name "* ]]; then return; fi
  specs+=("$*")
}

#   model          expect mode           macros
# mutex: goroutine 0 locks twice (ROUNDS0=2, the greedy re-locker whose
# second Lock would overtake a starving waiter), the others once, for
# safety and both liveness formulas (0.9-1.1 M states, 5-9 CPU s each):
# the second round's interleavings (a re-lock racing a hand-off, a
# wake-up and a cancel) at a tenth of every goroutine locking twice
# (ROUNDS=2: 30.6 M states for safety, 200-300 s per formula), which is
# the nightly run.
run mutex.pml      pass   safety         -DROUNDS=1 -DROUNDS0=2 -O2
run mutex.pml      pass   ltl:all_done   -DROUNDS=1 -DROUNDS0=2 -O2
run mutex.pml      pass   ltl:handoff_ends -DROUNDS=1 -DROUNDS0=2 -O2
# spinmutex: goroutine 0 locks twice (the model's default), safety and
# both formulas (2.1-2.4 M states, 9-12 CPU s each).
run spinmutex.pml  pass   safety         -O2
run spinmutex.pml  pass   ltl:all_done   -O2
run spinmutex.pml  pass   ltl:handoff_ends -O2
run ticket.pml     pass   safety         -DSPURIOUS=0 -O2
# ticket's liveness: goroutine 2 (a LockContext that may give up) takes
# two tickets, the others one (ROUNDS is the loop bound in ticket.pml, so
# self/2+1 is 1, 1, 2): its second ticket follows one it may have
# abandoned, behind tickets still queued; every goroutine twice is nightly.
run ticket.pml     pass   ltl:nostarve   -DROUNDS=self/2+1 -O2
run slot.pml       pass   safety         -O2
# slot's liveness with 2 waiters (the collision, the parking-lot fall-back,
# a cancel, the scanner's pin: 81 K states, 2 CPU s). Every loop of the
# model consumes a change of serving or a token, both finite, so its only
# infinite runs stutter in an end state: the safety run's end-state check
# at 3 waiters covers the rest (3 waiters without the scanner, 1.8 M
# states, is nightly; with it, over 42 M states).
run slot.pml       pass   ltl:all_done   -DNW=2
run cond.pml       pass   safety
run cond.pml       pass   safety         -DBROADCAST
run cond.pml       pass   safety         -DONEBCAST
run cond.pml       pass   ltl:all_done
run cond.pml       pass   ltl:all_done   -DONEBCAST
run cond.pml       pass   safety         -DSHARED
run cond.pml       fail   safety         -DBROKEN_LATE_ENQUEUE
run cond.pml       fail   safety         -DONEBCAST -DBROKEN_BCAST_ONE
run cond.pml       fail   ltl:all_done   -DONEBCAST -DBROKEN_BCAST_ONE
run cond.pml       fail   safety         -DBROKEN_CANCEL_DROP
run cond.pml       fail   safety         -DBROKEN_SIGNAL_TWO
run cond.pml       fail   safety         -DSHARED -DBROKEN_NOSEQ
run ring.pml       pass   safety
run ring.pml       pass   safety         -DSHARED
run ring.pml       pass   safety         -DDRAIN
run ring.pml       pass   safety         -DDRAIN -DSHARED
run ring.pml       pass   ltl:all_done   -DDRAIN
run ring.pml       pass   ltl:all_done   -DDRAIN -DSHARED
# queue.pml: two producers and a consumer, Close after the drain, where a
# lost wake-up is an invalid end state (4.3 M states, 12.6 CPU s with the
# build; its three mutations 6 CPU s). Nightly: Close once the producers
# return, items still queued (1.5 M, 5.8 CPU s), and two consumers racing
# (-DTWOC, 9.6 M states).
run queue.pml      pass   safety         -DDRAIN -O2
# mpsc.pml: two producer processes (3 messages, one killed at any step)
# and the consumer of the shared MPSC queue; 1.1 M states. Nightly: two
# messages each with either size at each send (-DFULL -DSIZES), and the
# liveness formula (1.1 M states, 7.8 M visited under weak fairness).
run mpsc.pml       pass   safety         -O2
run sharedmutex.pml pass  safety         -DSPURIOUS=0 -O2
run sharedmutex.pml pass  ltl:all_done   -DONEDEATH -O2
# A taker that unlocks without MarkConsistent: not recoverable for everyone
# after it (one death: 1.6 M states; two deaths, 10 M, nightly).
run sharedmutex.pml pass  safety         -DSPURIOUS=0 -DONEDEATH -DNOREPAIR -O2
# The hand-off word (issue 11.1), its own scenario in sharedmutex.pml:
# greedy U one round, any one process dying at any step: 7.4 M states
# (14.2 M before dead values were cleared); DEATHS=2 safety and the
# liveness claim with a death are run by hand (README.md).
run sharedmutex.pml pass  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -O2
# LockContext's cancellation there (-DCANCEL: T may give up at any round,
# its context ends its sleeps), without deaths, safety and the liveness
# claim (3.3 M states each, 16 M visited under weak fairness: values no
# later step reads are cleared, see the model's header; before, safety
# stored 7.9 M and the claim visited 35 M unfinished). With one death,
# safety is nightly (27.7 M states, 76 CPU s of search, 1.2 GB); the claim
# with a death is by hand.
run sharedmutex.pml pass  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -DCANCEL -DDEATHS=0 -O2
run sharedmutex.pml pass  ltl:all_done   -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -DCANCEL -DDEATHS=0 -O2
run sharedticket.pml pass safety         -DNO_C
run sharedticket.pml pass ltl:all_done   -DNO_C
# A gives up and leaves while B locks twice (an abandoned ticket that only
# abandon's look at serving passes on); a taker that does not repair (the
# whole setting, 8 M states, is nightly; so are the three-process runs
# of 9.5 M and 4 M states, about 78 CPU seconds: CI checks A and B).
run sharedticket.pml pass ltl:all_done   -DNO_C -DA_LEAVES -DB_TWICE
run sharedticket.pml pass safety         -DNO_C -DNOREPAIR
run rwmutex.pml    pass   safety
run rwmutex.pml    pass   ltl:all_done
# The writers' word: writer 0 locking twice (without spurious wake-ups:
# 1.4 M states; with one, 5.2 M, nightly), and once with a spurious wake-up
# and a writer that gives up; liveness with writer 0 locking twice and
# the spurious wake-up.
run rwwriters.pml  pass   safety         -DSPURIOUS=0
run rwwriters.pml  pass   safety         -DROUNDS0=1
run rwwriters.pml  pass   ltl:all_done   -O2
run sharedrw.pml   pass   safety         -DSPURIOUS=0 -O2
run sharedrw.pml   pass   safety         -DSUM_SPLIT -O2
run sharedrw.pml   pass   ltl:all_done   -O2
run sharedrw.pml   pass   safety         -DREADER_DIES -O2
run sharedrw.pml   pass   ltl:all_done   -DREADER_DIES -O2
# sharedrw2.pml (two reader slots) needs 63M states, about 2 min alone on a
# loaded 2-core host: more than CI's whole run, so its passing runs are opt
# in (LOCKWORD_SLOW_MODELS=1 bash models/check.sh sharedrw2); its negative
# controls take a second and always run.
# The nightly set (LOCKWORD_SLOW_MODELS=1): the exhaustive long runs.
if [ "${LOCKWORD_SLOW_MODELS:-}" = 1 ]; then
run sharedticket.pml pass safety         -DSPURIOUS=0 -O2
run sharedticket.pml pass safety         -DSPURIOUS=0 -DA_LEAVES -DB_TWICE -O2
run sharedrw2.pml  pass   safety         -O2
run sharedrw2.pml  pass   ltl:all_done   -O2
run mutex.pml      pass   safety         -DROUNDS=2 -O2
run sharedmutex.pml pass  safety         -DSPURIOUS=0 -DNOREPAIR -O2
run sharedmutex.pml pass  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -DCANCEL -O2
run sharedticket.pml pass safety         -DSPURIOUS=0 -DNOREPAIR -O2
run sharedsemaphore.pml pass safety      -O2
run sharedsemaphore.pml pass safety      -DSPURIOUS=0 -DHOUSEKEEP -O2
run etcdlock.pml   pass   safety         -DATTEMPTS=2 -DEXPIRE=0 -O2
run etcdlock.pml   pass   safety         -DATTEMPTS=2 -DEXPIRE=1 -O2
run etcdlock.pml   pass   ltl:all_done   -DATTEMPTS=2 -O2
run rwwriters.pml  pass   safety         -O2
run mutex.pml      pass   ltl:all_done   -DROUNDS=2 -O2
run mutex.pml      pass   ltl:handoff_ends -DROUNDS=2 -O2
run ticket.pml     pass   ltl:nostarve   -DROUNDS=2 -DSPURIOUS=0 -O2
run semaphore.pml  pass   ltl:all_done   -DROUNDS=2 -O2
run queue.pml      pass   safety
run queue.pml      pass   safety         -DTWOC -O2
run mpsc.pml       pass   ltl:all_done   -O2
run mpsc.pml       pass   safety         -DFULL -DSIZES -O2
run slot.pml       pass   ltl:all_done   -DNW=3 -DSCANS=0 -O2
fi
# etcdlock: a flaky client A (gives up, loses requests) and a reliable B;
# one attempt of A, or two (the fence's version carried to the next), and a
# lease that expires at any step (A's: a paused holder, a lost Mutex; B's:
# A takes the lock from a dead holder). The two attempts with an expiry
# (2-4 M states) are nightly.
run etcdlock.pml   pass   safety
run etcdlock.pml   pass   safety         -DATTEMPTS=2
run etcdlock.pml   pass   safety         -DEXPIRE=0
run etcdlock.pml   pass   safety         -DEXPIRE=1
run etcdlock.pml   pass   ltl:all_done   -DEXPIRE=0
run etcdlock.pml   pass   ltl:all_done   -DEXPIRE=1
run seqlock.pml    pass   safety
run seqlock.pml    pass   ltl:readers_finish
run seqlock.pml    pass   safety         -DSHARED
run seqlock.pml    pass   ltl:readers_finish -DSHARED
run semaphore.pml  pass   safety         -O2
# semaphore's liveness: goroutine 0 (the large request, may give up)
# acquires twice, the others once; every goroutine twice is nightly.
run semaphore.pml  pass   ltl:all_done   -DROUNDS=1 -DROUNDS0=2 -O2
# sharedsemaphore.pml: three processes, one dying at any step, safety and
# the liveness formula (1.6 M states; under weak fairness 7.4 M visited,
# about 11 CPU s of search; with a spurious wake-up, safety is nightly);
# the formula again with process 0 acquiring twice, without the death
# (0.4 M states, 4.4 M visited, 8 CPU s of search): the second round
# with the death passed 25 M visited unfinished, by hand.
run sharedsemaphore.pml pass safety      -DSPURIOUS=0 -O2
run sharedsemaphore.pml pass ltl:all_done -DSPURIOUS=0 -O2
run sharedsemaphore.pml pass ltl:all_done -DSPURIOUS=0 -DROUNDS0=2 -DNODEATH -O2

# The mutation list: each line a small change that real bugs look like
# (a dropped wake, two steps swapped, a non-atomic check, an off-by-one, a
# skipped repair), which SPIN must reject: one it accepts fails the run.
while read -r model mode macros; do
  # shellcheck disable=SC2086 # macros are words
  run "$model" fail "$mode" $macros
done < <(sed 's/#.*//; /^[[:space:]]*$/d' mutations.txt)

start_all=$(date +%s)
jobs_max=${JOBS:-2}
for i in "${!specs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  # shellcheck disable=SC2086 # a spec is words
  ( run_one ${specs[$i]} >"$work/$i.line" 2>&1 || touch "$work/$i.failed" ) &
done
wait
for i in "${!specs[@]}"; do
  cat "$work/$i.line"
  [ -e "$work/$i.failed" ] && failed=1
done
cpu_all=$({ cat "$work"/*.line 2>/dev/null || true; } | sed -n 's/.* cpu=\([0-9.]*\).*/\1/p' | awk '{ t += $1 } END { printf "%.0f", t }')
echo "check.sh: ${#specs[@]} runs in $(( $(date +%s) - start_all )) s, $jobs_max at a time, $cpu_all CPU seconds (build and search)"

if [ "$failed" != 0 ]; then
  echo "check.sh: FAILED (reproduce one run: cd models && spin -a MACROS MODEL && gcc -DSAFETY -o pan pan.c && ./pan && spin -t -p MACROS MODEL)"
  exit 1
fi
echo "check.sh: all models verified, all mutations rejected"
