#!/usr/bin/env bash
# Model-check every lock-word protocol with SPIN (see models/README.md).
#
# Usage: models/check.sh [name...]   (names: mutex, ticket, ...; default all)
#
# Needs spin and gcc on PATH; installs nothing (.ci/run installs spin). For
# each model it runs the correct protocol, which must pass, and each broken
# variant (-DBROKEN_...), which SPIN must reject with a counterexample trail.
# Prints one line per run: states stored, depth reached, seconds. Exits 1 if
# any correct model fails or any broken variant passes.
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
  # halves the search; gcc -O2 costs 10 s more on the large models, so the
  # small ones compile with -O0.
  local cflags=(-w -O0) panflags=(-m2000000) macros=()
  for m in "$@"; do
    if [ "$m" = -O2 ]; then cflags[1]=-O2; else macros+=("$m"); fi
  done
  set -- "${macros[@]}"
  case $mode in
    safety) cflags+=(-DSAFETY -DNOCLAIM -DCOLLAPSE) ;;
    ltl:*)  cflags+=(-DNFAIR=4 -DCOLLAPSE); panflags+=(-a -f -N "${mode#ltl:}") ;;
    *) echo "check.sh: bad mode $mode" >&2; exit 2 ;;
  esac
  local start end out
  start=$(date +%s.%N)
  (cd "$dir" && spin -a "$@" "$model" >spin.log 2>&1 && gcc "${cflags[@]}" -o pan pan.c >gcc.log 2>&1) || {
    echo "FAIL  $name $mode $*: spin or gcc failed:"; cat "$dir/spin.log" "$dir/gcc.log" 2>/dev/null | head -20
    return 1
  }
  out=$(cd "$dir" && ./pan "${panflags[@]}" 2>&1) || true
  end=$(date +%s.%N)
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
  printf '%-12s %-16s %-40s states=%-9s depth=%-6s %5ss  %s\n' \
    "$name" "$mode" "${*:-(as in Go)}" "$states" "$depth" "$secs" "$verdict"
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
# mutex's liveness runs lock once per goroutine (ROUNDS=1): still a holder, a
# sleeper that starves and a third goroutine that takes the lock between, so
# every hand-off path is searched, in 8 s instead of 200-300 s each at
# ROUNDS=2 (which also pass: run them by hand with -DROUNDS=2). Safety keeps
# ROUNDS=2.
run mutex.pml      pass   safety         -O2
run mutex.pml      pass   ltl:all_done   -DROUNDS=1 -O2
run mutex.pml      pass   ltl:handoff_ends -DROUNDS=1 -O2
run mutex.pml      fail   safety         -DBROKEN_STORE1
run mutex.pml      fail   safety         -DBROKEN_CANCEL
run mutex.pml      fail   safety         -DBROKEN_NO_TAKEBACK
run mutex.pml      fail   ltl:handoff_ends -DROUNDS=1 -DBROKEN_NO_TAKEBACK
run mutex.pml      fail   safety         -DBROKEN_OVERTAKE
run ticket.pml     pass   safety         -DSPURIOUS=0 -O2
run ticket.pml     pass   ltl:nostarve   -DROUNDS=1
run ticket.pml     fail   safety         -DSPURIOUS=0 -DBROKEN_DROP_TURN
run ticket.pml     fail   ltl:nostarve   -DROUNDS=1 -DBROKEN_DROP_TURN
run ticket.pml     fail   safety         -DSPURIOUS=0 -DBROKEN_RECORD_FIRST
run slot.pml       pass   safety         -O2
run slot.pml       fail   safety         -DBROKEN_CHECK_FIRST
run slot.pml       fail   safety         -DBROKEN_CANCEL_DROP
run slot.pml       fail   safety         -DBROKEN_NO_FALLBACK
run slot.pml       fail   safety         -DBROKEN_LEAVE_BUSY
run slot.pml       fail   safety         -DBROKEN_NO_KEY_CHECK
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
run cond.pml       fail   safety         -DSHARED -DBROKEN_NOSEQ
run ring.pml       pass   safety
run ring.pml       pass   safety         -DSHARED
run ring.pml       fail   safety         -DBROKEN_PUBLISH_FIRST
run ring.pml       fail   safety         -DBROKEN_NO_RECHECK
run ring.pml       fail   safety         -DSHARED -DBROKEN_PUBLISH_FIRST
run sharedmutex.pml pass  safety         -DSPURIOUS=0 -O2
run sharedmutex.pml pass  ltl:all_done   -DONEDEATH -O2
run sharedmutex.pml fail  safety         -DSPURIOUS=0 -DBROKEN_NO_WAITERS
run sharedmutex.pml fail  safety         -DSPURIOUS=0 -DBROKEN_TAKEOVER
run sharedmutex.pml fail  ltl:all_done   -DONEDEATH -DBROKEN_PID_TOKEN
# The hand-off word (issue 11.1), its own scenario in sharedmutex.pml:
# greedy U one round, any one process dying at any step: 13 M states,
# about 25 s (UROUNDS=1 DEATHS=2 safety and the ltl are run by hand: see
# the model's header).
run sharedmutex.pml pass  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -O2
# The plain take-back (a dead grantee) needs the greedy U's second round to
# be reached; the broken variants stop at their first error, so they run
# at UROUNDS=2 cheaply. The passing UROUNDS=2 safety run, where the plain
# take-back is reached, is run by hand: 88.9 M states, 0 errors, 238 s.
run sharedmutex.pml fail  safety         -DHANDOFF -DUROUNDS=2 -DSPURIOUS=0 -DBROKEN_NO_PLAIN
run sharedmutex.pml fail  safety         -DHANDOFF -DUROUNDS=2 -DSPURIOUS=0 -DBROKEN_KEEP_GRANT
run sharedmutex.pml fail  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -DBROKEN_STALE_H
run sharedmutex.pml fail  safety         -DHANDOFF -DUROUNDS=1 -DSPURIOUS=0 -DDEATHS=0 -DBROKEN_NO_WITHDRAW
run sharedticket.pml pass safety         -DSPURIOUS=0 -O2
run sharedticket.pml pass safety         -DNO_C
run sharedticket.pml pass ltl:all_done   -DNO_C
run sharedticket.pml fail safety         -DNO_C -DBROKEN_RELEASED_DIED
run sharedticket.pml fail safety         -DNO_C -DBROKEN_DROP_TURN
run sharedticket.pml fail safety         -DNO_C -DBROKEN_NO_CLAIM_CHECK
run rwmutex.pml    pass   safety
run rwmutex.pml    pass   ltl:all_done
run rwmutex.pml    fail   safety         -DBROKEN_GIVEUP_RELEASES
run sharedrw.pml   pass   safety         -DSPURIOUS=0 -O2
run sharedrw.pml   pass   safety         -DSUM_SPLIT -O2
run sharedrw.pml   pass   ltl:all_done   -O2
run sharedrw.pml   pass   safety         -DREADER_DIES -O2
run sharedrw.pml   pass   ltl:all_done   -DREADER_DIES -O2
run sharedrw.pml   fail   safety         -DBROKEN_NO_RECHECK
run sharedrw.pml   fail   safety         -DBROKEN_GIVEUP_CLEARS
run sharedrw.pml   fail   safety         -DBROKEN_HOLD_FIRST
run sharedrw.pml   fail   ltl:all_done   -DREADER_DIES -DBROKEN_DEAD_COUNTS
# sharedrw2.pml (two reader slots) needs 63M states, about 2 min alone on a
# loaded 2-core host: more than CI's whole run, so its passing runs are opt
# in (LOCKWORD_SLOW_MODELS=1 bash models/check.sh sharedrw2); its negative
# controls take a second and always run.
if [ "${LOCKWORD_SLOW_MODELS:-}" = 1 ]; then
run sharedrw2.pml  pass   safety         -O2
run sharedrw2.pml  pass   ltl:all_done   -O2
fi
run sharedrw2.pml  fail   safety         -DBROKEN_RELOAD
run sharedrw2.pml  fail   safety         -DBROKEN_NO_RECHECK
run seqlock.pml    pass   safety
run seqlock.pml    pass   ltl:readers_finish
run seqlock.pml    pass   safety         -DSHARED
run seqlock.pml    pass   ltl:readers_finish -DSHARED
run seqlock.pml    fail   safety         -DBROKEN_NO_RECHECK
run seqlock.pml    fail   safety         -DSHARED -DBROKEN_RESTART
run seqlock.pml    fail   ltl:readers_finish -DSHARED -DBROKEN_NO_STALL
run semaphore.pml  pass   safety         -O2
run semaphore.pml  pass   ltl:all_done   -DROUNDS=1
run semaphore.pml  fail   safety         -DROUNDS=1 -DBROKEN_OFF_BY_ONE
run semaphore.pml  fail   safety         -DROUNDS=1 -DBROKEN_BARGE
run semaphore.pml  fail   safety         -DROUNDS=1 -DBROKEN_LEAVE_NO_GRANT
run semaphore.pml  fail   safety         -DROUNDS=1 -DBROKEN_KEEP_RACED

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
echo "check.sh: ${#specs[@]} runs in $(( $(date +%s) - start_all )) s, $jobs_max at a time"

if [ "$failed" != 0 ]; then
  echo "check.sh: FAILED (reproduce one run: cd models && spin -a MACROS MODEL && gcc -DSAFETY -o pan pan.c && ./pan && spin -t -p MACROS MODEL)"
  exit 1
fi
echo "check.sh: all models verified, all negative controls rejected"
