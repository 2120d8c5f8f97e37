/*
 * seqlock.pml: SeqLock (Lameter's seqlock): writers make the sequence odd,
 * store the value's words, make it even again; readers copy the words
 * between two loads of an even, unchanged sequence. -DSHARED: the
 * region's SeqLock, whose writers serialize on a robust SharedMutex, where
 * a writer may die mid-Store and the next writer finishes from the odd
 * sequence, and a reader reports ErrWriterDead rather than spin forever.
 *
 * Mirrors seqlock.go and sharedseqlock.go on main:
 * models: internal/seqcore/seqcore.go (*Core).Store
 * models: internal/seqcore/seqcore.go (*Core).beginWrite
 * models: internal/seqcore/seqcore.go (*Core).Load
 * models: internal/seqcore/seqcore.go (*Core).copyOut
 * models: shm/seqlock.go beginSharedWrite
 * models: shm/seqlock.go seqStalled
 *
 * Bounds: NW = 2 writers, 2 Stores each (values 1..4), NR = 2 readers, one
 * Load each (-DSHARED: one reader; two with the dead writer grow past the
 * time budget, and readers do not interact); the value is two words (a torn read is one word of one Store
 * and one of another). The sequence counts mod 16 (Go: 2^64) from 12, so
 * the run wraps it; 4 Stores move it by 8, under half the range, so no
 * reader sees it come round to the same value (that ABA needs 2^63 Stores
 * in Go). -DSHARED: writer 1 may die at any step; the SharedMutex is an
 * ideal robust lock here (sharedmutex.pml checks the real one): the next
 * writer gets it once its holder is dead.
 *
 * Properties: a reader accepts only a value some Store wrote whole (both
 * words equal, assert); ErrWriterDead only when the writer holding the
 * lock is dead (assert on the ghost dead[]: the Go code learns it from the
 * lock word's owner and tokenAlive); ltl readers_finish under weak fairness: every
 * reader returns (a value, or in the shared kind ErrWriterDead once the
 * writer died mid-Store with nobody to finish it).
 *
 * Negative controls:
 *   -DBROKEN_NO_RECHECK  the reader accepts without loading the sequence
 *                        again after copying.
 *   -DBROKEN_RESTART     (-DSHARED) a writer that finds the sequence odd
 *                        (its predecessor died mid-Store) starts afresh
 *                        with seq+1, making it even over a torn value.
 *   -DBROKEN_NO_STALL    (-DSHARED) a reader never gives up on a dead
 *                        writer: it spins forever (readers_finish fails).
 *   -DBROKEN_STALL_LIVE  (-DSHARED) a reader reports ErrWriterDead for
 *                        any writer mid-Store, live or dead.
 *   -DBROKEN_WRITE_FIRST the writer stores the words before it makes the
 *                        sequence odd (two steps swapped).
 *   -DBROKEN_ODD_OK      the reader copies at an odd sequence too (the
 *                        parity check dropped: it only compares).
 */
#define MOD 16
#define NW 2
#ifdef SHARED
#define NR 1
#else
#define NR 2
#endif
#define STORES 2

byte seq = 12;
byte wa, wb;          /* the value's two words */
byte rdone;           /* readers that returned */
#ifdef SHARED
byte owner;           /* the writers' SharedMutex: 0 free, else writer+1 */
bool dead[NW];
#endif

active [NW] proctype Writer() {
	byte self = _pid;
	byte k, s, v;
#ifdef SHARED
	{
#endif
	for (k : 1 .. STORES) {
		v = self * STORES + k;
#ifdef SHARED
		/* beginSharedWrite: LockContext (taking over a dead holder:
		   ErrOwnerDead, MarkConsistent), then look at seq */
		atomic { owner == 0 || dead[owner - 1] -> owner = self + 1 };
		atomic {
			s = seq;
			if
#ifdef BROKEN_RESTART
			:: true -> seq = (s + 1) % MOD
#else
			:: s % 2 == 1 -> s = (s + MOD - 1) % MOD /* finish the dead writer's Store */
			:: else -> seq = (s + 1) % MOD
#endif
			fi
		};
#else
#ifdef BROKEN_WRITE_FIRST
		wa = v;
		wb = v;
#endif
		/* beginWrite: Load; if even, CAS to odd */
		do
		:: s = seq;
			if
			:: s % 2 == 0 ->
				atomic {
					if
					:: seq == s -> seq = (s + 1) % MOD; break
					:: else -> skip
					fi
				}
			:: else -> skip
			fi
		od;
#endif
#ifndef BROKEN_WRITE_FIRST
		wa = v;
		wb = v;
#endif
		seq = (s + 2) % MOD; /* even again: stable */
#ifdef SHARED
		owner = 0;
#endif
		s = 0
	}
#ifdef SHARED
	} unless { dead[self] }
#endif
}

#ifdef SHARED
active proctype Killer() {
	if
	:: dead[1] = true /* writer 1 dies, at whatever step it has reached */
	:: skip
	fi
}
#endif

active [NR] proctype Reader() {
	byte s, a, b;
	do
	:: s = seq;
		if
#ifdef BROKEN_ODD_OK
		:: true ->
#else
		:: s % 2 == 0 ->
#endif
			a = wa; /* copyOut, word by word */
			b = wb;
#ifdef BROKEN_NO_RECHECK
			if :: true ->
#else
			if
			:: seq == s ->
#endif
				assert(a == b); break
			:: else -> skip
			fi;
			a = 0; b = 0
#ifdef SHARED
		:: else ->
			/* seqStalled: a dead writer and an unchanged sequence:
			   ErrWriterDead (the lock's holder, or the dead one it names) */
			if
#ifndef BROKEN_NO_STALL
#ifdef BROKEN_STALL_LIVE
			:: atomic { owner != 0 && seq == s -> assert(dead[owner - 1]) } -> break
#else
			:: atomic { owner != 0 && dead[owner - 1] && seq == s -> assert(dead[owner - 1]) } -> break
#endif
#endif
			:: else -> skip
			fi
#else
		:: else -> skip
#endif
		fi;
		s = 0
	od;
	rdone++
}

ltl readers_finish { <> (rdone == NR) }
