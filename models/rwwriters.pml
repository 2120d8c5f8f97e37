/*
 * rwwriters.pml: RWMutex's writers' word, the mutex among writers that
 * rwmutex.pml takes as ideal: a CAS from free, a spin, then a Drepper-style
 * word (locked, contended) on which writers park, and a hand-off: a parked
 * writer that has waited rwStarveNs (1 ms) sets the hand-off bit; the
 * release then reserves the word (contended | hand-off, not locked) for a
 * woken writer, which arriving writers may not take, and frees it if the
 * wake-up found nobody.
 *
 * Mirrors rwmutex.go on main:
 * models: rwmutex.go rwRef.lockWriters
 * models: rwmutex.go rwRef.releaseWriters
 * models: rwmutex.go rwRef.unlockWriters
 *
 * The writers' word alone: what a writer does between taking it and
 * releasing it (the writer bit, the phase, the readers) is rwmutex.pml's,
 * and whoever releases it (a writer's Unlock, or the last reader out for
 * a writer that gave up) runs unlockWriters; the holder here releases it
 * itself. "Has waited 1 ms" is a free choice of SPIN once a writer has
 * parked and the word is locked: every timing is covered. The spin
 * before parking is one CAS attempt (more attempts are the same step
 * again).
 *
 * Bounds: NG = 3 writers; writer 0 locks ROUNDS0 times (default 2: the
 * greedy re-locker that would overtake a starving writer), the others
 * once; writer 2 takes the word with LockContext and may give up once
 * while parked (also after asking for the hand-off); SPURIOUS early
 * returns (default 1).
 *
 * Properties:
 *   - exclusion (assert in the critical section);
 *   - the hand-off: a word reserved by a release is taken only by a writer
 *     that has parked, never by an arriving one (assert at every take);
 *   - the word is free (0) when every writer is done: no reservation left
 *     behind by a writer that asked and gave up (assert in the last out);
 *   - no lost wake-up: no invalid end state;
 *   - ltl all_done under weak fairness: every writer finishes.
 *
 * Negative controls:
 *   -DBROKEN_NO_WAKE      the release frees a contended word without a wake.
 *   -DBROKEN_NEWCOMER     a writer that has not parked takes a reserved word.
 *   -DBROKEN_KEEP_RESERVED a release whose wake-up found nobody leaves the
 *                         word reserved.
 *   -DBROKEN_SPLIT_CAS    the take is a load then a store: two holders.
 */
#define NG 3
#ifndef ROUNDS0
#define ROUNDS0 2
#endif
#include "wait.pml"

#define WORD 0
#define LOCKED 1
#define CONTENDED 2
#define HANDOFF 4
#define RESERVED 6 /* HANDOFF | CONTENDED */

byte writers;   /* the writers' word */
byte inside;    /* writers holding it */
bool reserved;  /* ghost: a release reserved the word, nobody took it yet */
byte ndone;
bool cancel2 = true; /* writer 2 may give up once */

#define rounds(g) ((g) == 0 -> ROUNDS0 : 1)

/* take: the word was v and is taken as nv by self (parkedBefore: it has
 * parked); one CAS. */
inline take(v, nv) {
	atomic {
#ifdef BROKEN_SPLIT_CAS
		if :: true -> ok = (writers == v) fi
	};
	atomic {
		if :: ok -> writers = nv :: else fi;
#else
		ok = (writers == v);
		if :: ok -> writers = nv :: else fi;
#endif
		if
		:: ok -> assert(!reserved || parkedBefore); reserved = false; inside++
		:: else
		fi
	}
}

proctype writer(byte self) {
	byte round, v, nv, got;
	bool parkedBefore, err, ok;

next:
	if
	:: round == rounds(self) -> goto finish
	:: else -> round++
	fi;
	parkedBefore = false;
	/* lockWriters: the spin's CAS from free */
	if
	:: take(0, LOCKED); if :: ok -> goto held :: else fi
	:: skip
	fi;
loop:
	v = writers;
#ifdef BROKEN_NEWCOMER
	if
	:: (v & LOCKED) == 0 ->
#else
	if
	:: (v & LOCKED) == 0 && ((v & HANDOFF) == 0 || parkedBefore) ->
#endif
		/* free, or reserved and we have parked: take it, contended */
		take(v, LOCKED | CONTENDED);
		if :: ok -> goto held :: else -> goto loop fi
	:: else ->
		nv = v | CONTENDED;
		if
		:: parkedBefore && (v & LOCKED) != 0 -> nv = nv | HANDOFF /* waited 1 ms */
		:: true
		fi;
		if
		:: nv != v ->
			atomic { ok = (writers == v); if :: ok -> writers = nv :: else fi };
			if :: !ok -> goto loop :: else fi
		:: else
		fi;
		parkedBefore = true;
		wait_enqueue(self, WORD, writers, nv, 0);
		if
		:: self == 2 && cancel2 -> wait_sleep(self, true, err)
		:: else -> wait_sleep(self, false, err)
		fi;
		if
		:: err -> cancel2 = false; goto next /* gave up: holds nothing */
		:: else -> goto loop
		fi
	fi;

held:
	atomic { assert(inside == 1); inside-- };
	/* unlockWriters: CAS(locked, 0), else releaseWriters */
	atomic { ok = (writers == LOCKED); if :: ok -> writers = 0 :: else fi };
	if
	:: ok -> goto next
	:: else
	fi;
release:
	v = writers;
	assert((v & LOCKED) != 0); /* Unlock of unlocked RWMutex */
	if
	:: (v & HANDOFF) == 0 ->
		atomic { ok = (writers == v); if :: ok -> writers = 0 :: else fi };
		if :: !ok -> goto release :: else fi;
#ifndef BROKEN_NO_WAKE
		if :: (v & CONTENDED) != 0 -> wake_n(WORD, 1, false, 0) :: else fi
#endif
	:: else ->
		atomic { ok = (writers == v); if :: ok -> writers = RESERVED; reserved = true :: else fi };
		if :: !ok -> goto release :: else fi;
		wake_count(WORD, 1, got);
		if
		:: got == 1 -> skip /* the oldest parked writer takes it */
		:: else ->
#ifndef BROKEN_KEEP_RESERVED
			/* nobody parked: free it, and wake a writer that parked
			 * on the reserved value meanwhile */
			atomic { ok = (writers == RESERVED); if :: ok -> writers = 0; reserved = false :: else fi };
			if :: ok -> wake_n(WORD, 1, false, 0) :: else fi
#else
			skip
#endif
		fi
	fi;
	goto next;

finish:
	atomic {
		ndone++;
		if
		:: ndone == NG -> assert(writers == 0 && inside == 0)
		:: else
		fi
	}
}

init {
	atomic {
		run writer(0);
		run writer(1);
		run writer(2)
	}
}

ltl all_done { <> (ndone == NG) }
