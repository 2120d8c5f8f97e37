//go:build linux

package lockword

import (
	"encoding/json"
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
	info, err := InspectRegion(path)
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
	if want := []string{"held_for_known", "holder_alive", "kind", "name", "offset", "size_bytes", "state", "waiters", "word"}; !slices.Equal(keys(lock), want) || lock["state"] != "free" {
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
