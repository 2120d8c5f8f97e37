package locktest

// SpinWork burns roughly n small steps of CPU, to model work inside and
// outside a critical section in the hammers and benchmarks.
//
//go:noinline
func SpinWork(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*31 + i
	}
	return x
}
