//go:build !linux

package torture

func gettid() int { return 0 }

// threadRunqueueNs: no per-thread scheduler statistics here.
func threadRunqueueNs(int) (int64, bool) { return 0, false }
