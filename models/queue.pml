/*
 * queue.pml: the MPMC Queue's slot protocol (Vyukov's per-slot sequence
 * numbers, a claim by one CAS of tail or head), Close as a bit of tail, and
 * the wake-up of each side: an announced count and a woken count beside a
 * generation word, a Dekker pair of store-sequence-then-load-counts against
 * announce-then-look.
 *
 * Mirrors queue.go on main:
 * models: queue.go (*Queue).TryPush
 * models: queue.go (*Queue).TryPop
 * models: queue.go (*Queue).pushSlow
 * models: queue.go (*Queue).popSlow
 * models: queue.go (*Queue).Close
 * models: queue.go (*Queue).hasRoom
 * models: queue.go (*Queue).hasItems
 * models: queue.go (*Queue).wakePoppers
 * models: queue.go (*Queue).await
 * models: queue.go (*queueWaiters).leave
 * models: queue.go (*queueWaiters).wake
 * models: queue.go (*queueWaiters).wakeSlow
 * models: queue.go (*queueWaiters).wakeAll
 *
 * Scenario: two producers push 2 and 1 items (the values 1..3) with Push
 * into a queue of CAP = 2 slots, so producers find it full and positions
 * lap, and one consumer Pops until the queue is closed and drained
 * (-DTWOC: one producer pushes 2 items and two consumers pop: the
 * consumers' claims race); four goroutines did not fit CI's budget (over
 * 17 M states); a closer calls Close once both producers
 * have returned (-DDRAIN: once every item has been popped; -DEARLY: at any
 * step, so pushes race it and some fail). Positions and sequences are
 * bytes that never wrap here (the Go code's are 64-bit). No spurious
 * wake-up (SPURIOUS 0) unless the run asks for one.
 *
 * Steps: the spin phase of await is its first look (every look of the
 * spin is the same step); unwoken's load in wake and wakePoppers is the
 * first load of wakeSlow's CAS loop, so the two are one step here (a wake
 * that skips at the load is one whose CAS found nobody unwoken then). The
 * CAS on tail or head is one atomic step; every other load and store is
 * its own. Not modelled: the batched calls (the same claims, n slots per
 * CAS), contexts (a cancelled wait leaves as a woken one does: it runs
 * leave), Len and Stats.
 *
 * Properties: an item is popped only after it was written, and exactly
 * once (assert on each pop: a popped slot is cleared, so a read of an
 * unwritten slot sees 0); at the end every accepted push was popped (Close
 * drains; without -DEARLY every push is accepted); no invalid end state:
 * no lost wake-up of either side (with -DDRAIN a parked consumer or
 * producer that nobody wakes is never released by Close, so SPIN reports
 * it as an invalid end state). ltl all_done (everybody returns, under weak
 * fairness) is written but not yet in check.sh: its cost is unmeasured.
 *
 * History: this model found two lost wake-ups in queue.go, each fixed with
 * a Go test: a look that read a slot another goroutine had claimed since
 * it loaded the position and slept (a consumer on a closed, drained
 * queue; TestQueueLookAfterStalePosition), and a goroutine counted woken
 * between its announcement and its load of gen, which then slept on the
 * bumped gen (TestQueueWokenBeforeItSleeps).
 *
 * Negative controls:
 *   -DBROKEN_PUBLISH_FIRST  a producer stores the slot's sequence before
 *                           it writes the item.
 *   -DBROKEN_NO_RECHECK     await sleeps after announcing itself without
 *                           looking at the queue again.
 *   -DBROKEN_KEEP_WOKEN     leave does not take a woken off the count:
 *                           the count covers goroutines that left, and a
 *                           later sleeper is never woken.

 */
#ifdef TWOC
#define NP 1
#define NC 2
#define PER0 2 /* the one producer pushes 2 */
#define PER1 0
#else
#define NP 2
#define NC 1
#define PER0 2
#define PER1 1
#endif
#define NG 3 /* goroutines that wait: producers first, then consumers */
#define ITEMS (PER0 + PER1)
#define CAP 2
#define CLOSED 128 /* queueClosed, the bit of tail */
#ifndef SPURIOUS
#define SPURIOUS 0
#endif
#include "wait.pml"

#define PUSHERS 0 /* the gen words' addresses, and indices of the side arrays */
#define POPPERS 1

byte tail, head;
byte seq[CAP];
byte val[CAP];
byte gen[2];       /* queueWaiters.gen */
byte announced[2]; /* state, low half */
byte nwoken[2];    /* state, high half */
byte delivered[ITEMS + 1]; /* ghost: times each item was popped */
byte accepted;     /* ghost: pushes that claimed a slot */
byte popped;       /* ghost */
byte pdone, cdone;
bool closedDone;
bool closedFlag; /* Queue.closed: set after the bit of tail */

/* leave: withdraw an announcement, taking one woken off if any */
inline leave(side) {
	atomic {
		announced[side]--;
#ifndef BROKEN_KEEP_WOKEN
		if
		:: nwoken[side] > 0 -> nwoken[side]--
		:: else -> skip
		fi
#endif
	}
}

/* wakeSlow(n): count up to n announced, unwoken goroutines as woken (the
 * CAS), then bump gen and wake them */
inline wake_slow(side, n) {
	atomic {
		if
		:: announced[side] > nwoken[side] ->
			k = announced[side] - nwoken[side];
			if
			:: k > n -> k = n
			:: else -> skip
			fi;
			nwoken[side] = nwoken[side] + k
		:: else -> k = 0
		fi
	};
	if
	:: k > 0 ->
		gen[side]++;
		wake_n(side, k, false, 0);
		k = 0
	:: else -> skip
	fi
}

/* wakeAll (Close, or a publish on a closed queue): bump gen, wake all */
inline wake_all(side) {
	gen[side]++;
	wake_n(side, NG, false, 0)
}

/*
 * hasRoom: the slot at tail is free, or the queue is closed. A slot
 * already published for tail (seq > t) means another producer claimed it
 * since the load: look again at the new tail.
 */
#define RELOOK(pos, word) pos = word
#define HASROOM \
	t = tail; \
	do \
	:: t & CLOSED -> rdy = true; clo = true; break \
	:: else -> \
		sq = seq[t % CAP]; \
		if \
		:: sq == t -> rdy = true; break \
		:: sq < t -> break \
		:: else -> RELOOK(t, tail) \
		fi \
	od; \
	sq = 0

/*
 * hasItems: the slot at head holds its item, or closed and drained (tail
 * read only once the closed flag is set, after tail's bit). A slot
 * already freed for the next lap (seq > h+1) means another consumer
 * claimed head since the load: look again at the new head.
 */
#define DRAINED(h, t) (h >= (t & ~CLOSED))
#define HASITEMS \
	h = head; \
	do \
	:: true -> \
		sq = seq[h % CAP]; \
		if \
		:: sq == h + 1 -> rdy = true; break \
		:: sq < h + 1 -> \
			if \
			:: closedFlag -> \
				t = tail; \
				if \
				:: DRAINED(h, t) -> rdy = true; clo = true \
				:: else -> skip \
				fi \
			:: else -> skip \
			fi; \
			break \
		:: else -> RELOOK(h, head) \
		fi \
	od; \
	sq = 0

#ifdef BROKEN_NO_RECHECK
#define RECHECK(READY) skip
#else
#define RECHECK(READY) READY
#endif

/*
 * await(side, ready): a look (the spin phase), then: load gen, announce,
 * look again; park while gen is unchanged; leave; again. Ends with rdy
 * (and clo when the queue is closed).
 */
#define AWAIT(self, side, READY) \
	READY; \
	do \
	:: rdy -> break \
	:: else -> \
		g = gen[side]; \
		atomic { announced[side]++ }; \
		RECHECK(READY); \
		if \
		:: rdy -> leave(side); break \
		:: else -> \
			wait_enqueue(self, side, gen[side], g, 0); \
			wait_sleep(self, false, err); \
			leave(side); \
			g = 0 \
		fi \
	od

proctype Producer(byte self) {
	byte i, v, t, sq, g, k;
	bool ok, clo, rdy, claimed, err;
	byte per = PER0;
	if
	:: self == 1 -> per = PER1
	:: else -> skip
	fi;
	for (i : 1 .. per) {
		v = self * PER0 + i;
		/* Push: TryPush, then pushSlow: await(hasRoom), TryPush again */
		do
		:: true ->
			/* TryPush */
			t = tail;
			do
			:: t & CLOSED -> ok = false; break
			:: else ->
				sq = seq[t % CAP];
				if
				:: sq == t ->
					atomic {
						if
						:: tail == t -> tail = t + 1; claimed = true; accepted++
						:: else -> skip
						fi
					};
					if
					:: claimed ->
						claimed = false;
#ifdef BROKEN_PUBLISH_FIRST
						seq[t % CAP] = t + 1;
						val[t % CAP] = v;
#else
						val[t % CAP] = v;
						seq[t % CAP] = t + 1; /* publish */
#endif
						/* wakePoppers(1) */
						if
						:: tail & CLOSED -> wake_all(POPPERS)
						:: else -> wake_slow(POPPERS, 1)
						fi;
						ok = true;
						break
					:: else -> t = tail
					fi
				:: sq < t -> ok = false; break /* full */
				:: else -> t = tail
				fi
			od;
			if
			:: ok -> ok = false; t = 0; break
			:: else ->
				AWAIT(self, PUSHERS, HASROOM);
				rdy = false;
				t = 0;
				if
				:: clo -> break /* ErrQueueClosed: not pushed */
				:: else -> skip
				fi
			fi
		od;
		clo = false
	}
	pdone++
}

proctype Consumer(byte self) {
	byte v, h, t, sq, g, k;
	bool ok, clo, rdy, claimed, err;
	do
	:: true ->
		/* TryPop */
		h = head;
		do
		:: true ->
			sq = seq[h % CAP];
			if
			:: sq == h + 1 ->
				atomic {
					if
					:: head == h -> head = h + 1; claimed = true
					:: else -> skip
					fi
				};
				if
				:: claimed ->
					claimed = false;
					v = val[h % CAP];
					val[h % CAP] = 0; /* q.clear */
					seq[h % CAP] = h + CAP; /* free for the next lap */
					wake_slow(PUSHERS, 1);
					ok = true;
					break
				:: else -> h = head
				fi
			:: sq < h + 1 -> ok = false; break /* empty */
			:: else -> h = head
			fi
		od;
		if
		:: ok ->
			ok = false;
			h = 0;
			assert(v != 0); /* written before it was published */
			atomic { delivered[v]++; popped++ };
			assert(delivered[v] == 1);
			v = 0
		:: else ->
			AWAIT(self, POPPERS, HASITEMS);
			rdy = false;
			t = 0;
			h = 0;
			if
			:: clo -> break /* ErrQueueClosed: closed and drained */
			:: else -> skip
			fi
		fi
	od;
	atomic {
		cdone++;
		if
		:: cdone == NC ->
			assert(popped == accepted); /* Close drains */
#ifndef EARLY
			assert(accepted == ITEMS)
#else
			skip
#endif
		:: else -> skip
		fi
	}
}

proctype Closer() {
	byte old;
#if defined(DRAIN)
	popped == ITEMS;
#elif !defined(EARLY)
	pdone == NP;
#endif
	/* Close: set the bit in tail; the first Close wakes both sides */
	atomic { old = tail; tail = tail | CLOSED };
	if
	:: !(old & CLOSED) ->
		closedFlag = true; /* Queue.closed, read by hasItems */
		wake_all(PUSHERS); wake_all(POPPERS)
	:: else -> skip
	fi;
	closedDone = true
}

init {
	atomic {
		seq[1] = 1; /* NewQueue: slot i free for the push of position i */
		run Producer(0);
#ifdef TWOC
		run Consumer(1);
#else
		run Producer(1);
#endif
		run Consumer(2);
		run Closer()
	}
}

ltl all_done { <> (pdone == NP && cdone == NC && closedDone) }
