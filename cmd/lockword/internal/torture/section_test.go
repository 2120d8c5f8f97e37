package torture

import (
	"math/rand/v2"
	"testing"
)

// TestSectionsAgree checks that the instrumented critical section and its
// go:norace copy compute the same thing: the none kind must prove the
// checks of the real kinds, not of some other code.
func TestSectionsAgree(t *testing.T) {
	var a, b arena
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		id, steps, yield := 1+rng.IntN(8), rng.IntN(50), i%2 == 0
		if i%100 == 0 {
			// An intruder left its id in the slot: both must count it.
			a.owner, b.owner = 99, 99
		}
		a.section(id, 7, steps, yield)
		b.sectionUnprotected(id, 7, steps, yield)
	}
	if a.counter != 7000 || a.counter != b.counter || a.sink != b.sink || a.owner != b.owner ||
		a.violations.Load() != 10 || a.violations.Load() != b.violations.Load() {
		t.Errorf("section: counter %d, sink %x, owner %d, violations %d; sectionUnprotected: %d, %x, %d, %d; want counter 7000, 10 violations, equal",
			a.counter, a.sink, a.owner, a.violations.Load(), b.counter, b.sink, b.owner, b.violations.Load())
	}
}
