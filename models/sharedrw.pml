/*
 * sharedrw.pml: SharedRWMutex, phase-fair (Brandenburg and Anderson's
 * PF-T) with readers counted per process and phase: a reader reads in,
 * adds one to its own slot's count for the phase it read, and reads in
 * again; the served writer sets the writer bit, flips the phase and
 * counts its arrival with one add on in, and waits until the old phase's
 * counts of live processes are all zero. A writer that gives up or dies
 * while readers of the old phase are inside abandons its arrival (bits
 * kept, abandoned bit set): whoever finds the old phase empty clears
 * them, or the next writer adopts the arrival. A reader process that dies
 * holding leaves its counts; the writer's sums skip a dead process's.
 *
 * Writer 2 dies only in runs without -DREADER_DIES (one death per run,
 * for the state space).
 *
 * Mirrors sharedrw.go and sharedrwreaders.go:
 * models: shm/rwreaders.go (*RWMutex).RLock
 * models: shm/rwreaders.go (*RWMutex).rlockSlow
 * models: shm/rwreaders.go (*RWMutex).rwait
 * models: shm/rwreaders.go (*RWMutex).RUnlock
 * models: shm/rwreaders.go (*RWMutex).leave
 * models: shm/rwreaders.go (*RWMutex).emptied
 * models: shm/rwreaders.go (*RWMutex).drained
 * models: shm/rwreaders.go (*RWMutex).readerLive
 * models: shm/rwmutex.go (*RWMutex).LockContext
 * models: shm/rwmutex.go (*RWMutex).arrive
 * models: shm/rwmutex.go (*RWMutex).abandonArrival
 * models: shm/rwmutex.go (*RWMutex).releaseIfDrained
 * models: shm/rwmutex.go (*RWMutex).releaseBits
 * models: shm/rwmutex.go (*RWMutex).retire
 * models: shm/rwmutex.go (*RWMutex).Unlock
 * models: shm/rwmutex.go (*RWMutex).MarkConsistent
 * models: shm/rwmutex.go srwArrive
 * models: rwmutex.go rwArrive
 * models: shm/queue.go (*ticketQueue).retireTicket
 *
 * Words as in Go: in = bit 0 phase, 1 writer, 2 parked, 3 abandoned (Go:
 * bit 4; the stats bit 3 is not modelled), arrival number in bits 4-7
 * (Go: 5-31; three arrivals here, so it never wraps); drain = bit 0
 * sleeping, bumped by 2 (wraps mod 128 bumps); cnt[p*NR + r-1] is reader
 * r's slot's count of phase p (one reader goroutine per process: the
 * counts are 0 or 1, and 2 for the moment of a move).
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
 * Readers: NR reader processes (1 by default, see Bounds), one
 * RLock/RUnlock each. With -DREADER_DIES the last reader's process may
 * die at any step (holding, waiting, moving between phases,
 * in RUnlock): its counts stay, and every sum from then on may find it
 * dead (readerLive's liveness check; /proc is taken as exact, and its
 * 10 ms period as "any sum", which only makes detection earlier). Slot
 * reuse (the next process zeroes the counts before its stamp) is not
 * modelled: TestSharedRWMutexDeadReaderSlotReused covers it. Readers do
 * not give up (RLockContext's retreat is a leave, the same step as a
 * move's). A kernel sleep ends early only by the one spurious wake-up,
 * or, once a process is dead, by its 10 ms slice.
 *
 * Bounds: 3 writer arrivals, the smallest setting of the deadlock found
 * in review of the design before (a reader counted behind writer 1 but
 * slow, writer 2 counting it and leaving, writer 3 flipping the phase
 * back), and one reader, which then arrives in every phase and races
 * every step of every writer. Two readers (-DNR=2: two last readers
 * racing to release an abandoned arrival, a reader moving while another
 * holds) did not finish: over 30 million states in two minutes, against
 * 0.5 million for one; that run is left out of check.sh (a known gap).
 * A sum is one step by default; -DSUM_SPLIT makes it one load per slot,
 * as the Go loop reads them.
 *
 * Properties: no writer with a live reader, no two writers (assert);
 * phase fairness (assert): when a writer holds, every live reader still
 * waiting counted itself in during that writer's arrival or later (a
 * reader waits for at most one writer), and a reader never enters while
 * an arrival waits unless it was counted before it (a writer waits for at
 * most one batch of readers); the served writer never finds a writer bit
 * that is neither abandoned nor a dead holder's (assert: ErrCorrupt in Go
 * is unreachable); no count underflows; no invalid end state; ltl
 * all_done under weak fairness: every live reader and every writer
 * finishes, also when writer 2 dies, reader 2 dies, or both.
 *
 * Negative controls:
 *   -DBROKEN_NO_RECHECK   RLock holds after its add without looking at in
 *                         again: a writer that arrived between misses it.
 *   -DBROKEN_GIVEUP_CLEARS a writer that gives up clears its bits at once
 *                         (the design before abandoned arrivals): readers
 *                         of the old phase then count out of the new one.
 *   -DBROKEN_DEAD_COUNTS  sums never find a dead reader dead (the limit
 *                         before this design): with -DREADER_DIES the
 *                         writer waits forever (an invalid end state).
 *   -DBROKEN_HOLD_FIRST   a writer that gave up marks its ticket held
 *                         before finishing it (a bug fixed before): dead
 *                         in between, it looks like a dead holder.
 */
#ifndef NR
#define NR 1 /* reader processes, 1 or 2 (see Bounds) */
#endif
#define NG (NR + 1) /* 0: writers, 1..NR: readers */
#define DR NR /* the reader whose process may die */
#define TIMEOUT_OK(self) ((w2dead && !retired) || rdead[DR])
#include "wait.pml"

#define IN 0  /* word addresses */
#define DRAIN 1
#define PHASE 1
#define WRITER 2
#define PARKED 4
#define ABANDONED 8
#define ARRIVAL 16
#define AMASK 243 /* phase | writer | arrival bits: ~(parked | abandoned) */
#define SLEEPING 1
#define ARR(s) ((s) / ARRIVAL)

byte in;
byte drain;
byte cnt[2 * NR]; /* cnt[p*NR + r-1] */
bool rdead[NG];
bool inconsistent;
byte rholding, wholding;
byte rgen[NG];     /* ghost: the arrival number at reader i's last look at in (the look that decides is its arrival) */
bool rwaiting[NG];
bool rhold[NG];    /* ghost: reader i holds */
bool rfin[NG];     /* ghost: reader i finished */
bool w2started, w2dead, retired;
byte w2rec;        /* ghost of writer 2's queue record: 0 waiting, 1 holding, 2 finished */
byte done;

#define C(p, r) cnt[(p) * NR + (r) - 1]
#ifdef BROKEN_DEAD_COUNTS
#define DEADSEEN false
#else
#define DEADSEEN true
#endif

/*
 * drained(p): every slot's count of p is zero or a dead process's. Two
 * loads, one per slot. res is the result.
 */
inline drained(p, res) {
#ifdef SUM_SPLIT
	res = true;
	if :: C(p, 1) != 0 && !(rdead[1] && DEADSEEN) -> res = false :: else -> skip fi;
	if :: C(p, NR) != 0 && !(rdead[NR] && DEADSEEN) -> res = false :: else -> skip fi
#else
	atomic { res = (C(p, 1) == 0 || (rdead[1] && DEADSEEN)) && (C(p, NR) == 0 || (rdead[NR] && DEADSEEN)) }
#endif
}

/* releaseBits: clear writer, parked and abandoned, keep phase and arrival; wake parked readers */
inline release_bits() {
	atomic {
		if
		:: in & PARKED -> in = in & ~(WRITER | PARKED | ABANDONED); wake_n(IN, NG, false, 0)
		:: else -> in = in & ~(WRITER | PARKED | ABANDONED)
		fi
	}
}

/*
 * releaseIfDrained: clear the abandoned arrival ss (a state read before)
 * once its old phase is empty; the CAS from ss fails once the arrival was
 * adopted or released, or a later one came. Uses ss and ok.
 */
inline release_if_drained() {
	if
	:: (ss & (WRITER | ABANDONED)) == (WRITER | ABANDONED) ->
		drained((ss & PHASE) ^ PHASE, ok);
		do
		:: !ok -> break
		:: atomic { ok && in == ss ->
			in = ss & ~(WRITER | PARKED | ABANDONED);
			if
			:: ss & PARKED -> wake_n(IN, NG, false, 0)
			:: else -> skip
			fi;
			ok = false }; break
		:: atomic { ok && in != ss ->
			if
			:: (in & (AMASK | ABANDONED)) != (ss & (AMASK | ABANDONED)) -> ok = false
			:: else -> ss = in /* only parked changed: again */
			fi }
		od
	:: else -> skip
	fi;
	ss = 0; ok = false
}

/* abandonArrival(s): mark arrival s abandoned, then release if drained */
inline abandon_arrival(s) {
	do
	:: ((in & AMASK) != (s & AMASK)) || (in & ABANDONED) -> break
	:: atomic { (in & AMASK) == (s & AMASK) && !(in & ABANDONED) -> in = in | ABANDONED }; break
	od;
	ss = in;
	if
	:: (ss & AMASK) == (s & AMASK) -> release_if_drained()
	:: else -> skip
	fi
}

/*
 * arrive: res 0 ok (readers out), 1 gave up; it may give up while ctxok.
 */
inline arrive() {
	do
	:: s = in;
		if
		:: !(s & WRITER) ->
			atomic {
				if
				:: in & PHASE -> in = in + ARRIVAL + WRITER - PHASE /* srwArrive */
				:: else -> in = in + ARRIVAL + WRITER + PHASE
				fi;
				s = in
			};
			break
		:: else ->
			if
			:: inconsistent -> goto arrived /* left by a writer that died holding */
			:: else -> skip
			fi;
			if
			:: s & ABANDONED ->
				if
				:: atomic { in == s -> in = s & ~ABANDONED; s = in }; break /* adopt */
				:: else -> skip /* a reader parked or released it: look again */
				fi
			:: else -> assert(false) /* ErrCorrupt: a writer bit no writer owns */
			fi
		fi
	od;
	drained((s & PHASE) ^ PHASE, ok);
	if
	:: ok -> ok = false; goto arrived
	:: else -> skip
	fi;
	do
	:: d = drain;
		drained((s & PHASE) ^ PHASE, ok);
		if
		:: ok -> d = 0; ok = false; break
		:: else -> skip
		fi;
		if
		:: ctxok ->
			/* ctx.Err(): abandon the arrival, pass the ticket on */
			ctxok = false;
			abandon_arrival(s);
#ifdef BROKEN_GIVEUP_CLEARS
			release_bits();
#endif
#ifdef BROKEN_HOLD_FIRST
			w2rec = 1;  /* q.hold, then finish: the old bug */
#endif
			w2rec = 2;  /* q.finish of the waiting record */
			res = 1; d = 0;
			drain = drain & ~SLEEPING;
			goto arrived
		:: true -> skip
		fi;
		if
		:: atomic { drain == d -> drain = d | SLEEPING };
			wait_enqueue(0, DRAIN, drain, d | SLEEPING, 0);
			wait_sleep(0, false, err)
		:: else -> skip /* a count emptied meanwhile: sum again */
		fi;
		d = 0
	od;
	drain = drain & ~SLEEPING;
arrived: s = 0
}

/* the writer holds: check exclusion and reader phase-fairness */
inline wcs() {
	atomic {
		wholding++;
		assert(wholding == 1 && rholding == 0);
		assert(!rwaiting[1] || rdead[1] || rgen[1] >= ARR(in));
		assert(!rwaiting[NR] || rdead[NR] || rgen[NR] >= ARR(in))
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
	byte s, ss, d, res;
	bool ok, err, ctxok;
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
			s = in;
			if
			:: s & WRITER -> abandon_arrival(s)
			:: else -> skip
			fi
		fi;
		/* complete: a dead holder marks the lock inconsistent */
		if
		:: w2rec == 1 -> inconsistent = true
		:: else -> skip
		fi;
		retired = true
	:: else -> retired = true
	fi;
	s = 0; ss = 0; res = 0;
	ctxok = false;
	arrive();
	wcs();
	inconsistent = false; /* ErrOwnerDead: repair, MarkConsistent */
	unlock();
	done++
}

active proctype Killer() {
	/* writer 2's process dies; a hold it had ends with it (the data
	   it may have left half-written is what ErrOwnerDead reports) */
	skip;
#ifndef READER_DIES
	if
	:: atomic { w2started && w2rec < 2 -> w2dead = true; wholding = 0 }
	:: skip
	fi
#endif
}

/* one of this reader's counts out of phase p; tell a waiting writer if emptied */
inline leave(p) {
	atomic { C(p, self) = C(p, self) - 1; assert(C(p, self) < 128); c = C(p, self) };
	if
	:: atomic { c == 0 && (in & WRITER) -> c = 0 }; emptied()
	:: else -> c = 0
	fi
}

inline emptied() {
	atomic { drain = drain + 2; c = drain & SLEEPING };
	if
	:: atomic { c -> c = 0; wake_n(DRAIN, 1, false, 0) }
	:: else -> skip
	fi;
	ss = in;
	if
	:: (ss & (WRITER | ABANDONED)) == (WRITER | ABANDONED) -> release_if_drained()
	:: else -> skip
	fi
}

active [NR] proctype Reader() {
	byte self = _pid - 1; /* 1, 2 (pids: 0 Writers, 1 Killer) */
	byte s, ss, w, p, c;
	bool ok, err;
	{
	/* RLock: load, add to our count of that phase, load again */
	s = in;
	p = s & PHASE;
	C(p, self)++;
	do
	:: atomic { s = in; rgen[self] = ARR(s) }; /* the look that decides: the reader's arrival */
#ifdef BROKEN_NO_RECHECK
		if :: true -> break :: else -> skip fi;
#endif
		if
		:: !(s & WRITER) && (s & PHASE) == p -> break /* held */
		:: (s & WRITER) && (s & PHASE) == p ->
			/* rwait(w): counted in the batch after this arrival */
			atomic { rwaiting[self] = true; w = s & AMASK };
			do
			:: atomic {
				s = in;
				if
				:: (s & AMASK) != w -> rwaiting[self] = false; break
				:: else -> skip
				fi
			   };
				/* the 10 ms check: an abandoned arrival whose readers left or died */
				if
				:: s & ABANDONED -> ss = s; release_if_drained()
				:: else -> skip
				fi;
				if
				:: s & PARKED -> skip
				:: atomic { in == s -> in = in | PARKED }
				:: else -> goto again /* the CAS failed */
				fi;
				wait_enqueue(self, IN, in, s | PARKED, 0);
				wait_sleep(self, false, err);
again:				s = 0
			od;
			break
		:: else ->
			/* counted in a phase that is not the one to join: move */
			C(s & PHASE, self)++;
			leave(p);
			p = s & PHASE
		fi
	od;
	s = 0; w = 0; p = 0; c = 0; ss = 0; ok = false; err = false;
	/* holding: no writer; a reader entering past a waiting arrival must
	   have been counted before it */
	atomic {
		rholding++; rhold[self] = true;
		assert(wholding == 0);
		assert(!(in & WRITER) || rgen[self] < ARR(in))
	};
	atomic { rholding--; rhold[self] = false };
	/* RUnlock: our count is in in's phase, or the other one while a
	   writer is there */
	s = in;
	p = (s ^ (s >> 1)) & PHASE;
	leave(p);
	s = 0; ss = 0; p = 0; c = 0;
	atomic { done++; rfin[self] = true }
	} unless { rdead[self] }
}

active proctype ReaderKiller() {
	/* reader 2's process dies at any step; a hold it had ends with it */
	skip;
#ifdef READER_DIES
	if
	:: atomic { !rfin[DR] -> rdead[DR] = true; rwaiting[DR] = false;
		if
		:: rhold[DR] -> rholding--; rhold[DR] = false
		:: else -> skip
		fi }
	:: skip
	fi
#endif
}

ltl all_done { <> (done + rdead[DR] == NR + 1) }
