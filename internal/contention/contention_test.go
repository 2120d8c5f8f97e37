package contention

import "testing"

// TestBeginSamplesOneInRate: Begin samples one wait in rate, 0 never and
// 1 always. 40,000 draws at rate 4: 10,000 expected, sd 87; the bound is
// 6 sd, so a correct draw fails it about once in 10^9 runs.
func TestBeginSamplesOneInRate(t *testing.T) {
	defer SetRate(SetRate(4))
	n := 0
	for range 40000 {
		if Begin() != 0 {
			n++
		}
	}
	if n < 10000-522 || n > 10000+522 {
		t.Errorf("rate 4: %d of 40000 sampled, want 10000 ± 522", n)
	}
	SetRate(0)
	if Begin() != 0 {
		t.Fatal("rate 0: a wait sampled")
	}
	SetRate(1)
	for range 1000 {
		if Begin() == 0 {
			t.Fatal("rate 1: a wait unsampled")
		}
	}
	for range 100 { // rates past 2^32: math/rand/v2, one in 2^40 here
		if sampled(1 << 40) {
			t.Fatal("rate 2^40: sampled in 100 draws")
		}
	}
}
