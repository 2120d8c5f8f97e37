//go:build lockword_deadlock

package lockword

// deadlockBuilt: this build has deadlock detection compiled in (the
// lockword_deadlock build tag), on from the start.
const deadlockBuilt = true

func init() { lockTracking.Store(1) }
