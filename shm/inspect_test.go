//go:build linux

package shm

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestInspectRegionJSON: a lock carries every field in JSON, also when
// free (word 0, holder_alive false are then true statements); an object
// that is not a lock carries only its name, kind, offset and size, not a
// state "", a word 0 and a dead holder that it never had.
func TestInspectRegionJSON(t *testing.T) {
	path := tempRegionPath(t)
	r := mustCreate(t, path, 0)
	defer r.Close()
	if _, err := r.Mutex("orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Bytes("orders-data", 100); err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Objects []map[string]any `json:"objects"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if len(got.Objects) != 2 {
		t.Fatalf("%s: want two objects", b)
	}
	lock, data := got.Objects[0], got.Objects[1]
	if want := []string{"held_for_known", "held_for_ns", "holder_alive", "kind", "name", "offset", "size_bytes", "state", "waiters", "word"}; !slices.Equal(keys(lock), want) || lock["state"] != "free" {
		t.Errorf("lock: %v, want the fields %v and state free", lock, want)
	}
	if want := []string{"kind", "name", "offset", "size_bytes"}; !slices.Equal(keys(data), want) || data["kind"] != "bytes" || data["size_bytes"] != 100.0 {
		t.Errorf("bytes object: %v, want only %v", data, want)
	}
	// The JSON form decodes back to the same ObjectInfo values.
	var back RegionInfo
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.Objects, info.Objects) {
		t.Errorf("round trip: %+v, %v; want %+v", back.Objects, err, info.Objects)
	}
}

// TestInspectRing: Inspect reports a shared ring's roles and their
// liveness, fill level, closed flag and traffic, and impossible indices.
func TestInspectRing(t *testing.T) {
	const capacity = 4096
	r, p, c := ringPair(t, capacity)
	path := r.path
	ctx := context.Background()
	for range 3 {
		if err := p.Send(ctx, make([]byte, 10)); err != nil { // 24 bytes of record each
			t.Fatal(err)
		}
	}
	if _, err := c.Receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	ring := func() RingInfo {
		t.Helper()
		info, err := Inspect(path)
		if err != nil || len(info.Objects) != 1 || info.Objects[0].Ring == nil || info.Objects[0].State != "" {
			t.Fatalf("%+v, %v: want one ring, not a lock", info, err)
		}
		return *info.Objects[0].Ring
	}
	me := &ProcessInfo{Slot: int(tokenSlot(r.token)), PID: os.Getpid(), Alive: true}
	want := RingInfo{Capacity: capacity, Producer: me, Consumer: me, Used: 48,
		BytesSent: 72, BytesReceived: 24, MessagesSent: 3, MessagesReceived: 1}
	if got := ring(); !ringInfoEqual(got, want) {
		t.Errorf("open ring: %+v, want %+v", got, want)
	}

	p.Close()
	want.Producer, want.Closed = nil, true
	if got := ring(); !ringInfoEqual(got, want) {
		t.Errorf("closed by the producer: %+v, want %+v", got, want)
	}

	obj := ringObject(r, "q")
	dead := deadToken(t, r, 5)
	word32(obj, shringProducerRole).Store(dead)
	want.Producer = &ProcessInfo{Slot: 5, PID: 4194303}
	if got := ring(); !ringInfoEqual(got, want) {
		t.Errorf("dead producer: %+v, want %+v", got, want)
	}

	word64(obj, shringTail).Store(24 + capacity + 8) // more than capacity ahead of head
	if got := ring(); !got.Corrupt || got.Used != 0 {
		t.Errorf("impossible indices: %+v, want corrupt", got)
	}
}

func ringInfoEqual(a, b RingInfo) bool {
	same := func(x, y *ProcessInfo) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	okP, okC := same(a.Producer, b.Producer), same(a.Consumer, b.Consumer)
	a.Producer, a.Consumer, b.Producer, b.Consumer = nil, nil, nil, nil
	return okP && okC && a == b
}

// TestInspectSeqLock: Inspect reports a region SeqLock's sequence,
// its completed Stores, and a Store in progress, torn when its writer is
// dead.
func TestInspectSeqLock(t *testing.T) {
	path, r, s := tornSeqLock(t, "quote")
	s.Store(tornPayload{1, 1001, 1002})
	s.Store(tornPayload{2, 1002, 1004})
	seq := func() (SeqLockInfo, ObjectInfo) {
		t.Helper()
		info, err := Inspect(path)
		if err != nil || len(info.Objects) != 1 || info.Objects[0].SeqLock == nil {
			t.Fatalf("%+v, %v: want one seqlock", info, err)
		}
		return *info.Objects[0].SeqLock, info.Objects[0]
	}
	if got, o := seq(); got != (SeqLockInfo{Sequence: 4, Stores: 2}) || o.State != "free" {
		t.Errorf("at rest: %+v (writers' lock %s), want sequence 4, 2 stores, free", got, o.State)
	}
	// A writer that died mid-Store: the sequence odd, the lock a dead
	// process's.
	s.c.Seq.Store(5)
	s.c.Writer.(seqWriter).m.word.Store(deadToken(t, r, 6))
	if got, o := seq(); got != (SeqLockInfo{Sequence: 5, Stores: 2, Writing: true, Torn: true}) || o.State != "owner-dead" {
		t.Errorf("writer dead mid-Store: %+v (writers' lock %s), want writing and torn", got, o.State)
	}
	// A live writer mid-Store: writing, not torn.
	s.c.Writer.(seqWriter).m.word.Store(r.token)
	if got, _ := seq(); got != (SeqLockInfo{Sequence: 5, Stores: 2, Writing: true}) {
		t.Errorf("live writer mid-Store: %+v, want writing, not torn", got)
	}
	s.c.Writer.(seqWriter).m.word.Store(0)
	s.c.Seq.Store(6)
}
