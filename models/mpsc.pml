/*
 * mpsc.pml: the shared MPSC byte queue's claim, publish, take-back and
 * skip protocol (docs/abi.md, "MPSC queue object"), with a producer that
 * may die at every step.
 *
 * Mirrors shm/mpscproducer.go, shm/mpscconsumer.go and shm/mpsc.go:
 * models: shm/mpscproducer.go (*MPSCProducer).trySend
 * models: shm/mpscproducer.go (*MPSCProducer).refreshHead
 * models: shm/mpscproducer.go (*claimWait).wait
 * models: shm/mpscconsumer.go (*MPSCConsumer).tryReceive
 * models: shm/mpscconsumer.go (*MPSCConsumer).refreshEnd
 * models: shm/mpscconsumer.go (*MPSCConsumer).claimerDead
 * models: shm/mpsc.go (*mpscQueue).takeBack
 * models: shm/mpsc.go (*mpscQueue).claimEnd
 *
 * Scenario: NP = 2 producer processes, producer 1 sending MSGS = 2
 * messages and producer 2 one (-DFULL: two each, the nightly run), into a
 * queue of CAP = 4 units (a unit is 16 bytes: a record header, or 16
 * payload bytes). Producer 1's messages take 3 then 2 units,
 * producer 2's 2 then 3 (-DSIZES: either, at each send), so
 * records land at every offset, a record that does not fit before the end
 * makes its producer publish a padding record first, and offsets are
 * reused on later laps (by the same producer and by the other one). One
 * producer may be killed at any step (KILLS = 1). The consumer receives
 * until every producer has returned or died and nothing lies past head.
 * Positions are exact here (Go's are free-running uint64, and the claim
 * word keeps a position mod 2^38 that claimEnd rebuilds from head; a
 * position the rebuild puts before head or more than CAP past it is
 * exactly what this model's claim_end reports as corrupt).
 *
 * Abstracted: the wake words and futex sleeps (the ring's protocol,
 * models/ring.pml: a side that waits here blocks until what it waits for
 * changes, which is what a wake-up guarantees); the 10 ms liveness checks
 * (a dead claimer may be noticed at any later step, never a live one);
 * Close and the consumer's death; the payload's bytes (one value per
 * unit: the message's id, so a torn copy shows as a unit with another
 * id).
 *
 * Properties (assertions): the consumer delivers only published records,
 * each message at most once and in each producer's order, and never one
 * with a unit of another message (torn); no valid history is reported as
 * corrupt (a producer or the consumer reading a stale claim word against
 * a newer head, or a stale header left on an earlier lap, must not look
 * like a corrupt queue); at the end every published message was delivered
 * and every claim of the killed producer that was not published is either
 * counted lost or was never written past tail. No invalid end state: the
 * consumer never stalls on a dead claimer (nor do producers).
 * ltl all_done: under weak fairness, every process finishes.
 *
 * Negative controls (models/mutations.txt):
 *   -DBROKEN_PUBLISH_FIRST    the published state word is stored before
 *                             the payload's last unit.
 *   -DBROKEN_TAIL_FIRST       the claimer frees the claim word before it
 *                             writes the header.
 *   -DBROKEN_SKIP_LIVE        the consumer skips a claimed record without
 *                             asking whether its claimer is dead.
 *   -DBROKEN_TAKEBACK_NO_POS  a take-back trusts the state word's token
 *                             without the position word (a header left on
 *                             an earlier lap at the same offset).
 *   -DBROKEN_STALE_STATE      the consumer skips a record as lost on the
 *                             state word it read before it found the
 *                             claimer dead (which may have published
 *                             and then died in between).
 *   -DBROKEN_STALE_TAIL       a producer judges a claim word or tail it
 *                             read earlier against a head read later,
 *                             without reading the claim word again.
 */
#define NP 2
#define MSGS 2
#define CAP 4
#define KILLS 1
#define CLAIMED 1
#define PUBLISHED 2
#define PADDING 3

/* The claim word: free at tp, or claiming tp by ttok. */
bool tcl;
byte tp, ttok;
byte head;
/* Each unit offset's header words (written only where a record starts):
 * the state word (state, token, length: the record's units) and the
 * position word; and its payload value. Zero, as in a new queue. */
byte rst[CAP], rtok[CAP], rlen[CAP], rpos[CAP], pay[CAP];
bool dead[NP + 1];
byte kills = KILLS;
byte sent[NP + 1]; /* ghost: messages published, per producer */
byte got[NP + 1];  /* messages delivered, per producer */
byte lost;
byte pfin;         /* producers that returned or died */
bool cdone;

#define CORRUPT assert(false)

#define MAYDIE \
	if \
	:: atomic { kills > 0 -> kills--; dead[me] = true }; goto died \
	:: true -> skip \
	fi

/*
 * claimEnd(w, h): a claim word's position judged against head h. Only
 * called where the claim word still read w after h was read (the fixed
 * code), so h <= position in every valid history.
 */
#define CLAIM_END(pos, h) \
	if \
	:: pos < h || pos - h > CAP -> CORRUPT \
	:: else -> skip \
	fi

/*
 * takeBack(w): w = claiming (pos, tok), tok dead. Reads head, checks the
 * claim word is still w (else someone moved it: nothing to do), reads the
 * header at pos's offset (state word, then position word), and CASes the
 * claim word from w to past the record, or to pos when nothing of it was
 * written.
 */
inline take_back(pos, tok) {
	h = head;
#ifndef BROKEN_STALE_TAIL
	if
	:: !(tcl && tp == pos && ttok == tok) -> goto took
	:: else -> skip
	fi;
#endif
	CLAIM_END(pos, h);
	off = pos % CAP;
	skip; d_step { st = rst[off]; stok = rtok[off]; sln = rlen[off] };
	nxt = pos;
	if
#ifdef BROKEN_TAKEBACK_NO_POS
	:: stok == tok ->
#else
	:: rpos[off] == pos && stok == tok ->
#endif
		if
		:: st == CLAIMED && sln <= CAP - off -> nxt = pos + sln
		:: st == PADDING && off != 0 && sln == CAP - off -> nxt = pos + sln
		:: else -> skip
		fi
	:: else -> skip
	fi;
	atomic {
		if
		:: tcl && tp == pos && ttok == tok -> tcl = false; tp = nxt; ttok = 0
		:: else -> skip
		fi
	};
took:
	skip
}

proctype producer(byte me) {
	byte k, size, need, t, hc, h, off, i, st, stok, sln, nxt, wp, wtok;
	bool wcl, pad;
	byte msgs = MSGS;
#ifndef FULL
	if
	:: me == 2 -> msgs = 1 /* CI: 3 messages in all (see the header) */
	:: else -> skip
	fi;
#endif
	do
	:: k == msgs -> break
	:: k < msgs ->
#ifdef SIZES
		if
		:: size = 2
		:: size = 3
		fi;
#else
		/* producer 1 sends 3 then 2 units, producer 2 sends 2 then 3 */
		size = 2 + (me + k) % 2;
#endif
try:
		skip;
		/* w := q.tail.Load() */
		skip; d_step {
			wcl = tcl; wp = tp; wtok = ttok;
			t = wp; off = t % CAP; need = size; pad = (CAP - off < size);
			if
			:: pad -> need = CAP - off
			:: else -> skip
			fi;
			h = 0; st = 0; stok = 0; sln = 0; nxt = 0; i = 0
		};
		if
		:: wcl ->
			/* claimWait.wait: look again until the word changes, or,
			 * once an interval has passed, judge it and take it back
			 * from a dead claimer. */
			(!(tcl && tp == wp && ttok == wtok) || dead[wtok]);
			if
			:: goto try
			:: dead[wtok] -> take_back(wp, wtok); goto try
			fi
		:: else -> skip
		fi;
		wp = 0; wtok = 0;
		if
		:: t - hc > CAP - need ->
			/* refreshHead(t, need) */
			h = head;
			if
			:: h > t || t - h > CAP ->
#ifndef BROKEN_STALE_TAIL
				if
				:: !(!tcl && tp == t) -> goto try /* t was stale */
				:: else -> skip
				fi;
#endif
				CORRUPT
			:: else -> skip
			fi;
			hc = h;
			if
			:: t - h > CAP - need ->
				/* waitRoom: until head moves or the claim word does */
				(head != h || tcl || tp != t);
				goto try
			:: else -> skip
			fi
		:: else -> skip
		fi;
		/* CAS tail from t to claiming(t, me) */
		atomic {
			if
			:: !tcl && tp == t -> tcl = true; ttok = me
			:: else -> goto try
			fi
		};
		MAYDIE;
#ifdef BROKEN_TAIL_FIRST
		atomic { assert(tcl && tp == t && ttok == me); tcl = false; tp = t + need; ttok = 0 };
		MAYDIE;
#endif
		skip; d_step {
			if
			:: pad -> rst[off] = PADDING
			:: else -> rst[off] = CLAIMED
			fi;
			rtok[off] = me;
			rlen[off] = need
		};
		MAYDIE;
		rpos[off] = t;
		MAYDIE;
#ifndef BROKEN_TAIL_FIRST
		/* CAS claim -> t + need: only a taker that found us dead moves it */
		atomic { assert(tcl && tp == t && ttok == me); tcl = false; tp = t + need; ttok = 0 };
		MAYDIE;
#endif
		if
		:: pad -> goto try
		:: else -> skip
		fi;
		i = 1;
		do
		:: i < size ->
#ifdef BROKEN_PUBLISH_FIRST
			if
			:: i == size - 1 -> d_step { rst[off] = PUBLISHED; sent[me]++ }
			:: else -> skip
			fi;
#endif
			pay[off + i] = me * 4 + k;
			i++;
			MAYDIE
		:: else -> break
		od;
#ifndef BROKEN_PUBLISH_FIRST
		skip; d_step { rst[off] = PUBLISHED; sent[me]++ };
#endif
		k++
	od;
died:
	pfin++
}

proctype consumer() {
	byte h, e, off, room, avail, st, tok, ln, i, wp, wtok, stok, sln, nxt;
	bool wcl;
	do
	:: h == e ->
		/* refreshEnd */
		skip;
		skip; d_step { wcl = tcl; wp = tp; wtok = ttok };
		CLAIM_END(wp, h);
		e = wp;
		if
		:: e != h -> skip
		:: e == h && wcl && dead[wtok] -> take_back(wp, wtok)
		:: pfin == NP && !tcl && tp == h -> break /* the model's end: nothing more will come */
		:: else ->
			/* nothing at head: wait until the claim word changes */
			(!(tcl == wcl && tp == wp && ttok == wtok) || (wcl && dead[wtok]) || pfin == NP)
		fi
	:: h != e ->
		skip; d_step {
			off = h % CAP; room = CAP - off; avail = e - h;
			st = rst[off]; tok = rtok[off]; ln = rlen[off];
			wcl = false; wp = 0; wtok = 0; i = 0
		};
		if
		:: rpos[off] != h -> CORRUPT
		:: tok == 0 || tok > NP -> CORRUPT
		:: else -> skip
		fi;
		if
		:: st == PADDING ->
			if
			:: off == 0 || ln != room || room > avail -> CORRUPT
			:: else -> h = h + room; head = h
			fi
		:: st == CLAIMED || st == PUBLISHED ->
			if
			:: ln < 2 || ln > room || ln > avail -> CORRUPT
			:: else -> skip
			fi;
			if
#ifdef BROKEN_SKIP_LIVE
			:: st == CLAIMED -> lost++; h = h + ln; head = h
#else
			:: st == CLAIMED && dead[tok] ->
				/* Dead, so its state word is final: read it again,
				 * for it may have published after our first read. */
				if
#ifndef BROKEN_STALE_STATE
				:: rst[off] != CLAIMED -> skip
#endif
				:: else -> lost++; h = h + ln; head = h
				fi
			:: st == CLAIMED && !dead[tok] ->
				/* waitRecord: until it is published or its claimer dies */
				(rst[off] != CLAIMED || rtok[off] != tok || dead[tok])
#endif
			:: st == PUBLISHED ->
				/* The copy: one step (its units are all written
				 * before the published state word, or it is torn). */
				d_step {
					i = 1;
					do
					:: i < ln -> assert(pay[off + i] == tok * 4 + got[tok]); i++
					:: else -> break
					od;
					i = 0;
					got[tok]++;
					h = h + ln
				};
				head = h
			fi
		:: else -> CORRUPT
		fi
	od;
	/* Every published message delivered; the killed producer's claims
	 * that reached the records are counted lost. */
	assert(got[1] == sent[1] && got[2] == sent[2]);
	assert(lost <= KILLS);
	cdone = true
}

init {
	atomic {
		run producer(1);
		run producer(2);
		run consumer()
	}
}

ltl all_done { <>(cdone && pfin == NP) }
