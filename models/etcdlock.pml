/*
 * etcdlock.pml: etcdlock.Mutex, the lock on etcd: acquisition (the fast
 * path, the queue, the wait for the key before ours, the claim of the hold
 * record), Unlock, MarkConsistent, and the clean-up of a failed attempt
 * (the fence), over a network that delays, reorders and loses requests and
 * replies, with a lease that can expire at any step.
 *
 * Mirrors the etcdlock package on main:
 * models: etcdlock/acquire.go (*Mutex).LockContext
 * models: etcdlock/acquire.go (*attempt).lock
 * models: etcdlock/acquire.go (*attempt).fastPath
 * models: etcdlock/acquire.go (*attempt).enqueue
 * models: etcdlock/acquire.go (*attempt).waitTurn
 * models: etcdlock/acquire.go (*attempt).claimFree
 * models: etcdlock/acquire.go (*attempt).claim
 * models: etcdlock/acquire.go (*attempt).reread
 * models: etcdlock/fence.go (*attempt).abandon
 * models: etcdlock/fence.go (*attempt).fenceOnce
 * models: etcdlock/handle.go (*handle).retry
 * models: etcdlock/handle.go (*handle).giveUp
 * models: etcdlock/release.go (*Mutex).Unlock
 * models: etcdlock/release.go (*Mutex).unlockTxn
 * models: etcdlock/release.go (*Mutex).unlockInBackground
 * models: etcdlock/release.go (*Mutex).MarkConsistentContext
 *
 * etcd is one process (etcd below) that commits the transactions in
 * flight one at a time, atomically, in any order: a request sent later can
 * commit first (two endpoints, a slow link), one can commit after its
 * sender gave up on it (the reply lost, the context cancelled), and a
 * flaky client's request can be lost (it never commits). A transaction
 * that only reads is one atomic step of its client: its answer is the
 * state at some instant between request and reply, which is what a read
 * at that instant gives. The watch of waitTurn is a guard on the key
 * before ours (etcd's watch delivers the delete; a watch that fails makes
 * waitTurn read again, which the guard covers).
 *
 * State kept by etcd, after etcdlock's records table:
 *   key[c]   client c's queue key: 0 absent, else its create revision
 *            (the token of a hold);
 *   fence[c] the version of c's fence key (0: absent);
 *   lease[c] c's lease is alive; its expiry deletes key[c] and the fence
 *            key (version back to 0), and a write attached to it fails
 *            (ErrLeaseNotFound fails the whole transaction);
 *   the hold record P/owner: rs (NONE, HELD, INCONS, NOTREC), rc (the
 *            client it names), ra (which attempt of rc wrote it: a stand-in
 *            for the record's value, which holds a time stamp; 0 for one
 *            written by MarkConsistent), rm (its mod revision, 0 absent).
 * Revisions: rev counts the writes that create a key or write the record
 * (the only revisions anything compares); deletes need none.
 *
 * Clients: A (client 0) is flaky: it may give up on any reply (its
 * context ends, or the reply is lost: GIVEUPS in all) and lose a request
 * (LOSSES in all); it makes ATTEMPTS LockContext calls, each followed by
 * Unlock if it held. B (client 1) is reliable: one Lock, MarkConsistent
 * if it took the lock from a dead holder, Unlock. EXPIRE=c lets client c's
 * lease expire at any step (EXPIRE=2: none): a pause past the TTL, a
 * partition, a process death seen from etcd.
 *
 * Properties:
 *   - no phantom holder: a Mutex that is idle (no call of it running and
 *     none of its clean-ups) with its lease alive has no queue key and no
 *     "held" record naming it, whatever of its requests is still in flight
 *     (assert after every commit and whenever a Mutex goes idle): a late
 *     write of a failed call never creates a hold nobody will release;
 *   - exclusion: when a client takes the lock, no other client holds it
 *     validly (believes it holds, with its key still at its token);
 *   - tokens strictly increase from hold to hold;
 *   - ErrOwnerDead only after a lease expired (a real death);
 *   - no client stuck: no invalid end state (B waits for ever behind a
 *     key nobody deletes);
 *   - ltl all_done: under weak fairness both clients finish.
 *
 * Negative controls:
 *   -DOLD_NOFENCE  the design before the fence (git show d057365:etcdlock/
 *                  mutex.go): the creating writes are not conditioned on a
 *                  fence key, and a failed attempt's cleanUp sends one
 *                  unconditioned delete (deletes the key if it exists) and
 *                  lets the Mutex go: a fast-path transaction that lands
 *                  after it leaves a phantom holder.
 *   -DBROKEN_NO_BUMP the fence deletes but does not bump the fence key:
 *                  the same late write survives it.
 *   -DBROKEN_NO_RECDEL the fence deletes the queue key but not the "held"
 *                  record the attempt sent.
 *   -DBROKEN_GIVEUP_KEEP a fence that etcd never confirms lets the Mutex go
 *                  without giving the lease up.
 *   -DBROKEN_NO_GUARD the claim is not conditioned on our queue key: a
 *                  late claim after the clean-up takes the record.
 */

#ifndef ATTEMPTS
#define ATTEMPTS 1
#endif
#ifndef GIVEUPS
#define GIVEUPS 2
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef EXPIRE
#define EXPIRE 2
#endif
#ifndef FENCE_TRIES
#define FENCE_TRIES 2 /* the background retry's tries (handle.retry) in one TTL (and Unlock's) */
#endif

#define NC 2
#define NMSG 4 /* A's requests given up on (GIVEUPS), its current one, B's */

/* record states */
#define NONE   0
#define HELD   1
#define INCONS 2
#define NOTREC 3

/* requests (transactions that write) */
#define M_FAST      1 /* fastPath */
#define M_ENQ       2 /* enqueue */
#define M_CLAIMFREE 3 /* claimFree */
#define M_CLAIM     4 /* claim */
#define M_FENCE     5 /* fenceOnce (OLD_NOFENCE: cleanUp) */
#define M_UNLOCK    6 /* unlockTxn */
#define M_MARK      7 /* MarkConsistentContext */

typedef Msg {
	byte kind;
	byte cli;
	byte a; byte b; byte c; byte d
};
Msg net[NMSG];

/* etcd */
byte key[NC];
byte fence[NC];
bool lease[NC];
byte rs, rc, ra, rm;
byte rev;

/* replies: waiting[c] = slot + 1 of the request c awaits */
byte waiting[NC];
bool replied[NC], r_fail[NC];
bool r_ok[NC], r_lerr[NC], r_mine[NC], r_first[NC];
byte r_rev[NC], r_rs[NC], r_rm[NC];

/* the clients, as the checks see them */
bool busy[NC];     /* a call or a clean-up of the Mutex runs (its gate) */
bool holding[NC];  /* the client believes it holds */
byte htok[NC];     /* with this token */
byte lastTok;
byte expired;      /* leases expired so far */
byte giveups = GIVEUPS;
byte losses = LOSSES;
byte ndone;

#define other(c) (1 - (c))
#define first_of(c) (key[c] != 0 && (key[other(c)] == 0 || key[c] < key[other(c)]))
#define valid_hold(c) (holding[c] && key[c] == htok[c])

#ifdef OLD_NOFENCE
#define fence_ok(c, f) true
#else
#define fence_ok(c, f) (fence[c] == (f))
#endif

#ifdef BROKEN_NO_GUARD
#define guard(c, t) true
#else
#define guard(c, t) (key[c] == (t))
#endif

inline check_phantom(c) {
	assert(busy[c] || !lease[c] || (key[c] == 0 && !(rs == HELD && rc == c)))
}

inline expire(c) {
	lease[c] = false; key[c] = 0; fence[c] = 0; expired++;
	check_phantom(0); check_phantom(1)
}

inline put_record(st, c, att) {
	rev++; rs = st; rc = c; ra = att; rm = rev
}

/* acquired: a transaction that takes the lock committed, with token t:
 * tokens strictly increase in commit order, and an owner death is
 * reported only after a lease expired. */
inline acquired(t, dead) {
	assert(t > lastTok);
	assert(!(dead) || expired > 0);
	lastTok = t
}

inline delete_record() {
	rs = NONE; rc = 0; ra = 0; rm = 0
}

/* commit: etcd commits the request in slot s (one transaction). */
inline commit(s) {
	c = net[s].cli;
	ok = false; lerr = false;
	if
	:: net[s].kind == M_FAST ->
		/* If(queue empty, no record, fence) Then(put key, put "held") */
		if
		:: key[0] == 0 && key[1] == 0 && rs == NONE && fence_ok(c, net[s].a) ->
			if
			:: !lease[c] -> lerr = true
			:: else -> rev++; key[c] = rev; put_record(HELD, c, net[s].b); ok = true; acquired(key[c], false)
			fi
		:: else
		fi;
		x_rev = key[c]
	:: net[s].kind == M_ENQ ->
		/* If(fence) Then(put key, get key, first key, record); the old
		 * design: put the key unless it exists. */
		if
		:: fence_ok(c, net[s].a) ->
			if
			:: !lease[c] -> lerr = true
			:: else ->
				if
				:: key[c] == 0 -> rev++; key[c] = rev
				:: else
				fi;
				ok = true
			fi
		:: else
		fi;
		x_rev = key[c]; x_first = first_of(c); x_rs = rs; x_rm = rm
	:: net[s].kind == M_CLAIMFREE ->
		/* If(our key, every key created at or after ours, no record)
		 * Then(put "held") Else(get key, first key, record) */
		if
		:: guard(c, net[s].a) && (key[other(c)] == 0 || key[other(c)] > net[s].a) && rs == NONE ->
			put_record(HELD, c, net[s].b); ok = true; acquired(net[s].a, false)
		:: else
		fi;
		x_mine = (key[c] == net[s].a); x_first = first_of(c); x_rs = rs; x_rm = rm
	:: net[s].kind == M_CLAIM ->
		/* If(our key, record unchanged) Then(put the record) */
		if
		:: guard(c, net[s].a) && rm == net[s].b ->
			put_record(net[s].c, c, net[s].d); ok = true; acquired(net[s].a, net[s].c == INCONS)
		:: else
		fi
	:: net[s].kind == M_FENCE ->
#ifdef OLD_NOFENCE
		/* cleanUp(rev): If(key's create revision is rev, or exists
		 * when rev is 0) Then(delete key, delete the record if it is
		 * the "held" one sent) */
		if
		:: (net[s].a == 0 && key[c] != 0) || (net[s].a != 0 && key[c] == net[s].a) ->
			key[c] = 0;
			if
			:: net[s].b != 0 && rs == HELD && rc == c && ra == net[s].b -> delete_record()
			:: else
			fi
		:: else
		fi;
#else
		/* fenceOnce: If(fence) Then(bump fence, delete key, delete the
		 * record if it is the "held" one sent); with the lease gone, the
		 * deletes alone. */
		if
		:: fence[c] == net[s].a ->
			if
			:: lease[c] ->
#ifndef BROKEN_NO_BUMP
				fence[c]++
#else
				skip
#endif
			:: else
			fi;
			key[c] = 0;
#ifndef BROKEN_NO_RECDEL
			if
			:: net[s].b != 0 && rs == HELD && rc == c && ra == net[s].b -> delete_record()
			:: else
			fi
#endif
		:: else
		fi;
#endif
		ok = true
	:: net[s].kind == M_UNLOCK ->
		/* If(our key) Then(delete key, delete the record or make it
		 * not-recoverable) */
		if
		:: key[c] == net[s].a ->
			key[c] = 0;
			if
			:: net[s].b -> put_record(NOTREC, c, 0)
			:: else -> delete_record()
			fi;
			ok = true
		:: else
		fi
	:: net[s].kind == M_MARK ->
		if
		:: key[c] == net[s].a -> put_record(HELD, c, 0); ok = true
		:: else
		fi
	fi;
	if
	:: waiting[c] == s + 1 ->
		r_ok[c] = ok; r_lerr[c] = lerr; r_fail[c] = false;
		r_rev[c] = x_rev; r_first[c] = x_first; r_rs[c] = x_rs; r_rm[c] = x_rm; r_mine[c] = x_mine;
		replied[c] = true; waiting[c] = 0
	:: else
	fi;
	net[s].kind = 0; net[s].cli = 0; net[s].a = 0; net[s].b = 0; net[s].c = 0; net[s].d = 0;
	check_phantom(0); check_phantom(1)
}

active proctype etcd() {
	byte s, c;
	bool ok, lerr;
	byte x_rev, x_rs, x_rm; /* the reply, sent if its client awaits it */
	bool x_first, x_mine;
end_etcd:
	do
	:: atomic {
		if
		:: net[0].kind != 0 -> s = 0
		:: net[1].kind != 0 -> s = 1
		:: net[2].kind != 0 -> s = 2
		:: net[3].kind != 0 -> s = 3
		fi;
		if
		:: commit(s)
		:: losses > 0 && net[s].cli == 0 ->
			/* a flaky client's request, lost: if A awaits it, its
			 * call fails (a timeout, a broken connection) */
			losses--;
			if
			:: waiting[0] == s + 1 -> r_fail[0] = true; replied[0] = true; waiting[0] = 0
			:: else
			fi;
			net[s].kind = 0; net[s].cli = 0; net[s].a = 0; net[s].b = 0; net[s].c = 0; net[s].d = 0
		fi;
		s = 0; c = 0; ok = false; lerr = false;
		x_rev = 0; x_rs = 0; x_rm = 0; x_first = false; x_mine = false
	}
	od
}

/* The lease of client EXPIRE may expire at any step. */
active proctype leases() {
end_lease:
	atomic { EXPIRE < NC && lease[EXPIRE] -> expire(EXPIRE) }
}

/* send a request; the client then awaits its reply. */
inline send(k, pa, pb, pc, pd) {
	atomic {
		if
		:: net[0].kind == 0 -> s = 0
		:: else ->
			if
			:: net[1].kind == 0 -> s = 1
			:: else ->
				if
				:: net[2].kind == 0 -> s = 2
				:: else -> assert(net[3].kind == 0); s = 3
				fi
			fi
		fi;
		net[s].kind = k; net[s].cli = me;
		net[s].a = pa; net[s].b = pb; net[s].c = pc; net[s].d = pd;
		waiting[me] = s + 1; replied[me] = false;
		s = 0
	}
}

/* await the reply; a flaky client may give up instead (failed): its
 * context ended, or the reply (or the request) was lost. */
inline await() {
	if
	:: atomic { replied[me] -> replied[me] = false; failed = r_fail[me]; r_fail[me] = false }
	:: atomic { flaky && giveups > 0 -> giveups--; waiting[me] = 0; failed = true }
	fi
}

/* the client takes the lock with token t */
inline take(t, dead) {
	atomic {
		/* a hold whose key is already gone (the lease expired since
		 * the commit) is the paused holder Guard fences */
		assert(key[me] != (t) || !valid_hold(other(me)));
		htok[me] = t; holding[me] = true;
		tok = t; incons = (dead)
	}
}

proctype client(byte me; bool flaky) {
	byte att, afence, fenced, held, myRev, tok, st, ratt, rstate, rmod, tries;
	bool failed, first, incons;
	byte s;

next:
	if
	:: att == (flaky -> ATTEMPTS : 1) -> goto finish
	:: else
	fi;
	att++;
	atomic { busy[me] = true; held = 0; myRev = 0; afence = fenced };
	if
	:: !lease[me] -> goto idle /* ErrLeaseLost, nothing sent */
	:: else
	fi;

	/* fastPath */
	held = att;
	send(M_FAST, afence, att, 0, 0);
	await();
	if
	:: failed || r_lerr[me] -> goto abandon
	:: !failed && r_ok[me] -> take(r_rev[me], false); goto holds
	:: else
	fi;

	/* enqueue */
	send(M_ENQ, afence, 0, 0, 0);
	await();
	if
	:: failed || r_lerr[me] || !r_ok[me] -> goto abandon
	:: else
	fi;
	atomic { myRev = r_rev[me]; first = r_first[me]; rstate = r_rs[me]; rmod = r_rm[me] };

loop:
	if
	:: first -> goto claim
	:: else -> goto waitTurn
	fi;

claim:
	if
	:: rstate == NOTREC -> goto abandon /* ErrNotRecoverable */
	:: rstate == NONE -> st = HELD; held = att; ratt = att
	:: else -> st = INCONS; ratt = 0 /* a record naming a key that is gone */
	fi;
	send(M_CLAIM, myRev, rmod, st, ratt);
	await();
	if
	:: failed -> goto abandon
	:: !failed && r_ok[me] -> take(myRev, st == INCONS); goto holds
	:: else
	fi;
	/* reread: a read (one step); our key gone is ErrLeaseLost */
	if
	:: atomic { flaky && giveups > 0 -> giveups-- }; goto abandon
	:: atomic {
		if
		:: key[me] != myRev -> failed = true
		:: else -> failed = false; first = first_of(me); rstate = rs; rmod = rm
		fi
	   };
	   if
	   :: failed -> goto abandon
	   :: else -> goto loop
	   fi
	fi;

waitTurn:
	/* until no key created before ours is left, the lease is lost or
	 * the context ends */
	if
	:: atomic { !(key[other(me)] != 0 && key[other(me)] < myRev) -> skip }
	:: atomic { !lease[me] -> skip }; goto abandon
	:: atomic { flaky && giveups > 0 -> giveups-- }; goto abandon
	fi;

	/* claimFree */
	held = att;
	send(M_CLAIMFREE, myRev, att, 0, 0);
	await();
	if
	:: failed -> goto abandon
	:: !failed && r_ok[me] -> take(myRev, false); goto holds
	:: !failed && !r_ok[me] && !r_mine[me] -> goto abandon /* ErrLeaseLost */
	:: else -> atomic { first = r_first[me]; rstate = r_rs[me]; rmod = r_rm[me] }; goto loop
	fi;

abandon:
#ifdef OLD_NOFENCE
	/* cleanUp: one try on a timeout of its own; its failure is logged */
	send(M_FENCE, myRev, held, 0, 0);
	await();
	goto idle;
#else
	tries = 0;
fenceTry:
	send(M_FENCE, afence, held, 0, 0);
	await();
	if
	:: !failed -> fenced = afence + 1; goto idle
	:: failed && tries + 1 < FENCE_TRIES -> tries++; goto fenceTry
	:: else ->
		/* giveUp: revoke the lease (or let it expire) */
#ifndef BROKEN_GIVEUP_KEEP
		atomic { if :: lease[me] -> expire(me) :: else fi }
#else
		skip
#endif
	fi;
	goto idle;
#endif

holds:
	/* the critical section; MarkConsistent after an owner death */
	if
	:: incons ->
		send(M_MARK, tok, 0, 0, 0);
		await();
		if
		:: !failed && r_ok[me] -> incons = false
		:: else
		fi
	:: else
	fi;
	/* Unlock: UnlockContext, then unlockInBackground's tries, then
	 * giveUp. A reply that says the hold had ended (ErrNotHolder) ends
	 * it too. */
	tries = 0;
unlockTry:
	send(M_UNLOCK, tok, incons, 0, 0);
	await();
	if
	:: !failed -> skip
	:: failed && tries + 1 < FENCE_TRIES -> tries++; goto unlockTry
	:: else -> atomic { if :: lease[me] -> expire(me) :: else fi } /* giveUp */
	fi;
	atomic { holding[me] = false; htok[me] = 0 };

idle:
	atomic { busy[me] = false; check_phantom(me); failed = false; first = false };
	goto next;

finish:
	atomic { ndone++ }
}

init {
	atomic {
		lease[0] = true; lease[1] = true;
		run client(0, true);
		run client(1, false)
	}
}

ltl all_done { <> (ndone == NC) }
