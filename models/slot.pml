/*
 * slot.pml: internal/wait's hand-off slots (slot.go), WaitOne and WakeOne,
 * under the client they were written for: TicketMutex's await and Unlock.
 *
 * models: internal/wait/slot.go WaitOne
 * models: internal/wait/slot.go WakeOne
 * models: internal/wait/slot.go pin
 * models: internal/wait/slot.go leave
 * models: internal/wait/slot.go slotsNoted
 * models: internal/wait/slot.go slotsParked
 * models: ticket.go ticketRef.await
 * models: ticket.go ticketRef.release
 * models: ticket.go ticketRef.abandon
 *
 * A separate model, not part of wait.pml: wait.pml is the futex contract
 * every model includes, with the check and the enqueue as one step; the
 * slots are an implementation of that contract with more steps (publish,
 * re-check, pin, take, leave), and putting them there would multiply every
 * other model's state space. This model includes wait.pml for the parking
 * lot that a waiter falls back to (park.go's park and wake, whose check and
 * enqueue are one step under the bucket lock, as there), and checks that
 * the slots keep the contract.
 *
 * Words: serving (the lock word the waiters sleep on, address 0; tickets
 * 0..NW, no wrap: ticket.pml checks the wrap), the slot table (SLOTS
 * entries, ticket t in slot t % SLOTS; each holds 0 = nil, g+1 = goroutine
 * g's waiter, or BUSY = slotBusy), each waiter's key (its fields, written
 * before it is published) and its ready channel (capacity 1: a count, and a
 * send to a full one is an assertion failure, a double wake-up), and the
 * abandoned-ticket records (ticketSkips).
 *
 * Bounds: NW = 3 waiters holding tickets 1..3 (goroutine g holds g+1), the
 * holder of ticket 0 (the waker: Unlock = serving advances, then WakeOne
 * for the ticket now served; each new holder unlocks in turn), and a
 * diagnostic scanner (Noted, Parked) that pins the slot SCANS = 1 times,
 * at any moment (one pin reaches every step a pin can fall between; WakeOne
 * is the other pinner);
 * -DSCANS=2 passes too: 10.6 M states; -DSLOTS=2, tickets 1 and 3 sharing
 * a slot and 2 alone, passes: 4.5 M states; neither is in check.sh, for time).
 * SLOTS = 1: every ticket maps to one slot, so two waiters collide and one
 * falls back to the parking lot, and WakeOne finds another ticket's waiter
 * in the slot (the collision of two keys or two words). Waiters 1 and 2
 * (tickets 2 and 3) may be cancelled at every select on ctx.Done(), in the
 * slot and in the parking lot. A waiter re-waits after a wake-up that is
 * not its turn, reusing its waiter (the pool's reuse: the same pointer
 * published again, the ABA that pin's fresh read of the key must survive).
 * Each Go atomic (a Load, a CAS, a Store, a channel operation) is one
 * step; a Load followed by a CAS of the loaded value in pin and leave is
 * one step, since a CAS that fails after the value changed retries, which
 * is a later Load; so is WakeOne's and the scanner's "Load != nil, then
 * pin" (pin loads again: a nil at the first load is a nil at pin's, had
 * it come then). abandon's count and record (aux, ticketSkips) are one
 * step here (ticket.pml checks their order). The spins on a busy slot
 * (Gosched) are blocking guards: a pinner that never restored would show
 * as an invalid end state. No spurious wake-ups (park has none).
 * Not covered: more than one word (a second word's waiter in the slot is
 * the same case as another key's), TryLock, the spinning of await
 * (a shortcut to the same re-load), more than one ticket per goroutine.
 *
 * Properties:
 * - no lost wake-up: no invalid end state. Every waiter ends holding the
 *   lock once (and unlocks) or gives up its ticket, and serving reaches
 *   NW+1 (every ticket served or skipped), asserted at the end.
 * - no double wake-up, no lost token: a send finds the waiter's channel
 *   empty; a waiter whose slot a waker took (handed) returns nil, never
 *   ctx.Err(); a waiter returns its waiter to the pool with an empty
 *   channel (a token left there would be a later wait's spurious one, and
 *   the hand-off it carried lost) and out of every slot.
 * - a cancelled waiter is never left in a slot: the assertion at release,
 *   and every slot nil at the end.
 * - mutual exclusion of the ticket lock (assert).
 * - ltl all_done under weak fairness: every goroutine finishes. -DNW=2
 *   (waiters 0 and 1, tickets 1 and 2; 1 cancels) keeps the collision, the
 *   fall-back to the parking lot, a cancel and the scanner's pin, and is
 *   what check.sh runs it at (NW=3 with the scanner: over 42 M states).
 *   Every loop here consumes a change of serving or a token, both finite,
 *   so the only infinite runs stutter in an end state, which the safety
 *   run's end-state check covers at NW=3.
 *
 * Negative controls (each must fail):
 *   -DBROKEN_CHECK_FIRST   WaitOne loads the word before it publishes
 *                          itself in the slot: the waker's change and its
 *                          look at the slot fall in between, lost wake-up.
 *   -DBROKEN_CANCEL_DROP   a waiter whose leave fails (a waker took it)
 *                          returns ctx.Err() without taking the token: the
 *                          hand-off is dropped and the token left behind.
 *   -DBROKEN_NO_FALLBACK   WakeOne, finding another ticket's waiter in the
 *                          slot, does not look in the parking lot.
 *   -DBROKEN_LEAVE_BUSY    leave reads a busy slot (a scanner's pin) as
 *                          "a waker took me" and waits for a token that
 *                          never comes.
 *   -DBROKEN_NO_KEY_CHECK  WakeOne takes whatever waiter is in the slot
 *                          without checking its key.
 */
#ifndef NW
#define NW 3
#endif
#define NG NW
#define SPURIOUS 0
#include "wait.pml"

#ifndef SLOTS
#define SLOTS 1
#endif
#ifndef SCANS
#define SCANS 1
#endif
#define BUSY 255
#define SERVING 0
#define CANCELS(g) ((g) >= 1) /* goroutines 1 and 2 use LockContext */

byte serving;
byte slot[SLOTS];
byte skey[NW];      /* waiter g's key, as WaitOne sets it */
byte ready[NW];     /* its token channel (capacity 1) */
bool handed[NW];    /* a WakeOne took it from its slot: it must return nil */
bool skipped[NW + 2];  /* ticket t recorded abandoned (ticketSkips) */
byte holders;
byte finished;

/* pin: swap a waiter in slot i for BUSY and return it in p, or p = 0. */
inline pin(i, p) {
	atomic {
		if
		:: slot[i] == 0 -> p = 0
		:: slot[i] != 0 && slot[i] != BUSY -> p = slot[i]; slot[i] = BUSY
		fi /* slot[i] == BUSY: blocked (Gosched until the pinner is done) */
	}
}

/* leave: CAS slot i from waiter g+1 to nil; left = false: a waker took it. */
inline leave(i, g, left) {
	atomic {
		if
		:: slot[i] == g + 1 -> slot[i] = 0; left = true
		:: slot[i] != g + 1 && slot[i] != BUSY -> left = false
#ifdef BROKEN_LEAVE_BUSY
		:: slot[i] == BUSY -> left = false
#endif
		fi
	}
}

/* <-w.ready (the send is in wake_one, and in wait.pml's wake_n) */
#define take_token(g) atomic { ready[g] > 0 -> ready[g] = 0 }

/* release(w): back to the pool, holding no token and in no slot. */
inline release_w(g) {
	d_step {
		assert(ready[g] == 0);
		j = 0;
		do
		:: j < SLOTS -> assert(slot[j] != g + 1); j++
		:: else -> j = 0; break
		od;
		handed[g] = false;
		changed = false; left = false; i = 0
	}
}

/* WakeOne(serving, key): result in woke. */
inline wake_one(key, woke) {
	d_step { i = (key) % SLOTS; woke = false };
	/* s.Load() != nil, then pin: one step (pin loads again; see the header) */
	pin(i, p);
	if
	:: p != 0 ->
#ifdef BROKEN_NO_KEY_CHECK
		if :: true ->
#else
		if :: skey[p - 1] == (key) ->
#endif
			atomic { slot[i] = 0; handed[p - 1] = true }; /* s.Store(nil): taken */
			atomic { assert(ready[p - 1] == 0); ready[p - 1] = 1; woke = true; p = 0 }
		:: else ->
			atomic { slot[i] = p; p = 0 /* another key's waiter: leave it */
#ifdef BROKEN_NO_FALLBACK
			; woke = true /* and return false without the parking lot */
#endif
			}
		fi
	:: else -> skip
	fi;
	if
	:: !woke -> wake_n(SERVING, 1, true, key)
	:: else -> skip
	fi;
	d_step { woke = false; i = 0 }
}

/*
 * ticketRef.release after serving.Add(1) made it s: skip abandoned
 * tickets (removeSkip), stop at next (NW+1), else WakeOne(s).
 */
inline release(s) {
	do
	:: s == NW + 1 -> break /* s == next: the lock is free */
	:: atomic { s < NW + 1 && skipped[s] -> skipped[s] = false }; /* removeSkip */
		atomic { serving++; s = serving }
	:: s < NW + 1 && !skipped[s] -> /* (a record made after this look: abandon sees serving) */
		wake_one(s, woke); break
	od;
	s = 0
}

/* holders--: leaving the critical section, in the step of the Add */
inline unlock(s) {
	atomic { holders--; serving++; s = serving };
	release(s)
}

/* WaitOne(ctx, &serving, v, key = g+1): err = ctx.Err() or nil. */
inline wait_one(g, v, err) {
	d_step { /* w.addr, w.key: set before the CAS publishes them */
		skey[g] = g + 1; i = (g + 1) % SLOTS; err = false
	}
#ifdef BROKEN_CHECK_FIRST
	changed = (serving != v);
#endif
	if
	:: atomic { slot[i] == 0 -> slot[i] = g + 1 }; /* published */
#ifndef BROKEN_CHECK_FIRST
		changed = (serving != v);
#endif
		if
		:: changed ->
			leave(i, g, left);
			if
			:: !left -> take_token(g) /* a waker chose us meanwhile */
			:: else -> skip
			fi
		:: else ->
			if
			:: take_token(g)
			:: CANCELS(g) -> /* ctx.Done() */
				leave(i, g, left);
				if
				:: left -> err = true
				:: else ->
#ifdef BROKEN_CANCEL_DROP
					err = true
#else
					take_token(g) /* chosen before we could leave */
#endif
				fi
			fi
		fi;
		if
		:: err -> assert(!handed[g])
		:: else -> skip
		fi
	:: atomic { slot[i] != 0 -> skip }; /* occupied: the parking lot */
		wait_enqueue(g, SERVING, serving, v, g + 1);
		wait_sleep(g, CANCELS(g), err)
	fi;
	release_w(g)
}

proctype Waiter(byte g) {
	byte s, i, j, p;
	bool err, changed, left, woke;
	/* ticketRef.await for ticket g+1 */
	do
	:: atomic { serving == g + 1 -> s = serving; holders++; assert(holders == 1); break }
	:: atomic { serving != g + 1 -> s = serving };
		wait_one(g, s, err);
		if
		:: err -> goto abandon
		:: else -> skip
		fi
	od;
	unlock(s);
	goto done;
abandon:
	/* ticketRef.abandon: count and record, then look at serving */
	skipped[g + 1] = true;
	if
	:: atomic { serving == g + 1 && skipped[g + 1] -> skipped[g + 1] = false;
		/* our turn came and nobody skipped it: we hold, pass it on */
		holders++; assert(holders == 1) };
		unlock(s)
	:: else -> skip
	fi;
done:
	finished++
}

/* the holder of ticket 0: Unlock */
proctype Holder() {
	byte s, i, p;
	bool woke;
	atomic { holders++; assert(holders == 1) };
	unlock(s);
	finished++
}

/* Noted and Parked: pin an occupied slot, read, put the waiter back. */
proctype Scanner() {
	byte n = SCANS, p;
	do
	:: n > 0 ->
		pin(0, p); /* the Load != nil and pin, as in WakeOne */
		atomic { if :: p != 0 -> slot[0] = p; p = 0 :: else -> skip fi; n-- }
	:: else -> break
	od
}

init {
	atomic {
		run Waiter(0); run Waiter(1);
#if NW > 2
		run Waiter(2);
#endif
		run Holder(); run Scanner()
	};
	(finished == NW + 1);
	d_step {
		assert(serving == NW + 1);
		do
		:: finished < NW + 1 + SLOTS -> assert(slot[finished - NW - 1] == 0); finished++
		:: else -> break
		od
	}
}

ltl all_done { <> (finished == NW + 1) }
