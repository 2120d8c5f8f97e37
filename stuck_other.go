//go:build !linux

package lockword

import "time"

// stuckSleep sleeps for d. Without Linux's futex the stuck watcher sleeps
// on a runtime timer, whose cost to the scheduler while it is pending
// stuck_linux.go avoids.
func stuckSleep(d time.Duration) { time.Sleep(d) }
