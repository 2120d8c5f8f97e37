package lockword

// noCopy may be embedded in structs that must not be copied after first
// use, so that `go vet` (copylocks) reports copies. See
// https://golang.org/issues/8005#issuecomment-190753527.
type noCopy struct{}

// Lock is a no-op used by the copylocks checker.
func (*noCopy) Lock() {}

// Unlock is a no-op used by the copylocks checker.
func (*noCopy) Unlock() {}
