/*
 * rwmutex.pml: RWMutex, the in-process phase-fair lock (PF-T of
 * Brandenburg and Anderson, with parked waiters): readers count in and out
 * on state; the writer holding the writers' word (a mutex) sets the writer
 * bit and flips the phase with one add that reads the readers inside, and
 * waits for departing (readers it still waits for) to reach zero; a
 * writer that gives up marks departing abandoned and the last reader out
 * releases on its behalf; a reader that gives up takes its entry back.
 *
 * Mirrors rwmutex.go on main:
 * models: rwmutex.go (*RWMutex).RLock
 * models: rwmutex.go (*RWMutex).RUnlock
 * models: rwmutex.go rwRef.rlockSlow
 * models: rwmutex.go rwRef.runlockSlow
 * models: rwmutex.go rwRef.lock
 * models: rwmutex.go rwRef.arrive
 * models: rwmutex.go rwRef.awaitReaders
 * models: rwmutex.go (*RWMutex).Unlock
 * models: rwmutex.go (*RWMutex).unlockSlow
 * models: rwmutex.go rwRef.release
 * models: rwmutex.go rwArrive
 *
 * Words in bytes: state = bit 0 phase, 1 writer, 2 parked, reader count
 * from bit 4 (mod 16; Go: bits 4-30 with an overflow guard, and the stats
 * bit 3, not modelled); departing with bit 7 abandoned (Go: bit 31). The
 * writers' word is an ideal mutex here (wticket; its protocol, a
 * Drepper-style word with a hand-off to a starving parked writer, is
 * rwRef.lockWriters and releaseWriters, modelled on its own in
 * rwwriters.pml): writers arrive one
 * after the other, and the next one waits until the word is released, by
 * a writer's Unlock or by the reader that releases for an abandoned
 * writer. Phase fairness does not depend on the order among writers.
 *
 * Scenario: three writer arrivals (writer 2 uses LockContext and may give
 * up while readers leave); NR = 2 readers, one RLock/RUnlock each, reader
 * 2 with RLockContext, which may give up while parked; one spurious
 * wake-up. The same bound as sharedrw.pml, for the same reason: the
 * phase reuse the abandoned bit prevents takes a reader counted behind
 * writer 1, writer 2 leaving and writer 3 arriving.
 *
 * Properties: no writer with a reader, no two writers; phase fairness as
 * in sharedrw.pml (a waiting reader waits for one writer at most; a reader
 * never enters past an arrived writer it was not counted before); no
 * invalid end state; ltl all_done under weak fairness.
 *
 * Negative control:
 *   -DBROKEN_GIVEUP_RELEASES  a writer that gives up releases at once
 *                             (clears its bits and releases the writers' word)
 *                             while the readers it counted are leaving.
 */
#define NG 3 /* 0: writers, 1-2: readers */
#define NR 2
#include "wait.pml"

#define STATE 0
#define DEPART 1
#define PHASE 1
#define WRITER 2
#define PARKED 4
#define READER 16
#define WBITS 3
#define ABANDONED 128

byte state, departing;
bool wticket;      /* the writers' ticket lock is held */
byte rholding, wholding, done;
byte arrivals, wwaiting;  /* ghosts, as in sharedrw.pml */
byte rgen[NG];
bool rwaiting[NG];

inline release() {
	atomic {
		if
		:: state & PARKED -> state = state & ~(WRITER | PARKED); wake_n(STATE, NG, false, 0)
		:: else -> state = state & ~(WRITER | PARKED)
		fi
	};
	wticket = false /* unlockWriters */
}

inline wlock() {
	atomic { !wticket -> wticket = true };
	s = state;
	atomic {
		if
		:: s & PHASE -> state = state + WRITER - PHASE
		:: else -> state = state + WRITER + PHASE
		fi;
		s = state; arrivals++; wwaiting = arrivals
	};
	if
	:: s / READER == 0 -> res = 0
	:: else ->
		atomic { departing = departing + s / READER; d = departing };
		if
		:: d == 0 -> res = 0
		:: else ->
			/* awaitReaders */
			do
			:: d = departing;
				if
				:: d == 0 -> res = 0; break
				:: else -> skip
				fi;
				wait_enqueue(0, DEPART, departing, d, 0);
				wait_sleep(0, ctxok, err);
				if
				:: err ->
					ctxok = false; err = false;
#ifdef BROKEN_GIVEUP_RELEASES
					wwaiting = 0; res = 1; release(); break
#else
					do
					:: atomic { departing == 0 -> res = 0 }; break
					:: atomic { departing != 0 -> departing = departing | ABANDONED; res = 1; wwaiting = 0 }; break
					od;
					break
#endif
				:: else -> skip
				fi
			od
		fi
	fi;
	s = 0; d = 0;
	if
	:: res == 0 ->
		atomic {
			wwaiting = 0;
			wholding++;
			assert(wholding == 1 && rholding == 0);
			assert(!rwaiting[1] || rgen[1] >= arrivals);
			assert(!rwaiting[2] || rgen[2] >= arrivals)
		};
		wholding--;
		release()
	:: else -> skip
	fi;
	res = 0
}

active proctype Writers() {
	byte s, d, res;
	bool err, ctxok;
	wlock();
	ctxok = true;
	wlock();
	ctxok = false;
	wlock();
	done++
}

active [NR] proctype Reader() {
	byte self = _pid;
	byte s, w;
	bool err, canCancel = (self == 2);
	atomic { state = state + READER; s = state; rgen[self] = arrivals; rwaiting[self] = (s & WRITER) != 0 };
	if
	:: s & WRITER ->
		w = s & WBITS;
		do
		:: atomic {
			s = state;
			if
			:: (s & WBITS) != w -> rwaiting[self] = false; break
			:: else -> skip
			fi
		   };
			if
			:: s & PARKED -> skip
			:: atomic { state == s -> state = state | PARKED }
			:: else -> goto again
			fi;
			wait_enqueue(self, STATE, state, s | PARKED, 0);
			wait_sleep(self, canCancel, err);
			if
			:: err ->
				/* RLockContext gave up: take the entry back, unless the writer left */
				do
				:: atomic { (state & WBITS) != w -> rwaiting[self] = false }; goto entered
				:: atomic { (state & WBITS) == w -> state = state - READER; rwaiting[self] = false }; goto gaveup
				od
			:: else -> skip
			fi;
again:			s = 0
		od
	:: else -> skip
	fi;
entered:
	s = 0; w = 0;
	atomic {
		rholding++;
		assert(wholding == 0);
		assert(wwaiting == 0 || rgen[self] < wwaiting)
	};
	rholding--;
	/* RUnlock */
	atomic { state = state - READER; s = state };
	if
	:: s & WRITER ->
		atomic { departing = departing - 1; s = departing };
		if
		:: s == 0 -> wake_n(DEPART, 1, false, 0)
		:: s == ABANDONED -> departing = 0; release()
		:: else -> skip
		fi
	:: else -> skip
	fi;
gaveup:
	s = 0;
	done++
}

ltl all_done { <> (done == NR + 1) }
