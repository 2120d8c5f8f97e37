//go:build amd64 || arm64

package backoff

// Pause executes the CPU's spin-wait hint cycles times (PAUSE on amd64,
// YIELD on arm64). The hint tells the core that this is a spin loop: it
// saves power, gives a hyper-threaded sibling the pipeline, and avoids the
// memory-order mis-speculation penalty when the awaited store lands.
func Pause(cycles uint32)
