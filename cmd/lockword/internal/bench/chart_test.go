package bench

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"image"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/chart.golden from the chart test")

// fixedChart is a chart of made-up figures: the mutex group with a range
// of throughputs that needs a log axis, the ring group with one that does
// not, waits drawn from fixed distributions.
func fixedChart() *Chart {
	groups := Groups([]string{"mutex", "ticket", "ring", "ring-batch"}, []int{1, 2, 16}, "")
	waits := func(scale int64) *Histogram {
		h := new(Histogram)
		for i := int64(1); i <= 10000; i++ {
			h.Record(20 + i*i%977*scale)
		}
		return h
	}
	sum := func(group, kind string, n int, rate float64, versus []string, ratio float64, w *Histogram, fair float64) Summary {
		s := Summary{Group: group, Kind: kind, Versus: versus, Goroutines: n, Unit: "acq", Rounds: 5,
			OpsPerSec: rate, Lo: rate * 0.9, Hi: rate * 1.1, Waits: w, Fairness: fair}
		if versus != nil {
			s.Ratios = []float64{ratio}
		}
		return s
	}
	peer := []string{"sync.Mutex"}
	sums := []Summary{
		sum("mutex", "sync.Mutex", 1, 80e6, nil, 0, nil, 0),
		sum("mutex", "Mutex", 1, 100e6, peer, 1.25, nil, 0),
		sum("mutex", "TicketMutex", 1, 90e6, peer, 1.125, nil, 0),
		sum("mutex", "sync.Mutex", 2, 20e6, nil, 0, waits(10), 1.5),
		sum("mutex", "Mutex", 2, 30e6, peer, 1.5, waits(8), 1.2),
		sum("mutex", "TicketMutex", 2, 10e6, peer, 0.5, waits(50), 1.01),
		sum("mutex", "sync.Mutex", 16, 8e6, nil, 0, waits(1000), 40),
		sum("mutex", "Mutex", 16, 12e6, peer, 1.5, waits(700), 9),
		sum("mutex", "TicketMutex", 16, 1e6, peer, 0.125, waits(5000), 1.02),
		sum("ring", "chan", 2, 20e6, nil, 0, nil, 0),
		sum("ring", "Ring", 2, 40e6, []string{"chan"}, 2, nil, 0),
		sum("ring", "chan [64]", 2, 100e6, nil, 0, nil, 0),
		sum("ring", "Ring batch", 2, 200e6, []string{"chan [64]"}, 2, nil, 0),
	}
	m := Machine{CPU: "Test CPU 3000", Cores: 2, GOMAXPROCS: 2, OS: "linux/amd64 6.1", Go: "go1.26.0",
		LoadStart: "0.10 0.20 0.30", LoadEnd: "0.40 0.50 0.60", Date: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	return &Chart{Groups: groups, Sums: sums, Machine: m, Settings: "lockword bench -test: 5 rounds of 150ms", Note: "a note"}
}

// svgElem is the part of an SVG element the structure check reads.
type svgElem struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Kids    []svgElem  `xml:",any"`
}

// svgStructure lists what a reader sees in an SVG, independent of exact
// coordinates: its size, then every text in drawing order, then how many
// filled shapes of each color (bars, legend swatches, backgrounds).
func svgStructure(t *testing.T, svg []byte) string {
	t.Helper()
	var root svgElem
	if err := xml.Unmarshal(svg, &root); err != nil {
		t.Fatalf("the SVG does not parse as XML: %v", err)
	}
	var b strings.Builder
	attr := func(e *svgElem, name string) string {
		for _, a := range e.Attrs {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	fmt.Fprintf(&b, "svg %s x %s\n", attr(&root, "width"), attr(&root, "height"))
	fills := map[string]int{}
	var walk func(e *svgElem)
	walk = func(e *svgElem) {
		switch e.XMLName.Local {
		case "text":
			fmt.Fprintf(&b, "text %q\n", strings.TrimSpace(e.Text))
		case "path":
			if st := attr(e, "style"); strings.HasPrefix(st, "fill:") {
				fills[strings.TrimPrefix(st, "fill:")]++
			}
		}
		for i := range e.Kids {
			walk(&e.Kids[i])
		}
	}
	walk(&root)
	for _, c := range []string{"#FFFFFF", "#6B6B6B", "#B0B0B0", "#1F77B4", "#FF7F0E", "#2CA02C"} {
		fmt.Fprintf(&b, "fill %s %d\n", c, fills[c])
	}
	return b.String()
}

// TestChartSVGGolden draws the fixed chart as an SVG and compares its
// structure (size, texts, filled shapes by color) with
// testdata/chart.golden; go test -run TestChartSVGGolden -update rewrites
// it. Besides the golden comparison it asserts the parts the issue names,
// so that a golden file rewritten from a broken chart still fails.
func TestChartSVGGolden(t *testing.T) {
	c := fixedChart()
	var buf bytes.Buffer
	if err := WriteChart(&buf, c, SVG, 1400, c.DefaultChartHeightPx()); err != nil {
		t.Fatal(err)
	}
	got := svgStructure(t, buf.Bytes())
	for _, want := range []string{
		`svg 1050pt x 727.5pt`, // 1400 x 970 px at 96 per inch
		`text "Test CPU 3000, 2 cores, GOMAXPROCS 2, linux/amd64 6.1, go1.26.0, load average 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end, 2026-12-01 09:00 UTC"`,
		`text "a note"`,
		`text "million acq/s (log scale)"`, // 100 M/s over 1 M/s: a log axis
		`text "million items/s"`,           // 200 over 20: linear
		`text "sync.Mutex (peer)"`, `text "Mutex (vs sync.Mutex)"`, `text "TicketMutex (vs sync.Mutex)"`,
		`text "Ring batch (vs chan [64])"`,
		`text "Wait for the lock at 16 goroutines (CDF)"`,
		`text "0.12x"`, `text "1.50x"`, // ratios over the bars
		`text "99.9%"`, `text "1us"`, // the CDF's axes
		`text "250"`,     // a linear axis's labels, without trailing zeros
		"fill #1F77B4 6", // Mutex's 3 bars, Ring's 1, a legend swatch for each
		"fill #FF7F0E 6", // TicketMutex's 3, Ring batch's 1, two swatches
		"fill #B0B0B0 2", // chan [64]'s bar and swatch
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("the chart lacks %s", want)
		}
	}
	golden := filepath.Join("testdata", "chart.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("the chart's structure changed; diff against %s, and rerun with -update if intended:\n%s", golden, got)
	}
}

// TestChartPNG draws the fixed chart as a PNG at two sizes: each must
// decode as a PNG of exactly the size asked for.
func TestChartPNG(t *testing.T) {
	c := fixedChart()
	for _, size := range [][2]int{{480, 360}, {640, 520}} { // small: rasterizing is slow under -race
		var buf bytes.Buffer
		if err := WriteChart(&buf, c, PNG, size[0], size[1]); err != nil {
			t.Fatal(err)
		}
		img, format, err := image.Decode(&buf)
		if err != nil {
			t.Fatalf("%dx%d: %v", size[0], size[1], err)
		}
		if b := img.Bounds(); format != "png" || b.Dx() != size[0] || b.Dy() != size[1] {
			t.Errorf("asked for %dx%d, got a %s of %dx%d", size[0], size[1], format, b.Dx(), b.Dy())
		}
	}
}

func TestChartErrors(t *testing.T) {
	c := fixedChart()
	for _, tc := range []struct {
		c      *Chart
		format string
		w, h   int
	}{{c, "gif", 800, 600}, {c, SVG, 10, 10}, {&Chart{}, SVG, 800, 600}} {
		if err := WriteChart(io.Discard, tc.c, tc.format, tc.w, tc.h); err == nil {
			t.Errorf("WriteChart(%s, %dx%d): no error", tc.format, tc.w, tc.h)
		}
	}
}
