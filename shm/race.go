//go:build race

package shm

// raceDetector is whether this build runs the race detector (see
// (*Region).close: handles are not detached under it).
const raceDetector = true
