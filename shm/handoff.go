package shm

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// The hand-off: how a Mutex waiter that has waited sharedStarveNs
// gets the lock at the next Unlock instead of racing for it (Mutex's
// Fairness section is the user's account). Both parties are here: the
// waiter's side (askHandoff files a request, takeGrant takes a grant or
// notices a withdrawal, settle waits out a granter between its two CASes,
// withdraw takes a request back), Unlock's side (grant), and the take-over
// from a dead holder, which the hand-off word makes a plain take-back when
// the dead holder had been handed the lock and never returned it
// (takeFromDead). unlockSlow (sharedmutex.go) withdraws a request that its
// release missed; sharedmutexwaiter.go calls the waiter's side in order.

// Hand-off word of Mutex (object offset 56), which bounds a waiter's
// wait (see Mutex's Fairness):
//
//	bits   meaning
//	0-27   owner token of the process that asked for (or was given) the lock
//	28-30  0; any other value is corrupt
//	31     granted: the lock has been handed to that process
//
//	h                   state
//	0                   no request
//	T                   T's kernel sleeper has waited sharedStarveNs and asks
//	                    for the lock; every Unlock hands it over instead of
//	                    releasing
//	T | granted         handed to T: the lock word names T (or still the
//	                    granter, between its two CASes), and T has not yet
//	                    returned it to its caller
//
// Who moves it where:
//
//	from        to           by                          step
//	0           T            T's gate holder, starving   askHandoff
//	U, U dead   T            T's gate holder, starving   askHandoff
//	T           T | granted  the holder's Unlock         grant
//	T           0            T leaving without the lock  withdraw, giveUp
//	T           0            T taking a free word        takeFree
//	T           0            an Unlock that released     unlockSlow
//	                         without seeing T
//	T | granted 0            T, the word naming it       takeGrant
//	T | granted 0            whoever takes over from a   takeFromDead
//	                         dead holder
//	any         0            Reinitialize
const (
	handoffGranted  = 1 << 31
	handoffReserved = 7 << 28
)

// sharedStarveNs is how long a Mutex waiter waits before it asks for a
// hand-off: lockword.Mutex's starvation bound, and sync.Mutex's (1 ms).
const sharedStarveNs = 1_000_000

// sharedHandoffHook, nil outside tests, lets a test turn hand-off requests
// off (it returns false), to show what the bound is worth.
var sharedHandoffHook func() bool

// A granted waiter whose lock word does not name it yet waits for the
// granter's second CAS (normally done before the waiter wakes) in sleeps
// of handoffSettle; once its context has ended, it waits at most
// handoffGrace more before it calls the words corrupt. A granter is
// descheduled between its two CASes for that long only on a host loaded
// far beyond the 10 ms liveness checks' figures.
const (
	handoffSettle = 100 * time.Microsecond
	handoffGrace  = time.Second
)

// handoffRequest reports whether h is a valid pending request (no grant).
func handoffRequest(h uint32) bool {
	return h != 0 && h&(handoffGranted|handoffReserved) == 0 && validToken(h)
}

// handoffCorrupt says what is impossible about hand-off word h, or "".
func handoffCorrupt(h uint32) string {
	switch t := h & ownerMask; {
	case h == 0:
		return ""
	case h&handoffReserved != 0:
		return fmt.Sprintf("hand-off word %#x has reserved bits 28-30 set", h)
	case !validToken(t):
		return fmt.Sprintf("hand-off word %#x names no incarnation (generation %d)", h, tokenGen(t))
	}
	return ""
}

// starving reports whether the waiter has waited long enough to ask for a
// hand-off (and, in tests, whether asking is on).
func (wt *sharedMutexWaiter) starving() bool {
	return time.Since(wt.began) >= sharedStarveNs && (sharedHandoffHook == nil || sharedHandoffHook())
}

// askHandoff files our request in hand-off word h, read as h, and reports
// whether it did; the caller then looks at the lock word again before it
// sleeps (the Dekker pair with Unlock's release).
//
//	h                    step
//	0                    CAS 0 → T
//	U (another process)  at most every ownerCheckInterval: U dead, CAS U → T;
//	                     U alive is served first
//	granted, or ours     nothing
func (wt *sharedMutexWaiter) askHandoff(h uint32) bool {
	m := wt.m
	switch {
	case h == 0:
		wt.requested = m.handoff.CompareAndSwap(0, m.token)
	case h&handoffGranted == 0 && h != m.token && time.Since(wt.hChecked) >= ownerCheckInterval:
		// Another process's request: replace it only if that
		// process is dead (else it is served first).
		wt.hChecked = time.Now()
		if alive, _ := m.r.tokenAlive(h); !alive {
			wt.requested = m.handoff.CompareAndSwap(h, m.token)
		}
	}
	return wt.requested
}

// takeGrant looks at our entry in hand-off word h, read with lock word w,
// and reports done with the lock held when the lock was handed to us, or
// with an error for a grant we never asked for.
//
//	h            w             step
//	T            any           requested (adopt one left by a forged word)
//	T | granted  names T       handed to us: CAS T|granted → 0, stamp, wake
//	                           one sleeper; return holding
//	T | granted  not requested forged: clear it, ErrCorrupt (forgedGrant)
//	other        requested     withdrawn for us: requested = false
func (wt *sharedMutexWaiter) takeGrant(w, h uint32) (done bool, err error) {
	m := wt.m
	switch {
	case h == m.token:
		// Ours. Only this goroutine, the gate holder, files our
		// requests, and a gate holder leaves none behind in any
		// valid history; adopting one left anyway (a forged word)
		// lets it be served rather than strand the lock on us.
		wt.requested = true
	case h == wt.mine && !wt.requested:
		return true, m.forgedGrant(h)
	}
	if wt.requested {
		switch {
		case h == wt.mine && w&ownerMask == m.token:
			// Handed to us: the word names us. Clear the grant
			// (only we move it now: the granter is done, and no
			// taker robs a live holder), then let one more sleeper
			// look, so that a second starving process can file its
			// request for the Unlock after ours.
			m.handoff.CompareAndSwap(wt.mine, 0)
			m.stamp()
			if w&sharedWaiters != 0 {
				wakeShared(m.word, 1)
			}
			return true, nil
		case h != wt.mine && h != m.token:
			// Withdrawn for us (a release that missed it, a
			// take-over, Reinitialize): wait and ask again.
			wt.requested = false
		}
	}
	return false, nil
}

// settle waits for a granter between its two CASes: h grants us the lock
// and w still names the granter (ctxDone: our context has ended).
//
//	h            w              step
//	T | granted  names U, live  sleep handoffSettle on the word; ctx done
//	                            and still so after handoffGrace: ErrCorrupt
func (wt *sharedMutexWaiter) settle(w, h uint32, ctxDone bool) (done bool, err error) {
	m := wt.m
	// The lock is ours once the granter's second CAS lands, a
	// few instructions away; a done context cannot refuse it
	// (withdrawing now would leave the lock on our token with
	// nobody to know). Sleep briefly on the word, which that CAS
	// changes. A grant that the word does not follow for
	// handoffGrace after the context ended names a live holder
	// that is not handing over: a forged word.
	if ctxDone {
		if wt.settling.IsZero() {
			wt.settling = time.Now()
		} else if time.Since(wt.settling) >= handoffGrace {
			return true, m.errCorrupt("the hand-off word %#x grants the lock to this process, but the lock word %#x still names a live holder (PID %s) %v later", h, w, pidText(wt.holderPID), handoffGrace)
		}
	}
	wt.slept = true
	sleepShared(context.Background(), m.word, w, handoffSettle)
	return false, nil
}

// withdraw takes back our pending request, if we filed one, on a way out
// that does not take the lock.
//
//	h   step
//	T   CAS T → 0 (a grant, T|granted, stays: the lock is ours)
func (wt *sharedMutexWaiter) withdraw() {
	if wt.requested {
		wt.m.handoff.CompareAndSwap(wt.m.token, 0)
	}
}

// forgedGrant clears h, a grant to us that the waiting gate holder never
// asked for, and reports it. A grant answers our own request, so no valid
// history makes one; taking it could make two of our goroutines hold at
// once (one took the free word on the fast path, which then names us for
// it). Out of line: waiters' loop stays as it was.
//
//go:noinline
func (m *Mutex) forgedGrant(h uint32) error {
	if m.handoff.CompareAndSwap(h, 0) {
		wakeShared(m.handoff, wakeAll)
	}
	return m.errCorrupt("the hand-off word %#x grants the lock to this process, which did not ask for it", h)
}

// grant hands the lock, held by us as word w, to the requester named by
// request h. It reports false, changing nothing, if the request was
// withdrawn (or replaced) first: the caller then releases as usual.
//
//	h   w            step
//	T   names us     CAS h T → T|granted, then CAS w → T (keeping waiters
//	                 and statistics), wake the hand-off word
func (m *Mutex) grant(w, h uint32) bool {
	// Grant first: from here the requester will take the word when it
	// names it, and a taker from a dead holder knows no caller held it.
	if !m.handoff.CompareAndSwap(h, h|handoffGranted) {
		return false
	}
	for range retryLimit { // a CAS fails only if a flag changed
		// Move the word to the requester, keeping waiters (others may
		// sleep) and statistics; the timed bit described our hold.
		if m.word.CompareAndSwap(w, w&(sharedStats|sharedWaiters)|h) {
			wakeShared(m.handoff, wakeAll)
			return true
		}
		w = m.word.Load()
		if w&ownerMask != m.token {
			break
		}
	}
	slog.Warn("lockword: Unlock could not hand the lock over: its word keeps changing (corrupt)", "lock", m.name, "region", m.r.path)
	return true
}

// takeFromDead takes the lock, word w, from its dead holder (ok false: the
// word changed first). If the hand-off word then grants the lock to that
// very holder, it had been handed the lock and had not returned it to a
// caller (a grantee clears the grant before it returns), so the take is
// plain (no inconsistent bit, no ErrOwnerDead). Any other state is an
// owner death: the data is marked inconsistent. That includes a grant to
// another process, which means either that the dead holder was handing
// the lock over (it died in Unlock, between its two CASes: reported,
// conservatively) or a stale grant left by a build without the hand-off,
// which takes over from a dead grantee without clearing it: a grant that
// does not name the dead holder proves nothing about its hold. A grant is
// cleared either way: it described the dead holder's hold, or a hand-off
// that this take supersedes.
//
// The hand-off word is read after the CAS, not before: the holder may have
// granted a request between our look and its death, and a word read then
// would call a consistent lock inconsistent and leave the grant behind
// (SPIN found that: models/sharedmutex.pml, -DHANDOFF). Once the word
// names us nobody grants (only a holder does), so the word read after the
// CAS is the one the dead holder left.
//
//	w names dead D; h after the CAS   step
//	no grant                          owner death: word → us|inconsistent
//	D | granted                       plain take-back: clear inconsistent, h → 0
//	U | granted, U not D              owner death; h → 0
func (m *Mutex) takeFromDead(w uint32) (plain, ok bool) {
	// Keep waiters (others may sleep); inconsistent until the hand-off
	// word says otherwise.
	if !m.word.CompareAndSwap(w, w&(sharedStats|sharedWaiters)|sharedInconsistent|m.token) {
		return false, false
	}
	h := m.handoff.Load()
	if h&handoffGranted == 0 {
		return false, true
	}
	if h&ownerMask != w&ownerMask {
		// Granted to another process: not proof that the dead holder
		// held nothing. Report the death; clear the grant.
		if m.handoff.CompareAndSwap(h, 0) {
			wakeShared(m.handoff, wakeAll) // a live grantee asleep on it looks again
		}
		return false, true
	}
	for range retryLimit { // a CAS fails only if a flag changed
		x := m.word.Load()
		if x&ownerMask != m.token || m.word.CompareAndSwap(x, x&^sharedInconsistent) {
			break
		}
	}
	if m.handoff.CompareAndSwap(h, 0) {
		wakeShared(m.handoff, wakeAll) // a live grantee asleep on it looks again
	}
	return true, true
}
