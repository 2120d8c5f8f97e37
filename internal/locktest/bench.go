package locktest

import (
	"sync"
	"testing"
	"time"
)

// RunShared runs goroutines that share b.N iterations: once all are
// started and the timer reset, goroutine g runs body(g, n) for its share
// of n iterations (the shares differ by one at most). It then reports
// b.N in millions per second, as unit ("Macq/s", "Mops/s").
func RunShared(b *testing.B, goroutines int, unit string, body func(g, n int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	per, extra := b.N/goroutines, b.N%goroutines
	for g := range goroutines {
		n := per
		if g < extra {
			n++
		}
		wg.Go(func() {
			<-start
			body(g, n)
		})
	}
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds()/1e6, unit)
}
