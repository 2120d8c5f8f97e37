/*
 * SharedRWMutex (kind 8) with two reader slots: sharedrw.pml's protocol,
 * smaller in the writers' queue (one process serves 3 writers in turn, the
 * 2nd may give up), larger in its readers: two slots (slot 0 may give up,
 * slot 1 dies holding, or not), each with its own count per phase, summed
 * by writers one slot at a time (not atomically). It checks mutual
 * exclusion, that counts never wrap below zero, and phase fairness as fix 1
 * of issue 12's review states it: a reader whose load after its add shows
 * a writer's arrival waits for that arrival only; no later writer holds
 * while it waits (ghost waiting/waitfor). ltl all_done: everyone finishes.
 *
 * models: shm/rwreaders.go (*RWMutex).RLock
 * models: shm/rwreaders.go (*RWMutex).rlockSlow
 * models: shm/rwreaders.go (*RWMutex).drained
 * models: shm/rwmutex.go (*RWMutex).arrive
 *
 * Negative controls: BROKEN_RELOAD classifies the slow reader by a fresh
 * load instead of its post-add load (the two-writer wait of the review);
 * BROKEN_NO_RECHECK holds on the pre-add load alone.
 */
#define NR 2
byte ph, wb, ab, arr;          /* in: phase, writer, abandoned, arrival number */
byte c[4];                      /* c[p*2+slot] */
bool dead[NR];
byte rholding, wholding;
byte ndone;
bool waiting[NR];               /* ghost: the reader waits behind arrival waitfor */
byte waitfor[NR];

#define CNT(p,i) c[(p)*2+(i)]
#define SAME(sp,sw,sa) (ph==sp && wb==sw && arr==sa)

/* drained(p): non-atomic per-slot look; result in d */
inline drained(p, d) {
	d = true;
	i = 0;
	do
	:: i < NR -> if :: CNT(p,i) != 0 && !dead[i] -> d = false :: else -> skip fi; i++
	:: else -> break
	od
}

/* releaseIfDrained of abandoned arrival (sp,sw,sa) seen with abandoned */
inline release_if_drained(sp, sw, sa, sab) {
	if
	:: sw && sab ->
		drained(1-sp, d);
		if
		:: d -> atomic { if :: SAME(sp,sw,sa) && ab -> wb = 0; ab = 0 :: else -> skip fi }
		:: else -> skip
		fi
	:: else -> skip
	fi
}

inline emptied() {
	atomic { sp = ph; sw = wb; sa = arr; sab = ab };
	release_if_drained(sp, sw, sa, sab)
}

inline leave(p) {
	atomic { CNT(p,me)--; x = CNT(p,me) };
	if :: x == 0 && wb -> emptied() :: else -> skip fi
}

proctype reader(byte me) {
	byte s_ph, s_wb, s_arr, p, q, x, i, sp, sw, sa, sab, t_ph, t_wb, t_ab, t_arr;
	bool d, held;
	/* fast path */
	atomic { s_ph = ph; s_wb = wb; s_arr = arr };
	CNT(s_ph, me)++;
	/* the post-add load; the ghost records the arrival it shows us behind */
	atomic {
		t_ph = ph; t_wb = wb; t_ab = ab; t_arr = arr;
		if :: t_wb == 1 && t_ph == s_ph -> waiting[me] = true; waitfor[me] = t_arr :: else -> skip fi
	};
	if
#ifdef BROKEN_NO_RECHECK
	:: s_wb == 0 -> held = true
	:: s_wb == 1 ->
#else
	:: t_ph == s_ph && t_wb == 0 && t_ab == 0 && t_arr == s_arr -> held = true
	:: else ->
#endif
		p = s_ph;
#ifndef BROKEN_RELOAD
		/* rlockSlow's first turn: classified by the post-add load */
		if
		:: t_wb == 0 && t_ph == p -> held = true; goto holds
		:: t_wb == 1 && t_ph == p -> sp = t_ph; sa = t_arr; goto wait
		:: else -> skip
		fi;
#endif
		do
		:: atomic { wb == 0 && ph == p } -> held = true; break
		:: atomic { wb == 1 && ph == p -> sp = ph; sw = wb; sa = arr;
				if :: !waiting[me] -> waiting[me] = true; waitfor[me] = sa :: else -> skip fi } ->
wait:
			/* rwait for arrival (sp,1,sa) */
			do
			:: atomic { !SAME(sp, 1, sa) } -> held = true; break
			:: atomic { SAME(sp,1,sa) && ab -> sab = ab } -> release_if_drained(sp, 1, sa, sab)
			:: me == 0 -> /* give up: retreat */
				if
				:: atomic { !SAME(sp,1,sa) } -> held = true
				:: else -> waiting[me] = false; waitfor[me] = 0; leave(p); held = false
				fi;
				break
			od;
			break
		:: atomic { ph != p -> q = ph } -> CNT(q, me)++; leave(p); p = q
		od
	fi;
holds:
	if
	:: held ->
		atomic { assert(wholding == 0); rholding++; waiting[me] = false; waitfor[me] = 0 };
		if
		:: me == 1 -> atomic { dead[me] = true; rholding-- }; goto end   /* dies holding */
		:: true -> skip
		fi;
		atomic { rholding-- };
		atomic { s_ph = ph; s_wb = wb };
		atomic { CNT(s_ph ^ s_wb, me)--; x = CNT(s_ph ^ s_wb, me) };
		assert(x < 200);
		if :: x == 0 && wb -> emptied() :: else -> skip fi
	:: else -> skip
	fi;
end:
	ndone++
}

proctype writers() {
	byte n, sp, sw, sa, sab, old, i, x;
	bool d, gaveup;
	n = 0;
	do
	:: n < 3 ->
		n++;
		gaveup = false;
		/* arrive */
		atomic {
			assert(!(ab && !wb));
			if
			:: wb == 0 -> if :: ph == 0 -> ph = 1 :: else -> ph = 0 fi; wb = 1; arr = (arr + 1) % 8
			:: wb == 1 -> assert(ab); ab = 0   /* adopt */
			fi;
			sp = ph; sa = arr
		};
		old = 1 - sp;
		do
		:: drained(old, d); if :: d -> break :: else -> skip fi
		:: n == 2 -> /* give up: abandon */
			atomic { if :: SAME(sp,1,sa) && !ab -> ab = 1 :: else -> skip fi };
			atomic { sw = wb; sab = ab; x = (SAME(sp,1,sa)) };
			if :: x -> release_if_drained(sp, sw, sa, sab) :: else -> skip fi;
			gaveup = true; break
		od;
		if
		:: !gaveup ->
			atomic {
				assert(rholding == 0);
				/* phase fairness: a waiting reader waits behind this arrival */
				assert(!(waiting[0] && waitfor[0] != arr) && !(waiting[1] && waitfor[1] != arr));
				wholding++
			};
			atomic { wholding-- };
			atomic { wb = 0; ab = 0 }
		:: else -> skip
		fi
	:: else -> break
	od;
	ndone++
}

init {
	atomic {
		run reader(0); run reader(1); run writers()
	}
}
ltl all_done { <> (ndone == 3) }
