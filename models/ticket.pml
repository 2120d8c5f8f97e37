/*
 * ticket.pml: TicketMutex, the ticket lock of Mellor-Crummey and Scott
 * with parked waiters keyed by ticket, abandoned tickets skipped by the
 * unlocker that reaches them, and counters that wrap.
 *
 * Mirrors ticket.go on main:
 * models: ticket.go (*TicketMutex).Lock
 * models: ticket.go (*TicketMutex).LockContext
 * models: ticket.go (*TicketMutex).wait
 * models: ticket.go (*TicketMutex).Unlock
 * models: ticket.go ticketRef.await
 * models: ticket.go ticketRef.release
 * models: ticket.go ticketRef.unlock
 * models: ticket.go ticketRef.abandon
 * models: ticket.go (*ticketSkips).add
 * models: ticket.go (*ticketSkips).remove
 *
 * Words: next, serving (B bits, wrapping), aux (abandoned tickets awaiting
 * a skip; the statistics flag is not modelled), and the set of recorded
 * abandoned tickets (the lock's ticketSkips set, one bit per ticket value).
 *
 * Bounds: NG = 3 goroutines; goroutine 0 uses Lock, 1 and 2 LockContext
 * and may each give up once while parked. Safety: ROUNDS = 2 acquisitions
 * each (6 tickets), no spurious wake-up (SPURIOUS = 0: in await a
 * spurious return is the same step as a wait that finds serving moved, a
 * reload and another wait, which the model already has). Liveness:
 * ROUNDS = 1 with one spurious wake-up. Counters of 5 bits (mod 32) that
 * start 4 below the wrap, so every run crosses it. Not 3 bits: release
 * reads serving, then next, and a releaser descheduled between the two
 * sees every ticket issued meanwhile, which the int32 "serving ran past
 * next" test must still read as positive: the lag must stay under half
 * the range (2^31 in Go, out of reach). Two cancelling waiters are the
 * fewest for the abandon-order race (two records, one count) with a third
 * goroutine holding meanwhile. The liveness claim is over bounded rounds
 * (an unbounded run would let that lag grow past any width the model can
 * afford), so it rules out deadlock and livelock in these runs; with the
 * FIFO assertion (nobody overtakes a waiter) that is bounded waiting.
 * Not covered: more than 2 acquisitions per goroutine, more than one
 * cancellation each.
 *
 * Properties: mutual exclusion; FIFO: a goroutine enters only when no
 * goroutine holding an earlier ticket still waits for it (assert); no
 * unlock of an unlocked lock (assert, the panic in release); no invalid
 * end state (no lost wake-up, no stalled queue behind an abandoned
 * ticket); ltl nostarve under weak fairness: each goroutine that takes a
 * ticket eventually holds the lock or gives up.
 *
 * Negative controls:
 *   -DBROKEN_DROP_TURN    a cancelled waiter just leaves, dropping its
 *                         turn: the queue stalls behind its ticket.
 *   -DBROKEN_RECORD_FIRST abandon records its ticket before counting it
 *                         (the order its comment warns against).
 */
#define NG 3
#ifndef ROUNDS
#define ROUNDS 2
#endif
#define MOD 32
#define START 28 /* the counters start 4 tickets below the wrap */
#include "wait.pml"

#define SERVING 0 /* the serving word's address */
#define neg(d) ((((d) + MOD) % MOD) >= MOD / 2) /* int32(d) < 0 */

byte next = START, serving = START, aux;
int skips; /* bit t: ticket t recorded abandoned */
byte incs;
bool want[NG]; /* holds a ticket it has neither been served nor given up */
byte tk[NG];   /* that ticket */

/* ticketSkips.remove: atomically, under the set's mutex */
#define skip_remove(t, ok) atomic { ok = ((skips >> (t)) & 1); skips = skips & ~(1 << (t)) }

/*
 * ticketRef.release, from a fresh load of serving. Each step is one Go
 * atomic operation with the local decisions that follow it; locals are
 * cleared once dead, so that states differing only in them merge.
 */
inline release() {
	s = serving;
	do
	:: atomic {
		n = next;
		if
		:: s == n -> n = 0; s = 0; break /* every ticket up to s was skipped */
		:: else -> assert(!neg(n - s)); n = 0 /* else panic: Unlock of unlocked */
		fi
	   };
		if
		:: aux != 0 -> skip_remove(s, ok) /* aux.Load, then skips.remove */
		:: else -> ok = false
		fi;
		if
		:: ok -> ok = false; aux--; atomic { serving = (serving + 1) % MOD; s = serving }
		:: else -> atomic { wake_n(SERVING, 1, true, s); s = 0 }; break /* wait.WakeOne(serving, s) */
		fi
	od
}

/* ticketRef.unlock / TicketMutex.Unlock: Add(1) on serving, then release */
inline unlock() {
	serving = (serving + 1) % MOD;
	if
	:: serving != next -> release() /* serving.Add(1) != next.Load() */
	:: else -> skip
	fi
}

active [NG] proctype G() {
	byte self = _pid;
	byte t, s, n, r;
	bool ok, err;
	bool canCancel = (self != 0);

	for (r : 1 .. ROUNDS) {
		/* Lock / LockContext: ticket := next.Add(1) - 1 */
		atomic { t = next; next = (next + 1) % MOD; tk[self] = t; want[self] = true };
		/* await */
		do
		:: atomic {
			s = serving;
			if
			:: s == t -> s = 0; break
			:: else -> skip
			fi
		   };
			/* next in line spins: one more look */
			if
			:: atomic { (t - s + MOD) % MOD == 1 && serving == t -> s = 0 }; break
			:: else -> skip
			fi;
			/* wait.WaitOne(serving, s, t): WaitKey's contract, one waiter per
			 * key (its slot lane is checked by internal/wait's slot_test.go) */
			atomic { wait_enqueue(self, SERVING, serving, s, t); s = 0 };
			wait_sleep(self, canCancel, err);
			if
			:: err ->
				err = false;
				canCancel = false;
				want[self] = false;
#ifndef BROKEN_DROP_TURN
				/* abandon(t) */
#ifdef BROKEN_RECORD_FIRST
				skips = skips | (1 << t);
				aux++;
#else
				aux++;
				skips = skips | (1 << t); /* ticketSkips.add */
#endif
				if
				:: serving == t ->
					skip_remove(t, ok);
					if
					:: ok -> ok = false; aux--; unlock()
					:: else -> skip
					fi
				:: else -> skip
				fi;
#endif
				goto next_round
			:: else -> skip
			fi
		od;
		/* holding: FIFO, no earlier ticket still waiting */
		atomic {
			want[self] = false;
			incs++;
			assert(incs == 1);
			assert(!want[0] || 0 == self || !neg(tk[0] - t));
			assert(!want[1] || 1 == self || !neg(tk[1] - t));
			assert(!want[2] || 2 == self || !neg(tk[2] - t))
		};
			incs--;
		unlock();
next_round:
		t = 0
	}
}

ltl nostarve { [] ((want[0] -> <> !want[0]) && (want[1] -> <> !want[1]) && (want[2] -> <> !want[2])) }
