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
// Each sample is a stack that waited for a lockword lock, with two values:
// contentions (the number of waits) and delay (their total, in
// nanoseconds), both scaled by the rate as the runtime scales its mutex
// profile. The stack is the waiter's, whose leaf is the function that
// called Lock (see the root package's contention.go for why the waiter's
// and not the unlocker's).
package lockprof

import (
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
// far.
func Profile() *profile.Profile {
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

// WriteTo writes the contention profile to w, gzip-compressed protobuf as
// `go tool pprof` reads it.
func WriteTo(w io.Writer) error { return Profile().Write(w) }

// Handler serves the contention profile, as net/http/pprof serves the
// runtime's profiles.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="lockword-contention"`)
		if err := WriteTo(w); err != nil {
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
