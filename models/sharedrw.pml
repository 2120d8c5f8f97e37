/*
 * sharedrw.pml: SharedRWMutex, the phase-fair ticket lock PF-T of
 * Brandenburg and Anderson with sleeping waiters: readers count entries
 * on in and exits on out; the served writer sets the writer bit and flips
 * the phase with one add on in, and waits until out reaches the count it
 * read. A writer that gives up or dies while its readers are inside
 * abandons its arrival (bits kept, target marked): the last of its readers
 * clears the bits, or the next writer adopts the arrival.
 *
 * Mirrors sharedrw.go and sharedrwreaders.go on main:
 * models: sharedrwreaders.go (*SharedRWMutex).RLock
 * models: sharedrwreaders.go (*SharedRWMutex).rlockSlow
 * models: sharedrwreaders.go (*SharedRWMutex).rwait
 * models: sharedrwreaders.go (*SharedRWMutex).RUnlock
 * models: sharedrwreaders.go (*SharedRWMutex).runlockSlow
 * models: sharedrw.go (*SharedRWMutex).LockContext
 * models: sharedrw.go (*SharedRWMutex).arrive
 * models: sharedrw.go (*SharedRWMutex).abandonArrival
 * models: sharedrw.go (*SharedRWMutex).releaseIfDrained
 * models: sharedrwreaders.go (*SharedRWMutex).drained
 * models: sharedrw.go (*SharedRWMutex).releaseBits
 * models: sharedrw.go (*SharedRWMutex).retire
 * models: sharedrw.go (*SharedRWMutex).Unlock
 * models: sharedrw.go (*SharedRWMutex).MarkConsistent
 * models: rwmutex.go rwArrive
 * models: sharedqueue.go (*ticketQueue).retireTicket
 *
 * Words as in Go, in bytes: in = bit 0 phase, 1 writer, 2 parked, count
 * in bits 3-7 (one reader = 8; Go: bits 4-31, the stats bit 3 is not
 * modelled); out in the same units; target = count | 4 set | 2 abandoned,
 * or 1 (no target). Counts wrap mod 32 readers (Go: 2^28).
 *
 * Writers: the writers' ticket queue is not modelled here (sharedticket.pml
 * checks it): writers are served one after the other, as the queue serves
 * them. Three arrivals: writer 1 locks and unlocks; writer 2 uses
 * LockContext and may give up while it waits for readers, or its process
 * may die at any step (of arrive, the hold, Unlock); writer 3 locks and
 * unlocks. If writer 2 died, writer 3 first does what the queue's resolve
 * does for a dead served ticket: retire (the hook) and complete, marking
 * the lock inconsistent if writer 2's record says it held; writer 3 then
 * gets ErrOwnerDead and calls MarkConsistent. In the Go code a waiting
 * reader may do that resolve too: the same CAS-decided steps.
 *
 * Readers: NR = 2 reader processes, one RLock/RUnlock each (one goroutine
 * per process, so the rsleeper election is not exercised; cond.pml checks
 * that shape). They do not die and do not give up (RLockContext's retreat
 * is not modelled). A kernel sleep ends early only by the one spurious
 * wake-up, or, once writer 2 is dead, by its 10 ms slice.
 *
 * Bounds: 3 writer arrivals and 2 readers is the smallest setting of the
 * deadlock found in review (a reader counted behind writer 1 but slow,
 * writer 2 counting it and leaving, writer 3 flipping the phase back) and
 * lets a second reader arrive in every phase. Spin phases are blocking
 * guards (a busy-wait that re-checks is, under fairness, a wait for its
 * condition).
 *
 * Properties: no writer with a reader, no two writers (assert); phase
 * fairness (assert): when a writer holds, every reader still waiting
 * arrived after that writer's arrival (a reader waits for at most one
 * writer), and a reader never enters while an arrived writer waits unless
 * it was counted before that arrival (a writer waits for at most one batch
 * of readers); no invalid end state; ltl all_done under weak fairness:
 * every reader and writer finishes, also when writer 2 dies.
 *
 * Bug found: on main, a writer that gave up marked its ticket held
 * (q.hold) and then finished it. Killed between the two, its record says
 * it died holding: the next writer is told the lock is inconsistent, and
 * arrive then takes the abandoned bits as a dead holder's and returns at
 * once, while the readers that writer counted are still inside: a writer
 * and a reader hold together. Fixed in sharedrw.go (arrive finishes the
 * record as it is, without the hold), with a regression test
 * (TestSharedRWMutexWriterDiesGivingUp).
 *
 * Bug found, not fixed (reported): a writer process killed between its
 * add on in and its store of target leaves bits with no target; retire
 * then clears them ("nobody waits for it"), and the next writer flips the
 * phase back to the bits a slow reader, counted behind the writer before,
 * still waits on: that reader waits for the writer, which waits for it
 * (the review's deadlock, by death instead of giving up). The default
 * runs leave that window out; -DDEATH_BEFORE_TARGET puts it back, and
 * check.sh expects SPIN to find the deadlock there until it is fixed.
 *
 * Bug found: on main, retire cleared the bits of a dead writer whose
 * target was not set at once. That is also the state while the last
 * reader of an abandoned arrival is between its CAS of the target and
 * its releaseBits: with the writer dead there (after abandoning, before
 * its ticket was finished), the reader's late clear removes the next
 * writer's bits, readers walk in, and that writer waits for an out count
 * already passed. Fixed: retire waits for the clearer as arrive does
 * (awaitBitsCleared).
 *
 * Negative controls:
 *   -DBROKEN_HOLD_FIRST  the first bug above: hold, then finish.
 *   -DBROKEN_RETIRE_CLEARS the second: retire clears at once.
 *   -DBROKEN_PREFIX  the code before 5fecfc9: a writer that gives up
 *                    clears its bits (releaseBits) at once, arrive takes
 *                    leftover bits as a dead holder's, retire clears them,
 *                    and target carries no set/abandoned bits.
 */
#define NG 4 /* 0: writers, 1-2: readers */
#define NR 2
#define TIMEOUT_OK(self) (w2dead && !retired)
#include "wait.pml"

#define IN 0  /* word addresses */
#define OUT 1
#define PHASE 1
#define WRITER 2
#define PARKED 4
#define READER 8
#define COUNT 248 /* ~7 */
#define WBITS 3
#define NOTARGET 1
#define ABANDONED 2
#define TSET 4

byte in, out;
byte target = NOTARGET;
bool inconsistent;
byte rholding, wholding;
byte arrivals;     /* ghost: writer arrivals (adoption is not one) */
byte wwaiting;     /* ghost: arrival number of a writer waiting for readers, 0 none */
byte rgen[NG];     /* ghost: arrivals when reader i counted itself in */
bool rwaiting[NG];
bool w2started, w2dead, retired;
bool window;       /* see DEATH_BEFORE_TARGET */
byte clearing;     /* ghost: live parties between a target CAS and releaseBits */
bool w2clr;        /* writer 2 is one of them */
byte w2rec;        /* ghost of writer 2's queue record: 0 waiting, 1 holding, 2 finished */
byte done;

/* releaseBits: clear writer and parked, keep the phase; wake parked readers */
inline release_bits() {
	atomic {
		if
		:: in & PARKED -> in = in & ~(WRITER | PARKED); wake_n(IN, NG, false, 0)
		:: else -> in = in & ~(WRITER | PARKED)
		fi
	}
}

inline release_abandoned(t) {
	if
	:: atomic { target == (t) -> target = NOTARGET; clearing++; w2clr = (_pid == 0) };
		release_bits();
		atomic { clearing--; w2clr = false }
	:: else -> skip
	fi
}

inline abandon_arrival(tl) {
#ifdef BROKEN_PREFIX
	release_bits()
#else
	if
	:: atomic { target == (tl | TSET) -> target = tl | TSET | ABANDONED };
		if
		:: out == tl -> release_abandoned(tl | TSET | ABANDONED)
		:: else -> skip
		fi
	:: else -> skip /* already abandoned (a retire on our behalf) or adopted */
	fi
#endif
}

/*
 * awaitBitsCleared: until the bits clear or a target is abandoned; past
 * ownerCheckInterval the clearer is taken for dead and, if no target is
 * set, the bits are cleared here. The deadline is the Go code's timing
 * assumption (a reader does not stop for 10 ms between its CAS of the
 * target and its clear): the model lets it pass only while no reader is
 * between the two (clearing == 0).
 */
inline await_bits_cleared() {
	if
	:: atomic { !(in & WRITER) || (target & ABANDONED) } -> skip
	:: atomic { (in & WRITER) && !(target & ABANDONED) && clearing == 0 } ->
		if
		:: !(target & TSET) -> release_bits()
		:: else -> skip
		fi
	fi
}

/*
 * arrive: res 0 ok (readers out), 1 gave up; it may give up while ctxok.
 */
inline arrive() {
	adopted = false;
#ifdef BROKEN_PREFIX
	if
	:: in & WRITER -> goto arrived /* left by a writer that died holding */
	:: else -> skip
	fi;
#else
	do
	:: !(in & WRITER) -> break
	:: else ->
		if
		:: inconsistent -> goto arrived /* left by a writer that died holding */
		:: else -> skip
		fi;
		if
		:: atomic { (target & (TSET | ABANDONED)) == (TSET | ABANDONED) ->
			tl = target & COUNT; target = target & ~ABANDONED; adopted = true; wwaiting = arrivals }; break
		:: else -> skip
		fi;
		await_bits_cleared()
	od;
#endif
	if
	:: !adopted ->
		s = in;
		atomic {
			if
			:: s & PHASE -> in = in + WRITER - PHASE /* rwArrive */
			:: else -> in = in + WRITER + PHASE
			fi;
			tl = in & COUNT; arrivals++;
#ifndef DEATH_BEFORE_TARGET
			window = ctxok /* writer 2 between its add and its target */
#endif
		};
		s = 0;
		if
		:: out == tl -> tl = 0; window = false; goto arrived
		:: else -> skip
		fi;
		atomic { wwaiting = arrivals; window = false;
#ifdef BROKEN_PREFIX
		target = tl
#else
		target = tl | TSET
#endif
		}
	:: else -> skip
	fi;
	/* wait for out to reach tl */
	do
	:: o = out;
		if
		:: o == tl -> o = 0; break
		:: else -> skip
		fi;
		if
		:: ctxok ->
			/* ctx.Err(): abandon the arrival, pass the ticket on */
			ctxok = false;
			wwaiting = 0;
			abandon_arrival(tl);
#ifdef BROKEN_HOLD_FIRST
			w2rec = 1;  /* q.hold: main before this model (see below) */
#endif
			w2rec = 2;  /* q.finish of the waiting record */
			res = 1; o = 0; tl = 0;
			goto arrived
		:: true -> skip
		fi;
		wait_enqueue(0, OUT, out, o, 0);
		wait_sleep(0, false, err);
		o = 0
	od;
	wwaiting = 0;
#ifdef BROKEN_PREFIX
	target = 0; /* the old "none" */
#else
	target = NOTARGET;
#endif
	tl = 0;
arrived: skip
}

/* the writer holds: check exclusion and reader phase-fairness */
inline wcs() {
	atomic {
		wholding++;
		assert(wholding == 1 && rholding == 0);
		assert(!rwaiting[1] || rgen[1] >= arrivals);
		assert(!rwaiting[2] || rgen[2] >= arrivals)
	};
	wholding--
}

inline unlock() {
	if
	:: !inconsistent -> release_bits()
	:: else -> skip
	fi
}

active proctype Writers() {
	byte s, o, tl, res;
	bool adopted, err, ctxok;
	/* writer 1 */
	arrive();
	wcs();
	unlock();
	/* writer 2: LockContext; may give up, or die at any step */
	w2started = true;
	{
		ctxok = true;
		arrive();
		if
		:: res == 0 ->
			w2rec = 1; /* q.hold: the ticket is held */
			wcs();
			unlock();
			w2rec = 2  /* q.release: serving moves on */
		:: else -> res = 0
		fi
	} unless { w2dead };
	/* writer 3: if 2 died, resolve its ticket first (retire, complete) */
	if
	:: w2dead && w2rec < 2 ->
		/* retire(dead = record was holding) */
		if
		:: w2rec == 1 -> skip
		:: else ->
			if
			:: !(in & WRITER) -> skip
			:: else ->
#ifdef BROKEN_PREFIX
				release_bits()
#else
				if
				:: !(target & TSET) ->
#ifdef BROKEN_RETIRE_CLEARS
					release_bits() /* main before this model */
#else
					await_bits_cleared() /* a reader may be clearing them */
#endif
				:: (target & (TSET | ABANDONED)) == TSET -> tl = target & COUNT; abandon_arrival(tl); tl = 0
				:: else -> skip
				fi
#endif
			fi
		fi;
		/* complete: a dead holder marks the lock inconsistent */
		if
		:: w2rec == 1 -> inconsistent = true
		:: else -> skip
		fi;
		wwaiting = 0;
		retired = true
	:: else -> retired = true
	fi;
	res = 0;
	ctxok = false;
	arrive();
	wcs();
	inconsistent = false; /* ErrOwnerDead: repair, MarkConsistent */
	unlock();
	done++
}

active proctype Killer() {
	if
	/* writer 2's process dies; a hold it had ends with it (the data
	   it may have left half-written is what ErrOwnerDead reports) */
	:: atomic { w2started && w2rec < 2 && !window -> w2dead = true; wholding = 0; wwaiting = 0;
		if :: w2clr -> clearing--; w2clr = false :: else -> skip fi }
	:: skip
	fi
}

active [NR] proctype Reader() {
	byte self = _pid - 1; /* 1, 2 */
	byte s, w, o, t;
	bool err;
	/* RLock: in.Add(reader) */
	atomic { in = in + READER; s = in; rgen[self] = arrivals; rwaiting[self] = (s & WRITER) != 0 };
	if
	:: s & WRITER ->
		/* rwait(w = the writer bits we saw) */
		w = s & WBITS;
		do
		:: atomic {
			s = in;
			if
			:: (s & WBITS) != w -> rwaiting[self] = false; break
			:: else -> skip
			fi
		   };
			if
			:: s & PARKED -> skip
			:: atomic { in == s -> in = in | PARKED }
			:: else -> goto again /* the CAS failed */
			fi;
			wait_enqueue(self, IN, in, s | PARKED, 0);
			wait_sleep(self, false, err);
again:			s = 0
		od
	:: else -> skip
	fi;
	s = 0; w = 0;
	/* holding: no writer; a reader entering past an arrived, waiting
	   writer must have been counted before its arrival */
	atomic {
		rholding++;
		assert(wholding == 0);
		assert(wwaiting == 0 || rgen[self] < wwaiting)
	};
	rholding--;
	/* RUnlock */
	atomic { out = out + READER; o = out };
#ifdef BROKEN_PREFIX
	if
	:: o == target -> wake_n(OUT, 1, false, 0)
	:: else -> skip
	fi;
#else
	if
	:: o == (target & ~(ABANDONED | TSET)) ->
		t = target;
		if
		:: t == (o | TSET) -> wake_n(OUT, 1, false, 0)
		:: t == (o | TSET | ABANDONED) -> release_abandoned(t)
		:: else -> skip
		fi
	:: else -> skip
	fi;
#endif
	o = 0; t = 0;
	done++
}

ltl all_done { <> (done == NR + 1) }
