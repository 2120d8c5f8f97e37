/*
 * ring.pml: the SPSC ring's index and wake-up protocol (Rigtorp's indices,
 * a Dekker pair of store-index-then-load-wake-word against
 * announce-sleep-then-look), in-process (Ring) and between processes
 * (the shared byte ring, -DSHARED).
 *
 * Mirrors ring.go, ringindex.go, sharedring.go and sharedringends.go on main:
 * models: ring.go (*Ring).TryPush
 * models: ring.go (*Ring).TryPop
 * models: ring.go (*Ring).pushSlow
 * models: ring.go (*Ring).popSlow
 * models: ring.go (*Ring).refreshHead
 * models: ring.go (*Ring).refreshTail
 * models: internal/ringindex/ringindex.go Await
 * models: internal/ringindex/ringindex.go WakeSide
 * models: internal/ringindex/ringindex.go CloseWords
 * models: ringindex.go (*spscIndex).waitRoom
 * models: ringindex.go (*spscIndex).waitItems
 * models: internal/ringindex/ringindex.go Publish
 * models: shm/ringends.go (*RingProducer).trySend
 * models: shm/ringends.go (*RingConsumer).Receive
 * models: shm/ringends.go (*RingConsumer).tryReceive
 * models: shm/ring.go sharedRingSleeper.Sleep
 * models: shm/ring.go (*ringEnd).peerDead
 *
 * The C library's ring (c/sharedring.c) on the same words, step by step
 * beside the Go function (checked by TestModelsNameLiveCode):
 *            step         Go                                  C
 * models-c: send         (*RingProducer).trySend             c/sharedring.c try_send
 * models-c: receive      (*RingConsumer).tryReceive          c/sharedring.c try_receive
 * models-c: release      (*RingConsumer).release             c/sharedring.c release_to
 * models-c: head         (*RingProducer).refreshHead         c/sharedring.c refresh_head_need
 * models-c: tail         (*RingConsumer).refreshTail         c/sharedring.c refresh_tail
 * models-c: await        ringAwait                           c/sharedring.c ring_await
 * models-c: sleep        sharedRingSleeper.Sleep             c/sharedring.c ring_sleep
 * models-c: wake         wakeSide                            c/sharedring.c wake_side
 * models-c: close        CloseWords                          c/sharedring.c close_words
 * models-c: peer-dead    (*ringEnd).peerDead                 c/sharedring.c peer_dead
 *
 * Scenario: the producer pushes MSGS = 5 messages, the values 1..5, into a
 * ring of CAP = 2 slots, then closes it; the consumer pops until the ring
 * is closed and drained. A slot holds a message as two words, written one
 * after the other (the shared ring's header and payload). Positions are
 * counters mod 4 (the Go code's are mod 2^64): 5 messages wrap them. The
 * consumer's sleep may be cancelled once (its Pop then fails and it pops
 * again); one spurious wake-up. -DSHARED: the producer process may die at
 * any step (then it never closes), the consumer's sleep ends only by a
 * wake-up, or by its 10 ms slice once the producer is dead, and looks for
 * a dead peer before each slice; Receive drains what was published before
 * returning ErrPeerDead.
 *
 * Bounds: 5 messages through 2 slots are enough for every relative
 * position of the two sides, full and empty rings, both sides asleep in
 * turn, and a wrap of the counters; a ring of 1 slot is a special case the
 * Go tests cover. Not modelled: TryPushSlice/TryPopSlice (the same index
 * protocol, n slots per publish), the shared ring's padding records and
 * its validation of a corrupt peer, a dying consumer (symmetric to the
 * dying producer), and Close by the consumer or a third goroutine (the
 * documented race in Close's doc).
 *
 * Properties: every message is delivered exactly once and in order, never
 * before both its words are written (assert on each pop); at the end the
 * consumer has all of them (closed: MSGS; producer died: every message it
 * published, and none it did not); no invalid end state (no lost wake-up
 * of either side, also with a cancelled sleep); ltl all_done under weak
 * fairness: both sides finish (no side spins or sleeps for ever).
 *
 * -DDRAIN: the producer waits until the consumer has taken every message
 * before it closes. Otherwise Close, which wakes every sleeper, follows the
 * last push, and a lost wake-up of the last message only delays it.
 *
 * Negative controls:
 *   -DBROKEN_PUBLISH_FIRST  the producer stores tail before the message.
 *   -DBROKEN_NO_RECHECK     a side sleeps after announcing the sleep
 *                           without looking at the other index again.
 *   -DBROKEN_LOOK_FIRST     a side looks at the other index before it
 *                           announces its sleep (the store-load reordering
 *                           of arm64 without a full fence).
 *   -DBROKEN_WAKE_BEFORE_PUBLISH  the producer loads the consumer's sleep
 *                           flag before it stores tail (the same
 *                           reordering on the other side of the pair).
 */
#define NG 2
#define CAP 2
#define MOD 4
#define MSGS 5
#define PRODUCER 0
#define CONSUMER 1
#ifdef SHARED
#define TIMEOUT_OK(self) (self == CONSUMER && pdead)
#endif
#include "wait.pml"

#define NOTEMPTY 0 /* word addresses */
#define NOTFULL 1
#define SLEEPING 1
#define CLOSED 2

byte tail, head, notEmpty, notFull;
byte hdr[CAP], payload[CAP];
byte published; /* ghost: messages behind tail */
bool pdead;     /* the producer's process died */
bool pdone;
bool cdone;     /* the consumer returned */

/* wakeSide: clear the sleeping bit; if it was set, wake the sleeper */
inline wake_side(word, a) {
	atomic {
		if
		:: word & SLEEPING -> word = word & ~SLEEPING; wake_n(a, 1, false, 0)
		:: else -> skip
		fi
	}
}

/*
 * ringAwait(word a, closedFirst): one look of the spin phase (the Go code
 * looks up to 14 times; each look is this same step), then the sleep loop.
 * READY is a statement that sets rdy. res: 0 ready, 1 closed, 2 ctx error,
 * 3 peer dead.
 */
#define RINGAWAIT(word, a, closedFirst, READY) \
	if \
	:: (word & CLOSED) && closedFirst -> res = 1; goto awaited \
	:: else -> skip \
	fi; \
	cl = (word & CLOSED) != 0; \
	READY; \
	if \
	:: rdy -> rdy = false; cl = false; res = 0; goto awaited \
	:: !rdy && cl -> cl = false; res = 1; goto awaited \
	:: else -> skip \
	fi; \
	do \
	:: true -> \
		LOOK_FIRST(READY); \
		atomic { old = word; word = word | SLEEPING }; \
		if \
		:: (old & CLOSED) && closedFirst -> word = word & ~SLEEPING; old = 0; res = 1; goto awaited \
		:: else -> skip \
		fi; \
		RECHECK(READY); \
		if \
		:: rdy -> word = word & ~SLEEPING; rdy = false; old = 0; res = 0; goto awaited \
		:: else -> skip \
		fi; \
		if \
		:: old & CLOSED -> word = word & ~SLEEPING; old = 0; res = 1; goto awaited \
		:: else -> old = 0 \
		fi; \
		SLEEP(word, a); \
		if \
		:: res != 0 -> word = word & ~SLEEPING; goto awaited \
		:: else -> skip \
		fi \
	od; \
awaited: skip

#if defined(BROKEN_NO_RECHECK) || defined(BROKEN_LOOK_FIRST)
#define RECHECK(READY) skip
#else
#define RECHECK(READY) READY
#endif
#ifdef BROKEN_LOOK_FIRST
#define LOOK_FIRST(READY) READY
#else
#define LOOK_FIRST(READY) skip
#endif

active proctype Producer() {
	byte m, t, hc, old, res;
	bool rdy, cl, err;
	{
	for (m : 1 .. MSGS) {
		t = tail;
		do
		:: true ->
			/* TryPush: full by the cached head? refresh */
			if
			:: (t - hc + MOD) % MOD >= CAP -> hc = head
			:: else -> skip
			fi;
			if
			:: (t - hc + MOD) % MOD < CAP -> break
			:: else ->
				/* pushSlow: waitRoom, then TryPush again */
#define SLEEP(word, a) wait_enqueue(PRODUCER, a, word, SLEEPING, 0); wait_sleep(PRODUCER, false, err)
				RINGAWAIT(notFull, NOTFULL, true, atomic { hc = head; rdy = (t - hc + MOD) % MOD < CAP });
#undef SLEEP
				assert(res == 0) /* only the producer closes, after its last push */
			fi
		od;
		/* write the record, then publish: tail.Swap(t+1) */
#ifdef BROKEN_PUBLISH_FIRST
		atomic { tail = (t + 1) % MOD; published++ };
		payload[t % CAP] = m;
		hdr[t % CAP] = m;
#else
		payload[t % CAP] = m;
		hdr[t % CAP] = m;
#ifdef BROKEN_WAKE_BEFORE_PUBLISH
		cl = (notEmpty & SLEEPING) != 0; /* the load moved above the store */
#endif
		atomic { tail = (t + 1) % MOD; published++ };
#endif
		/* then look for a sleeping consumer */
		if
#ifdef BROKEN_WAKE_BEFORE_PUBLISH
		:: cl -> cl = false; wake_side(notEmpty, NOTEMPTY)
#else
		:: notEmpty & SLEEPING -> wake_side(notEmpty, NOTEMPTY)
#endif
		:: else -> skip
		fi;
		t = 0
	}
#ifdef DRAIN
	/* wait until the consumer has taken every message, then close: a
	 * lost wake-up of the last message can no longer hide behind Close */
	head == tail;
#endif
	/* Close: set closed in both words, wake whoever sleeps */
	atomic { old = notEmpty; notEmpty = notEmpty | CLOSED };
	if :: old & SLEEPING -> wake_side(notEmpty, NOTEMPTY) :: else -> skip fi;
	atomic { old = notFull; notFull = notFull | CLOSED };
	if :: old & SLEEPING -> wake_side(notFull, NOTFULL) :: else -> skip fi;
	pdone = true
	} unless { pdead }
}

#ifdef SHARED
active proctype Killer() {
	if
	:: atomic { !pdone -> pdead = true }
	:: skip
	fi
}
#endif

active proctype Consumer() {
	byte h, tc, got, old, res;
	bool rdy, cl, err;
	bool canCancel = true;
	do
	:: true ->
		/* TryPop: empty by the cached tail? refresh */
		if
		:: h == tc -> tc = tail
		:: else -> skip
		fi;
		if
		:: h != tc ->
			/* the record at h: both words, then release: head.Swap(h+1) */
			got++;
			assert(hdr[h % CAP] == got && payload[h % CAP] == got);
			h = (h + 1) % MOD;
			head = h;
			if
			:: notFull & SLEEPING -> wake_side(notFull, NOTFULL)
			:: else -> skip
			fi
		:: else ->
			/* popSlow: waitItems */
#ifdef SHARED
			/* sharedRingSleeper.sleep: ctx, then a dead peer, then FutexWait */
#define SLEEP(word, a) \
	if \
	:: pdead -> res = 3 \
	:: else -> wait_enqueue(CONSUMER, a, word, SLEEPING, 0); wait_sleep(CONSUMER, canCancel, err); \
		if :: err -> err = false; canCancel = false; res = 2 :: else -> skip fi \
	fi
#else
#define SLEEP(word, a) \
	wait_enqueue(CONSUMER, a, word, SLEEPING, 0); wait_sleep(CONSUMER, canCancel, err); \
	if :: err -> err = false; canCancel = false; res = 2 :: else -> skip fi
#endif
			RINGAWAIT(notEmpty, NOTEMPTY, false, atomic { tc = tail; rdy = (tc != h) });
#undef SLEEP
			if
			:: res == 1 -> break /* ErrRingClosed: closed and drained */
			:: res == 2 -> skip  /* ctx.Err(): the caller pops again */
			:: res == 3 ->
				/* ErrPeerDead: drain what was published first */
				tc = tail;
				if
				:: tc != h -> skip
				:: else -> break
				fi
			:: else -> skip
			fi;
			res = 0
		fi
	od;
	if
	:: pdead -> assert(got == published)
	:: else -> assert(got == MSGS && published == MSGS)
	fi;
	cdone = true
}

ltl all_done { <> (cdone && (pdone || pdead)) }
