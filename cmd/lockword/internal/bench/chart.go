package bench

// Charts of a run, drawn with gonum.org/v1/plot: for each group a panel of
// grouped bars (throughput per goroutine count on a log axis, each
// lockword kind beside its peer, whiskers from the slowest to the fastest
// round, the ratio to the peer above each kind's bar) and, where waits
// were timed, a panel of the wait-time CDFs at one goroutine count; each
// panel carries its own legend; a caption with the machine and the run's
// settings on top. Panels sit two to a row, a panel of many bars across a
// whole row, so that each bar's label fits above it and no cell is left
// empty. The library never imports this: the plotting dependency stays in
// cmd/.

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A Chart is what WriteChart draws.
type Chart struct {
	Groups  []Group
	Sums    []Summary
	Machine Machine
	// Settings describes the run for the caption: "lockword bench
	// -duration 150ms -count 5, section empty, rw reads 99%".
	Settings string
	Note     string // an extra caption line, "" for none
}

// Chart formats.
const (
	SVG = "svg"
	PNG = "png"
)

// chartDPI is the PNG's pixels per inch: a chart of WidthPx is
// WidthPx/chartDPI inches wide in every format.
const chartDPI = 96

// Default chart geometry in pixels. The width is what a Markdown page on
// GitHub shows without scaling the image down much (its column is about
// 900-1000 px), so that the font sizes below read at 100% zoom.
const (
	DefaultChartWidthPx = 1000
	panelHeightPx       = 340
	headerHeightPx      = 130
)

// Font sizes in points (4/3 px each at chartDPI).
const (
	titlePt   = 12
	axisPt    = 10.5
	tickPt    = 10
	legendPt  = 10
	ratioPt   = 9.5
	captionPt = 10
)

// halfPanelBars is the most bars a half-width panel holds: beyond it a
// ratio label ("0.47×", about 30 px) would be wider than its bar.
const halfPanelBars = 12

// DefaultChartHeightPx is the height that gives each row of panels
// panelHeightPx.
func (c *Chart) DefaultChartHeightPx() int {
	return headerHeightPx + panelHeightPx*len(layout(c.rows()))
}

// px converts pixels to the plot's points.
func px(n int) vg.Length { return vg.Length(n) * vg.Inch / chartDPI }

// WriteChart draws c as format (SVG or PNG) of widthPx x heightPx pixels
// (at 96 per inch for an SVG) to w.
func WriteChart(w io.Writer, c *Chart, format string, widthPx, heightPx int) error {
	if widthPx < 400 || heightPx < 300 {
		return fmt.Errorf("chart size %dx%d: at least 400x300 pixels", widthPx, heightPx)
	}
	rows := c.rows()
	if len(rows) == 0 {
		return errors.New("nothing measured to chart")
	}
	W, H := px(widthPx), px(heightPx)
	var canvas vg.CanvasWriterTo
	switch format {
	case SVG:
		canvas = vgsvg.New(W, H)
	case PNG:
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(W, H), vgimg.UseDPI(chartDPI))}
	default:
		return fmt.Errorf("chart format %q: want %s or %s", format, SVG, PNG)
	}
	dc := draw.New(canvas)
	top := c.drawHeader(dc)

	area := draw.Crop(dc, px(8), -px(12), px(4), top-dc.Max.Y)
	grid := layout(rows)
	rowH := (area.Max.Y - area.Min.Y) / vg.Length(len(grid))
	for i, panels := range grid {
		y1 := area.Max.Y - vg.Length(i)*rowH
		cellW := (area.Max.X - area.Min.X) / vg.Length(len(panels))
		for j, p := range panels {
			x0 := area.Min.X + vg.Length(j)*cellW
			p.Draw(draw.Canvas{Canvas: dc, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x0, Y: y1 - rowH + px(10)}, Max: vg.Point{X: x0 + cellW - px(16), Y: y1 - px(8)}}})
		}
	}
	_, err := canvas.WriteTo(w)
	return err
}

// layout places the panels of rows, in order, two to a row of the chart:
// a bars panel of more than halfPanelBars bars takes a row of its own, and
// so does a panel left alone before it or at the end, so that no cell of
// the grid stays empty; a bars panel left alone keeps a half panel's bar
// width, centred, its legend in the margin.
func layout(rows []row) [][]*plot.Plot {
	var grid [][]*plot.Plot
	var pending *plot.Plot // a half-width panel waiting for its neighbour
	var pendingBars bool
	flush := func() {
		if pending == nil {
			return
		}
		if pendingBars {
			n := pending.X.Max - pending.X.Min
			pending.X.Min, pending.X.Max = pending.X.Min-n/2, pending.X.Max+n/2
		}
		grid = append(grid, []*plot.Plot{pending})
		pending = nil
	}
	place := func(p *plot.Plot, wide, bars bool) {
		switch {
		case wide:
			flush()
			grid = append(grid, []*plot.Plot{p})
		case pending != nil:
			grid = append(grid, []*plot.Plot{pending, p})
			pending = nil
		default:
			pending, pendingBars = p, bars
		}
	}
	for _, r := range rows {
		place(r.bars, r.nbars > halfPanelBars, true)
		if r.cdf != nil {
			place(r.cdf, false, false)
		}
	}
	flush()
	return grid
}

// drawHeader draws the title and caption at the top of dc and returns
// the y below them.
func (c *Chart) drawHeader(dc draw.Canvas) vg.Length {
	sty := plot.New().Title.TextStyle
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YTop
	x, y := dc.Min.X+px(12), dc.Max.Y-px(10)
	sty.Font.Size = vg.Points(15)
	dc.FillText(sty, vg.Point{X: x, Y: y}, "lockword bench: each lockword lock beside its peer, measured in one interleaved run")
	y -= px(28)
	sty.Font.Size = vg.Points(captionPt)
	width := dc.Max.X - x - px(12)
	lines := wrapAt(sty, c.Machine.String(), ", ", width)
	lines = append(lines, wrapAt(sty, c.Settings, " ", width)...)
	if c.Note != "" {
		lines = append(lines, wrapAt(sty, c.Note, " ", width)...)
	}
	lines = append(lines, "Bars: median throughput of the rounds (log scale); whiskers: slowest..fastest round; "+
		"over a kind's bar: its throughput over its peer's. CDFs: the wait of one Lock in 32, timed.")
	for _, l := range lines {
		dc.FillText(sty, vg.Point{X: x, Y: y}, l)
		y -= px(17)
	}
	return y
}

// wrapAt splits s into lines no wider than width in style sty, breaking
// after sep.
func wrapAt(sty draw.TextStyle, s, sep string, width vg.Length) []string {
	var lines []string
	line := ""
	for _, part := range strings.SplitAfter(s, sep) {
		if line != "" && sty.Width(line+part) > width {
			lines = append(lines, strings.TrimSpace(line))
			line = ""
		}
		line += part
	}
	return append(lines, strings.TrimSpace(line))
}

// A row is one group's panels.
type row struct {
	bars, cdf *plot.Plot // cdf is nil where no waits were timed
	nbars     int        // the bars panel's bars: layout widens a panel of many
}

// rows builds one row per group that has measurements.
func (c *Chart) rows() []row {
	var rs []row
	for i := range c.Groups {
		g := &c.Groups[i]
		var sums []*Summary
		for j := range c.Sums {
			if c.Sums[j].Group == g.Name {
				sums = append(sums, &c.Sums[j])
			}
		}
		if len(sums) == 0 {
			continue
		}
		var r row
		r.bars, r.nbars = barsPanel(g, sums)
		r.cdf = cdfPanel(g, sums)
		rs = append(rs, r)
	}
	return rs
}

// Colors: peers in greys, lockword kinds in colors, in subject order.
var (
	peerColors = []color.Color{color.RGBA{0x6b, 0x6b, 0x6b, 0xff}, color.RGBA{0xb0, 0xb0, 0xb0, 0xff}}
	kindColors = []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff},
		color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	}
)

// subjectColors assigns each subject of g its color.
func subjectColors(g *Group) map[string]color.Color {
	cs := map[string]color.Color{}
	np, nk := 0, 0
	for _, s := range g.Subjects {
		if s.IsPeer() {
			cs[s.Name] = peerColors[np%len(peerColors)]
			np++
		} else {
			cs[s.Name] = kindColors[nk%len(kindColors)]
			nk++
		}
	}
	return cs
}

// newPanel is a plot with the chart's title and font sizes and a legend
// of its own in the corner given (top, left): inside its data area, next
// to what it names.
func newPanel(title string, top, left bool) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(titlePt)
	p.Title.Padding = px(6)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(axisPt)
		a.Tick.Label.Font.Size = vg.Points(tickPt)
	}
	p.Legend.Top, p.Legend.Left = top, left
	p.Legend.TextStyle.Font.Size = vg.Points(legendPt)
	p.Legend.ThumbnailWidth = px(20)
	p.Legend.Padding = px(2)
	p.Legend.XOffs = px(8)
	if !left {
		p.Legend.XOffs = -px(8)
	}
	p.Legend.YOffs = -px(4)
	if !top {
		p.Legend.YOffs = px(6)
	}
	p.Add(plotter.NewGrid())
	return p
}

// barsPanel is the grouped bars of one group and how many bars it holds.
// The throughput axis is logarithmic in every panel, so that panels read
// alike and a bar ten times another's is the same step up in each; its
// top leaves room for the ratio labels and, above them, the legend.
func barsPanel(g *Group, sums []*Summary) (*plot.Plot, int) {
	p := newPanel(g.Title+": throughput", true, true)
	p.Y.Label.Text = "million " + g.Unit + "/s (log scale)"
	p.X.Label.Text = g.Axis
	var points []int
	for _, s := range sums {
		if len(points) == 0 || points[len(points)-1] != s.Goroutines {
			points = append(points, s.Goroutines)
		}
	}
	// One grid point (the queues): a slot per subject, each named under
	// its bar; else a slot per point, its subjects' bars side by side.
	slots, perSlot := len(points), len(g.Subjects)
	var names []string
	if len(points) == 1 {
		slots, perSlot = len(g.Subjects), 1
		p.X.Label.Text = g.ChartX
		for _, sub := range g.Subjects {
			names = append(names, sub.Name)
		}
	} else {
		for _, n := range points {
			names = append(names, fmt.Sprint(n))
		}
	}
	colors := subjectColors(g)
	// A round that measured nothing (a short sample on a loaded machine)
	// is 0, which a log axis cannot show: the range is that of the rest,
	// and such a bar or whisker ends at the bottom of the axis.
	lo, hi := math.Inf(1), 0.0
	for _, s := range sums {
		for _, v := range []float64{s.Lo, s.OpsPerSec, s.Hi} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	const groupWidth = 0.8
	width := groupWidth / float64(perSlot)
	nbars := 0
	for j, sub := range g.Subjects {
		b := &bars{color: colors[sub.Name], width: width}
		for i, n := range points {
			for _, s := range sums {
				if s.Kind != sub.Name || s.Goroutines != n {
					continue
				}
				x := float64(i) - groupWidth/2 + (float64(j)+0.5)*width
				if perSlot == 1 {
					x = float64(j)
				}
				label := ""
				switch r := firstRatio(s); {
				case r >= 10:
					label = fmt.Sprintf("%.0f×", r)
				case r > 0:
					label = fmt.Sprintf("%.2f×", r)
				}
				b.add(x, s.OpsPerSec/1e6, s.Lo/1e6, s.Hi/1e6, label)
			}
		}
		if len(b.xs) > 0 {
			p.Add(b)
			p.Legend.Add(legendName(&sub), b)
			nbars += len(b.xs)
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(slots)-0.5
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	if hi == 0 {
		lo, hi = 1e6, 1e6 // nothing measured to scale by: any positive range
	}
	// The top fraction of the axis kept clear, as a share of the data
	// area's height (panelHeightPx less the title and the x axis).
	dataPx := float64(panelHeightPx - 80)
	clearPx := float64(len(g.Subjects))*18 + 24
	f := min(clearPx/dataPx, 0.6)
	p.Y.Min = lo / 1e6 / 2
	p.Y.Max = hi / 1e6 * math.Pow(hi*2/lo, f/(1-f))
	return p, nbars
}

// firstRatio is s's ratio to its first peer, 0 for none.
func firstRatio(s *Summary) float64 {
	if len(s.Ratios) == 0 {
		return 0
	}
	return s.Ratios[0]
}

// legendName is a subject's legend entry: a kind says what it is compared
// with.
func legendName(s *Subject) string {
	if s.IsPeer() {
		return s.Name + " (peer)"
	}
	return s.Name + " (vs " + strings.Join(s.Peers, ", ") + ")"
}

// bars is one subject's bars in a grouped bar chart: a plotter of our own,
// because plotter.BarChart draws from zero, which a log axis cannot show.
// Each bar rises from the bottom of the axis.
type bars struct {
	xs, ys, los, his []float64
	labels           []string
	width            float64 // in x data units
	color            color.Color
}

func (b *bars) add(x, y, lo, hi float64, label string) {
	b.xs, b.ys, b.los, b.his, b.labels = append(b.xs, x), append(b.ys, y), append(b.los, lo), append(b.his, hi), append(b.labels, label)
}

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	whisker := draw.LineStyle{Color: color.Black, Width: vg.Points(0.8)}
	label := p.Legend.TextStyle
	label.Font.Size = vg.Points(ratioPt)
	label.XAlign, label.YAlign = draw.XCenter, draw.YBottom
	for i, x := range b.xs {
		x0, x1 := trX(x-b.width/2*0.92), trX(x+b.width/2*0.92)
		y := func(v float64) vg.Length { // 0 (nothing measured) at the bottom
			if v <= 0 {
				return c.Min.Y
			}
			return trY(v)
		}
		y0, y1 := c.Min.Y, y(b.ys[i])
		poly := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.color, c.ClipPolygonY(poly))
		xm := trX(x)
		top := y1
		if b.his[i] > b.los[i] {
			c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: xm, Y: y(b.los[i])}, {X: xm, Y: y(b.his[i])}})...)
			top = max(top, y(b.his[i]))
		}
		if b.labels[i] != "" {
			c.FillText(label, vg.Point{X: xm, Y: top + px(2)}, b.labels[i])
		}
	}
}

// DataRange implements plot.DataRanger.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), math.Inf(1), 0
	for i, x := range b.xs {
		xmin, xmax = min(xmin, x-b.width/2), max(xmax, x+b.width/2)
		for _, v := range []float64{b.los[i], b.ys[i], b.his[i]} {
			if v > 0 { // a log axis: 0 is drawn at its bottom
				ymin, ymax = min(ymin, v), max(ymax, v)
			}
		}
	}
	if ymax == 0 {
		ymin, ymax = 1, 1
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer, for the legend.
func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(b.color, pts)
}

// cdfPoint is the grid point whose waits a CDF panel shows: the one
// nearest 16 among those timed (more than one worker).
func cdfPoint(sums []*Summary) int {
	best := 0
	for _, s := range sums {
		if s.Waits == nil || s.Waits.N == 0 {
			continue
		}
		if best == 0 || math.Abs(math.Log(float64(s.Goroutines)/16)) < math.Abs(math.Log(float64(best)/16)) {
			best = s.Goroutines
		}
	}
	return best
}

// cdfPanel is the wait-time CDFs of one group at one grid point, nil
// where no waits were timed.
func cdfPanel(g *Group, sums []*Summary) *plot.Plot {
	n := cdfPoint(sums)
	if n == 0 {
		return nil
	}
	// The legend goes bottom right: the curves rise on the left and run
	// along the top, so that corner stays clear.
	short, _, _ := strings.Cut(g.Title, ":")
	p := newPanel(fmt.Sprintf("%s: wait for the lock at %d %s (CDF)", short, n, g.Axis), false, false)
	p.X.Label.Text = "wait from calling Lock to holding it (log scale)"
	p.Y.Label.Text = "acquisitions that waited at most x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = nsTicks{}
	p.Y.Scale = ninesScale{}
	p.Y.Tick.Marker = ninesTicks{}
	p.Y.Min, p.Y.Max = 0, 1-math.Pow(10, -maxNines)
	colors := subjectColors(g)
	xmin, xmax := math.Inf(1), 0.0
	p.Legend.Add("p99, max wait:")
	for _, sub := range g.Subjects {
		for _, s := range sums {
			if s.Kind != sub.Name || s.Goroutines != n || s.Waits == nil || s.Waits.N == 0 {
				continue
			}
			cdf := s.Waits.CDF()
			xys := make(plotter.XYs, 0, len(cdf)+1)
			// A step that starts at zero: the fraction at the first
			// bucket's end is reached from nothing.
			xys = append(xys, plotter.XY{X: math.Max(float64(s.Waits.Min), 1), Y: 0})
			for _, pt := range cdf {
				xys = append(xys, plotter.XY{X: math.Max(float64(pt.Ns), 1), Y: min(pt.Fraction, 1-math.Pow(10, -maxNines))})
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				continue
			}
			line.Color = colors[sub.Name]
			line.Width = vg.Points(1.6)
			if sub.IsPeer() {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			xmin, xmax = min(xmin, xys[0].X), max(xmax, xys[len(xys)-1].X)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s: %s, %s", sub.Name, FormatNs(s.Waits.Quantile(0.99)), FormatNs(s.Waits.Max)), line)
		}
	}
	p.X.Min, p.X.Max = xmin/1.5, xmax*1.5
	return p
}

// maxNines is how far up the tail the CDF's axis goes: 99.999%.
const maxNines = 5

// ninesScale spreads a CDF's tail out: the distance from 0 to 90% is that
// from 90% to 99% and from 99% to 99.9% (the axis is -log10(1-y)), so the
// p99 and p99.9 of a lock are as visible as its median, as in
// HdrHistogram's percentile plots.
type ninesScale struct{}

func nines(y float64) float64 { return -math.Log10(max(1-y, math.Pow(10, -maxNines))) }

// Normalize implements plot.Normalizer.
func (ninesScale) Normalize(lo, hi, y float64) float64 {
	return (nines(y) - nines(lo)) / (nines(hi) - nines(lo))
}

// ninesTicks marks 0, 50%, 90%, 99%, ... on a ninesScale axis.
type ninesTicks struct{}

// Ticks implements plot.Ticker.
func (ninesTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := []plot.Tick{{Value: 0, Label: "0"}, {Value: 0.5, Label: "50%"}, {Value: 0.9, Label: "90%"}}
	pct := "99"
	for k := 2; k <= maxNines; k++ {
		if v := 1 - math.Pow(10, -float64(k)); v <= hi+1e-12 {
			ts = append(ts, plot.Tick{Value: v, Label: pct + "%"})
		}
		if k == 2 {
			pct += "."
		}
		pct += "9"
	}
	return ts
}

// nsTicks marks a log axis of nanoseconds at each power of ten, labelled
// 10ns, 1us, 10ms.
type nsTicks struct{}

// Ticks implements plot.Ticker.
func (nsTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(max(lo, 1))); math.Pow(10, e) <= hi*1.0001; e++ {
		v := math.Pow(10, e)
		if v >= lo {
			ts = append(ts, plot.Tick{Value: v, Label: FormatNs(int64(v))})
		}
		for k := 2.0; k < 10; k++ {
			if m := k * v; m >= lo && m <= hi {
				ts = append(ts, plot.Tick{Value: m}) // minor
			}
		}
	}
	return ts
}
