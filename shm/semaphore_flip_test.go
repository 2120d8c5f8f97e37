//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/lockword/lockword"
)

// TestSharedSemaphoreFlippedBytes is the new user's experiment made
// deterministic: two handles (two Regions, each a process-table slot, as
// two processes are) hold permits; 8 bytes are XORed with seeded random
// values at each word of the header and of both handles' entries; then
// each handle acquires once more and releases all it holds, and each
// Region closes. Corruption must show as a *lockword.CorruptError naming
// the Semaphore (returned, or the value Release panics with), never as a
// misuse panic for permits the handle did acquire, never as an error that
// names the guard's Mutex, and Close must finish: a Region whose handle
// released everything it acquired is not busy.
//
// No timing assumption: a call that waits (counts flipped to look full)
// ends with its context, which counts as holding nothing.
func TestSharedSemaphoreFlippedBytes(t *testing.T) {
	defer watchdog("shared semaphore flipped bytes", 2*time.Minute)()
	var offs []uint64
	for off := uint64(0); off < semObjSlots; off += 4 {
		offs = append(offs, off)
	}
	// Every seed finds the old faults; the new user's six run in the
	// long run only (each costs about 1 s under -race on 2 loaded cores).
	seeds := []uint64{1, 2}
	if os.Getenv("LOCKWORD_LONG") != "" {
		seeds = []uint64{1, 2, 3, 4, 5, 6}
	}
	var bad []string
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 23))
		// The handles' slots are known once a region is made: the
		// entries' words are added per case below.
		for i := 0; i < len(offs)+8; i++ {
			if msg := semFlipCase(t, rng, offs, i); msg != "" {
				bad = append(bad, fmt.Sprintf("seed %d: %s", seed, msg))
			}
		}
	}
	for _, m := range bad {
		t.Error(m)
	}
}

// semFlipCase runs one case of TestSharedSemaphoreFlippedBytes: the i'th
// word of offs, or past them the words of the two entries, and returns
// what went wrong ("" if nothing).
func semFlipCase(t *testing.T, rng *rand.Rand, offs []uint64, i int) string {
	path := tempRegionPath(t)
	r1 := mustCreate(t, path, 0)
	r2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	var sems [2]*Semaphore
	for j, r := range []*Region{r1, r2} {
		if sems[j], err = r.Semaphore("sem", 4); err != nil {
			t.Fatal(err)
		}
	}
	off := uint64(0)
	if i < len(offs) {
		off = offs[i]
	} else {
		i -= len(offs)
		off = semSlotOff(sems[i/4].r.slot) + 4*uint64(i%4)
	}
	held := [2]int64{}
	for j, s := range sems {
		if err := s.Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		held[j] = 1
	}
	for k := range uint64(8) {
		if off+k < uint64(len(sems[0].obj)) {
			sems[0].obj[off+k] ^= byte(1 + rng.IntN(255))
		}
	}
	where := fmt.Sprintf("bytes at %d", off)
	for j, s := range sems {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := s.Acquire(ctx, 1)
		cancel()
		if err == nil || errors.Is(err, lockword.ErrOwnerDead) {
			held[j]++
		} else if msg := semFlipNamesSemaphore(err); msg != "" {
			return fmt.Sprintf("%s: handle %d: Acquire: %s", where, j, msg)
		}
		if msg := semFlipRelease(s, held[j]); msg != "" {
			return fmt.Sprintf("%s: handle %d: Release(%d) after Acquire: %s", where, j, held[j], msg)
		}
	}
	for j, r := range []*Region{r1, r2} {
		err := r.Close()
		if errors.Is(err, lockword.ErrCorrupt) {
			err = r.Close() // once: the next Close finishes
		}
		if err != nil {
			return fmt.Sprintf("%s: handle %d: Close (Held %d): %v", where, j, sems[j].Held(), err)
		}
	}
	return ""
}

// semFlipRelease releases n permits of s and returns what was wrong with
// a panic: only a CorruptError naming the Semaphore is right.
func semFlipRelease(s *Semaphore, n int64) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			err, ok := p.(error)
			if !ok {
				msg = fmt.Sprintf("panicked with %v, want a CorruptError", p)
				return
			}
			if msg = semFlipNamesSemaphore(err); msg == "" && !errors.Is(err, lockword.ErrCorrupt) {
				msg = fmt.Sprintf("panicked with %v, want a CorruptError", err)
			}
		}
	}()
	s.Release(n)
	return ""
}

// semFlipNamesSemaphore returns what is wrong with a call's error: a
// CorruptError must name the Semaphore "sem", not its guard.
func semFlipNamesSemaphore(err error) string {
	var ce *lockword.CorruptError
	if errors.As(err, &ce) && (ce.Kind != "Semaphore" || ce.Object != "sem") {
		return fmt.Sprintf("%v: names %s %q, want Semaphore \"sem\"", err, ce.Kind, ce.Object)
	}
	return ""
}
