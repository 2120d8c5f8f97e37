//go:build linux

package shm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzOpenRegion feeds Open and Inspect arbitrary file
// contents: no input may make them panic or touch memory outside the
// mapping, and every region they accept must have all its objects inside
// the object area, aligned. CI runs it briefly (go test -fuzz); the seeds
// below run with every go test.
func FuzzOpenRegion(f *testing.F) {
	valid := validRegionBytes(f)
	f.Add(valid)
	f.Add(valueRegionBytes(f))
	f.Add(valid[:regionArenaOffset])
	f.Add(valid[:64])
	f.Add([]byte{})
	f.Add([]byte("lockword"))
	torn := append([]byte(nil), valid...)
	ne.PutUint32(torn[hdrObjectCount:], regionTableCap)
	reseal(torn)
	f.Add(torn)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog("FuzzOpenRegion input", 10*time.Second)()
		path := filepath.Join(dir, "fuzz")
		os.Remove(path)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path, &Options{InitTimeout: -1})
		if err == nil {
			for name, o := range r.objects {
				k := objectKinds[o.kind]
				if o.offset < regionArenaOffset || o.offset+uint64(o.size) > uint64(len(r.data)) || o.offset%uint64(k.align) != 0 {
					t.Fatalf("accepted object %q out of bounds: %+v in %d bytes", name, o, len(r.data))
				}
				// Looking objects up touches their words.
				switch o.kind {
				case kindMutex:
					m, err := r.Mutex(name)
					if err != nil {
						t.Fatal(err)
					}
					m.word.Load()
				case kindBytes:
					if _, err := r.Bytes(name, int(o.size)); err != nil {
						t.Fatal(err)
					}
				case kindRing:
					// Any error but a panic: a size that is no ring's, a
					// corrupt index (FuzzSharedRingConsumer goes further).
					if c, err := r.RingConsumer(name, int(o.size)-shringData); err == nil {
						c.Receive(doneCtx, nil)
						c.Detach()
					}
				case kindValue:
					// Any T the record does not describe is an error.
					if p, err := Value[uint64](r, name); err == nil {
						_ = *p
					}
				case kindSeqLock:
					if s, err := NewSeqLock[uint64](r, name); err == nil {
						s.LoadContext(doneCtx)
					}
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if info, err := Inspect(path); err == nil && info == nil {
			t.Fatal("InspectRegion returned neither info nor error")
		}
	})
}
