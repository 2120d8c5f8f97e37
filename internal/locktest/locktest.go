// Package locktest holds the test helpers that the tests of package
// lockword and package shm share: the sizes of the hammers and the
// watchdog that turns a hung lock into a loud failure.
package locktest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Long is whether LOCKWORD_LONG=1 asks for the full sizes (the nightly
// run); the everyday run shortens them.
var Long = os.Getenv("LOCKWORD_LONG") == "1"

// Scaled shortens n for the everyday run: to a tenth under -short, and to
// a twentieth under the race detector, which slows the hammers about
// tenfold. Each check and its broken-lock twin are the same at every
// size; what a bigger size adds is more chances at a rare interleaving,
// which the nightly LOCKWORD_LONG=1 run (full sizes) is for.
func Scaled(n int) int {
	if Long {
		return n
	}
	if testing.Short() {
		n /= 10
	}
	if RaceEnabled {
		n /= 20
	}
	return max(n, 100)
}

// Watchdog panics with every goroutine's stack if the returned stop
// function is not called within d: a hung lock fails loudly and says where
// everyone is waiting.
func Watchdog(what string, d time.Duration) (stop func()) {
	t := time.AfterFunc(d, func() {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("%s: no completion after %v (lost wake-up or deadlock?)\n%s", what, d, buf))
	})
	return func() { t.Stop() }
}
