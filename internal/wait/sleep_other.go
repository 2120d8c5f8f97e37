//go:build !linux

package wait

import "time"

// SleepThread sleeps for d. Elsewhere than Linux it is time.Sleep, with
// the cost to the scheduler of a pending runtime timer that the Linux
// version (a blocking clock_nanosleep) avoids.
func SleepThread(d time.Duration) { time.Sleep(d) }
