package main

import "testing"

// TestShownName: names that could forge a row or reach the terminal as
// control sequences are quoted; plain ones are printed as they are.
func TestShownName(t *testing.T) {
	for name, want := range map[string]string{
		"orders":        "orders",
		"commandes-été": "commandes-été",
		"a\nb":          `"a\nb"`,
		"\xff\xfe":      `"\xff\xfe"`,
		"red\x1b[31m":   `"red\x1b[31m"`,
		"with space":    `"with space"`,
	} {
		if got := shownName(name); got != want {
			t.Errorf("shownName(%q) = %s, want %s", name, got, want)
		}
	}
}
