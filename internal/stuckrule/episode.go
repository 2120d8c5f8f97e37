// Package stuckrule decides when a stuck lock is reported again: the rule
// the in-process watcher (the root package's stuck.go) and the shared
// locks (shm's diag.go) share, so that a thousand goroutines stuck on one
// lock log one line, not a thousand.
package stuckrule

import "time"

// An Episode is one lock's run of stuck waits: it begins when a wait on
// the lock first passes the stuck threshold and ends when no wait on it
// is past the threshold any more. Within an episode a line is logged
// first, then again only when the stuck state has grown materially:
//
//   - the longest wait has doubled since the last line (a lock stuck for
//     an hour past a 2 s threshold logs about 11 lines: 2 s, 4 s, 8 s, ...),
//   - or the number of waiters has doubled since the last line and a
//     threshold has passed since it (waiters of a flood reach the
//     threshold one by one within moments: without the delay each
//     doubling, 1, 2, 4, ... 1,024, would log a line).
//
// The zero Episode is none in progress. An Episode is not safe for
// concurrent use: its owner serialises calls.
type Episode struct {
	open    bool
	waiters int           // at the last line
	longest time.Duration // at the last line
	at      time.Time     // of the last line
}

// Due reports whether a look at now, which found waiters waits past the
// threshold on the lock (at least one), the longest lasting longest,
// should log a line; if so it records that line. It opens the episode if
// none is in progress.
func (e *Episode) Due(waiters int, longest, threshold time.Duration, now time.Time) bool {
	switch {
	case !e.open:
	case longest >= 2*e.longest:
	case waiters >= 2*e.waiters && now.Sub(e.at) >= threshold:
	default:
		return false
	}
	*e = Episode{open: true, waiters: waiters, longest: longest, at: now}
	return true
}

// End ends the episode: no wait on the lock is past the threshold. The
// next wait that passes it opens a new one, reported afresh.
func (e *Episode) End() { *e = Episode{} }
