// Package lockprof writes lockword's contention profile in the pprof
// format, for `go tool pprof`: the counterpart, for lockword's locks, of
// the runtime's mutex profile (/debug/pprof/mutex), which covers
// sync.Mutex and sync.RWMutex only.
//
// Turn sampling on with lockword.SetContentionProfileRate (off by
// default, as runtime.SetMutexProfileFraction), then write the profile
// with WriteTo or serve it with Handler next to net/http/pprof:
//
//	lockword.SetContentionProfileRate(100)
//	http.Handle("/debug/pprof/lockword", lockprof.Handler())
//
// Each sample has two values: contentions (the number of waits) and delay
// (their total, in nanoseconds), both scaled by the rate as the runtime
// scales its mutex profile. There are two profiles of the same waits:
//
//   - Profile, WriteTo and Handler charge a wait to the stack that ended
//     it, the Unlock (or RUnlock, Release) that woke the waiter, with the
//     time it slept: the runtime's convention for /debug/pprof/mutex, so
//     that the top of the profile is the code that holds locks others
//     wait for. Shared locks' waits that sleep in the kernel are not in
//     it: their unlocker may be another process.
//   - WaiterProfile, WriteWaitersTo and Handler with ?view=waiter charge
//     it to the waiter's stack, whose leaf is the function that called
//     Lock, with the whole wait: who waits, and where; shared locks
//     included.
//
// They are two profiles, not one with a label per sample: pprof sums every
// sample of a profile, so one file holding both would count each wait
// twice in every total unless each reader remembered to filter by label.
package lockprof

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/lockword/lockword"
)

// Profile builds the contention profile from the records collected so
// far, each wait charged to the Unlock that woke it (Go's convention).
func Profile() *profile.Profile { return build(lockword.ContentionUnlocker) }

// WaiterProfile builds the contention profile from the records collected
// so far, each wait charged to the waiter's stack.
func WaiterProfile() *profile.Profile { return build(lockword.ContentionWaiter) }

// build builds view's profile.
func build(view lockword.ContentionView) *profile.Profile {
	records, rate := lockword.ContentionProfile()
	rate = max(rate, 1)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "contentions", Unit: "count"}, {Type: "delay", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "contentions", Unit: "count"},
		Period:     int64(rate),
		TimeNanos:  time.Now().UnixNano(),
	}
	// One mapping, the executable, already symbolized: pprof then needs
	// no binary to name the functions.
	exe, _ := os.Executable()
	p.Mapping = []*profile.Mapping{{ID: 1, File: exe, HasFunctions: true, HasFilenames: true, HasLineNumbers: true}}
	b := builder{p: p, locs: map[uintptr]*profile.Location{}, funcs: map[string]*profile.Function{}}
	for _, r := range records {
		if r.View != view {
			continue
		}
		locs := b.stack(r.Stack)
		if len(locs) == 0 {
			continue
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: locs,
			Value:    []int64{r.Count * int64(rate), int64(r.Delay) * int64(rate)},
		})
	}
	return p
}

// WriteTo writes the contention profile (Profile) to w, gzip-compressed
// protobuf as `go tool pprof` reads it.
func WriteTo(w io.Writer) error { return Profile().Write(w) }

// WriteWaitersTo writes the waiters' view (WaiterProfile) to w, as
// WriteTo.
func WriteWaitersTo(w io.Writer) error { return WaiterProfile().Write(w) }

// Handler serves the contention profile, as net/http/pprof serves the
// runtime's profiles: Profile, or WaiterProfile when the query has
// view=waiter. Any other view is refused (400 Bad Request), so that a
// mistyped view is not served the other profile unnoticed.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p, name := Profile(), "lockword-contention"
		switch view := req.URL.Query().Get("view"); view {
		case "", "unlocker":
		case "waiter":
			p, name = WaiterProfile(), "lockword-contention-waiters"
		default:
			http.Error(w, fmt.Sprintf("lockprof: unknown view %q: want waiter, or none (the unlockers' view)", view), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
		if err := p.Write(w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// builder turns program counters into the profile's locations and
// functions, each made once.
type builder struct {
	p     *profile.Profile
	locs  map[uintptr]*profile.Location
	funcs map[string]*profile.Function
}

// stack returns the locations of a recorded stack, innermost first, less
// the lockword frames at its top (the lock's methods and slow path), so
// that the leaf is the caller of Lock.
func (b *builder) stack(pcs []uintptr) []*profile.Location {
	var locs []*profile.Location
	inLock := true
	for _, pc := range pcs {
		loc := b.location(pc, &inLock)
		if loc != nil {
			locs = append(locs, loc)
		}
	}
	return locs
}

// location returns pc's location: one line per frame, inlined frames
// included; while inLock, the lockword frames are left out (and the
// location too, if nothing is left).
func (b *builder) location(pc uintptr, inLock *bool) *profile.Location {
	if !*inLock {
		if loc, ok := b.locs[pc]; ok {
			return loc
		}
	}
	frames := runtime.CallersFrames([]uintptr{pc})
	var lines []profile.Line
	for {
		f, more := frames.Next()
		if *inLock && lockwordFrame(f.Function) {
			if !more {
				break
			}
			continue
		}
		*inLock = false
		lines = append(lines, profile.Line{Function: b.function(f), Line: int64(f.Line)})
		if !more {
			break
		}
	}
	if len(lines) == 0 {
		return nil
	}
	loc := &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: b.p.Mapping[0], Address: uint64(pc), Line: lines}
	b.p.Location = append(b.p.Location, loc)
	b.locs[pc] = loc
	return loc
}

func (b *builder) function(f runtime.Frame) *profile.Function {
	if fn, ok := b.funcs[f.Function]; ok {
		return fn
	}
	fn := &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: f.Function, SystemName: f.Function, Filename: f.File}
	b.p.Function = append(b.p.Function, fn)
	b.funcs[f.Function] = fn
	return fn
}

// lockwordFrame reports whether fn belongs to lockword's locks (the root
// package, shm, internal packages) rather than to their caller. The
// root package's own tests and examples are callers.
func lockwordFrame(fn string) bool {
	const root = "github.com/lockword/lockword."
	switch {
	case strings.HasPrefix(fn, root):
		rest := fn[len(root):]
		return !strings.HasPrefix(rest, "Test") && !strings.HasPrefix(rest, "Benchmark") && !strings.HasPrefix(rest, "Example")
	case strings.HasPrefix(fn, "github.com/lockword/lockword/shm."), strings.HasPrefix(fn, "github.com/lockword/lockword/internal/"):
		return true
	}
	return false
}
