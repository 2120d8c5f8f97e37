package lockword

import (
	"fmt"
	"slices"
	"strings"
)

// The waits-for walk of deadlock detection (deadlock.go), run by the stuck
// watcher for a lock whose wait passed its threshold, and the holders
// that its stuck report names.

// checkDeadlock walks the waits-for graph from lock and reports a cycle
// found there, once per cycle.
func checkDeadlock(lock any) {
	tracker.mu.Lock()
	var found []DeadlockReport
	if members := findCycle(lock); members != nil && firstReport(cycleKey(members)) {
		found = append(found, DeadlockReport{Cycle: true, Members: members})
	}
	tracker.mu.Unlock()
	report(found)
}

// A walkStep is a goroutine on the walk, reached through its hold on the
// lock that the step before waits for.
type walkStep struct {
	gid uint64
	via *hold
}

// findCycle returns the members of a waits-for cycle reachable from
// lock's holders, or nil: a depth-first walk, holder → the lock it waits
// for → that lock's holders, that stops at the first goroutine met twice
// on the path. It is a variable so that a test can break it (and see the
// test fail). The caller holds tracker.mu.
var findCycle = func(lock any) []DeadlockMember {
	var path []walkStep
	seen := map[uint64]bool{} // goroutines whose walk found no cycle
	var visit func(h *hold) []DeadlockMember
	visit = func(h *hold) []DeadlockMember {
		if i := slices.IndexFunc(path, func(s walkStep) bool { return s.gid == h.gid }); i >= 0 {
			// Back at path[i]: it holds, by h, what the last step waits for.
			cycle := slices.Clone(path[i:])
			cycle[0].via = h
			return cycleMembers(cycle)
		}
		g := tracker.goroutines[h.gid]
		if seen[h.gid] || g == nil || g.waiting == nil {
			return nil
		}
		path = append(path, walkStep{gid: h.gid, via: h})
		for _, next := range tracker.holders[g.waiting.lock] {
			if m := visit(next); m != nil {
				return m
			}
		}
		path = path[:len(path)-1]
		seen[h.gid] = true
		return nil
	}
	for _, h := range tracker.holders[lock] {
		if m := visit(h); m != nil {
			return m
		}
	}
	return nil
}

// cycleMembers describes each step of a cycle: what it holds (the lock
// the step before it waits for) and what it waits for.
func cycleMembers(cycle []walkStep) []DeadlockMember {
	members := make([]DeadlockMember, len(cycle))
	for i, s := range cycle {
		g := tracker.goroutines[s.gid]
		members[i] = DeadlockMember{Goroutine: s.gid, Held: s.via.ref.id(), HeldStack: formatStack(s.via.stack),
			Wanted: g.waiting.id(), WantedStack: formatStack(g.waitStack)}
	}
	return members
}

// cycleKey names a cycle whatever member the walk entered it by.
func cycleKey(members []DeadlockMember) string {
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = fmt.Sprintf("%d:%#x", m.Goroutine, m.Held.Addr)
	}
	slices.Sort(keys)
	return "cycle " + strings.Join(keys, " ")
}

// holderAttrs returns, for a stuck report on lock, its holders and where
// they acquired it; nil if detection is off or no holder is recorded.
func holderAttrs(lock any) []any {
	if lockTracking.Load() == 0 {
		return nil
	}
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	hs := tracker.holders[lock]
	if len(hs) == 0 {
		return nil
	}
	var gids []string
	var b strings.Builder
	for _, h := range hs {
		gids = append(gids, fmt.Sprint(h.gid))
		fmt.Fprintf(&b, "goroutine %d acquired it at:\n%s", h.gid, formatStack(h.stack))
	}
	return []any{"holder_goroutines", strings.Join(gids, ","), "holder_stacks", b.String()}
}
