//go:build race

package locktest

// RaceEnabled is whether the race detector is on.
const RaceEnabled = true
