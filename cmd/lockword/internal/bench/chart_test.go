package bench

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	if err := WriteChart(&buf, c, SVG, DefaultChartWidthPx, c.DefaultChartHeightPx()); err != nil {
		t.Fatal(err)
	}
	got := svgStructure(t, buf.Bytes())
	for _, want := range []string{
		`svg 750pt x 607.5pt`, // 1000 x 810 px at 96 per inch
		`text "Test CPU 3000, 2 cores, GOMAXPROCS 2, linux/amd64 6.1, go1.26.0, load average 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end, 2026-12-01 09:00 UTC"`,
		`text "a note"`,
		`text "million acq/s (log scale)"`,   // 100 M/s over 1 M/s
		`text "million items/s (log scale)"`, // 200 over 20: log all the same
		`text "sync.Mutex (peer)"`, `text "Mutex (vs sync.Mutex)"`, `text "TicketMutex (vs sync.Mutex)"`,
		`text "Ring batch (vs chan [64])"`,
		`text "chan [64]"`, // the queue bars named under them
		`text "Exclusive locks: wait for the lock at 16 goroutines (CDF)"`,
		`text "0.12×"`, `text "1.50×"`, // ratios over the bars
		`text "99.9%"`, `text "1us"`, // the CDF's axes
		`text "10"`,      // a log axis's labels
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

// TestChartZeroThroughput: a round, a median or a whole panel that
// measured nothing (0: a short sample on a loaded machine) is drawn at the
// bottom of the log axis, not a panic of the log scale.
func TestChartZeroThroughput(t *testing.T) {
	for _, zero := range []func(s *Summary){
		func(s *Summary) { s.Lo = 0 },
		func(s *Summary) { s.Lo, s.OpsPerSec = 0, 0 },
		func(s *Summary) { s.Lo, s.OpsPerSec, s.Hi = 0, 0, 0 },
	} {
		for _, all := range []bool{false, true} {
			c := fixedChart()
			for i := range c.Sums {
				if all || i == 0 {
					zero(&c.Sums[i])
				}
			}
			if err := WriteChart(io.Discard, c, SVG, DefaultChartWidthPx, c.DefaultChartHeightPx()); err != nil {
				t.Fatal(err)
			}
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

// TestChartLayout asserts the layout a reader relies on, so that a golden
// file rewritten from a broken chart still fails: every panel carries its
// own legend, inside it (not in a column of its own, far from its bars);
// every throughput panel has the same (log) axis, whatever the spread of
// its figures; and the image leaves no blank area a third of a panel's
// size (a missing panel).
func TestChartLayout(t *testing.T) {
	c := fixedChart()
	for _, r := range c.rows() {
		for _, p := range []*plot.Plot{r.bars, r.cdf} {
			if p == nil {
				continue
			}
			data := p.DataCanvas(draw.New(vgimg.New(px(DefaultChartWidthPx/2), px(panelHeightPx))))
			lr := p.Legend.Rectangle(data)
			if lr.Size().Y <= 0 || lr.Size().Y > data.Size().Y || lr.Size().X > data.Size().X {
				t.Errorf("panel %q: its legend (%v) is not inside its data area (%v)", p.Title.Text, lr.Size(), data.Size())
			}
		}
		if _, ok := r.bars.Y.Scale.(plot.LogScale); !ok {
			t.Errorf("panel %q: a linear throughput axis beside log ones", r.bars.Title.Text)
		}
	}

	var buf bytes.Buffer
	w, h := DefaultChartWidthPx, c.DefaultChartHeightPx()
	if err := WriteChart(&buf, c, PNG, w, h); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	x, y, bw, bh := largestBlank(img, 8)
	if limit := w / 2 * panelHeightPx / 3; bw*bh > limit {
		t.Errorf("the %dx%d chart leaves a blank %dx%d area at (%d,%d): over a third of a panel (%d px²)", w, h, bw, bh, x, y, limit)
	}
}

// largestBlank is the largest rectangle of img, in whole cells of cell x
// cell pixels, where every pixel is white: its corner and size in pixels.
func largestBlank(img image.Image, cell int) (x, y, w, h int) {
	b := img.Bounds()
	cols, rows := b.Dx()/cell, b.Dy()/cell
	blank := func(cx, cy int) bool {
		for py := cy * cell; py < (cy+1)*cell; py++ {
			for px := cx * cell; px < (cx+1)*cell; px++ {
				r, g, bl, _ := img.At(b.Min.X+px, b.Min.Y+py).RGBA()
				if r < 0xf800 || g < 0xf800 || bl < 0xf800 {
					return false
				}
			}
		}
		return true
	}
	// The largest rectangle under a histogram, row by row: heights[i]
	// is how many blank cells end at this row in column i.
	heights := make([]int, cols)
	best := 0
	for cy := 0; cy < rows; cy++ {
		for cx := 0; cx < cols; cx++ {
			if blank(cx, cy) {
				heights[cx]++
			} else {
				heights[cx] = 0
			}
		}
		for i := 0; i < cols; i++ {
			hmin := heights[i]
			for j := i; j < cols && hmin > 0; j++ {
				hmin = min(hmin, heights[j])
				if a := (j - i + 1) * hmin; a > best {
					best, x, y, w, h = a, i, cy-hmin+1, j-i+1, hmin
				}
			}
		}
	}
	return x * cell, y * cell, w * cell, h * cell
}
