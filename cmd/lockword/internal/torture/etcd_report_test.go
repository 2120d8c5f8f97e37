package torture

import (
	"bytes"
	"testing"
)

// TestWriteVerdictJSON: the etcd kinds' JSON reports say PASS with no
// failures key, or FAIL with the failures, on one line.
func TestWriteVerdictJSON(t *testing.T) {
	for _, c := range []struct {
		failures []string
		want     string
	}{
		{nil, `{"lock":"etcd","result":"PASS"}` + "\n"},
		{[]string{"hangs", "late writes"}, `{"failures":["hangs","late writes"],"lock":"etcd","result":"FAIL"}` + "\n"},
	} {
		var b bytes.Buffer
		if err := writeVerdictJSON(&b, map[string]any{"lock": "etcd"}, c.failures); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("failures %q: wrote %s, want %s", c.failures, b.String(), c.want)
		}
	}
}
