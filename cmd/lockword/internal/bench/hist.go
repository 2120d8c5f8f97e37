package bench

import (
	"math"
	"math/bits"
	"slices"
)

// A Histogram counts wait times in nanoseconds in log-linear buckets, as
// HdrHistogram does with one significant binary digit more than a power of
// two: values below subBuckets are counted exactly, and each power of two
// above is cut into subBuckets equal buckets, so a bucket is at most 1/16
// (6.25%) of its values wide. Recording is a few integer operations and no
// allocation, cheap enough to time every acquisition. Min and Max are
// exact. The zero Histogram is empty and ready to use.
type Histogram struct {
	Counts   [histBuckets]uint64 // Counts[bucketOf(v)] counts the values v
	N        uint64              // values recorded
	Min, Max int64               // smallest and largest value recorded, 0 when N == 0
}

const (
	subBucketBits = 4
	subBuckets    = 1 << subBucketBits // exact values below this; buckets per power of two above
	// histBuckets covers every int64: the exact ones, then 59 powers of
	// two from subBuckets up to 2^63.
	histBuckets = (64 - subBucketBits) * subBuckets
)

// bucketOf returns the bucket that counts v (v >= 0).
func bucketOf(v int64) int {
	u := uint64(v)
	if u < subBuckets {
		return int(u)
	}
	shift := bits.Len64(u) - subBucketBits - 1 // u>>shift is in [subBuckets, 2*subBuckets)
	return (shift+1)*subBuckets + int(u>>shift) - subBuckets
}

// bucketRange returns the smallest value bucket b counts and its width.
func bucketRange(b int) (lo, width int64) {
	if b < subBuckets {
		return int64(b), 1
	}
	shift := b/subBuckets - 1
	return int64(subBuckets+b%subBuckets) << shift, 1 << shift
}

// Record counts one value in nanoseconds; a negative value (a clock step)
// counts as 0.
func (h *Histogram) Record(ns int64) {
	ns = max(ns, 0)
	h.Counts[bucketOf(ns)]++
	if h.N == 0 || ns < h.Min {
		h.Min = ns
	}
	h.Max = max(h.Max, ns)
	h.N++
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.N == 0 {
		return
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	if h.N == 0 || o.Min < h.Min {
		h.Min = o.Min
	}
	h.Max = max(h.Max, o.Max)
	h.N += o.N
}

// Quantile returns the q-quantile (0 <= q <= 1) in nanoseconds: the middle
// of the bucket holding the value of rank ceil(q*N), kept within [Min,
// Max], so within half a bucket (3.2%) of the exact order statistic.
// Quantile(1) is Max exactly and Quantile(0) is Min. It returns 0 for an
// empty histogram.
func (h *Histogram) Quantile(q float64) int64 {
	if h.N == 0 {
		return 0
	}
	switch {
	case q <= 0:
		return h.Min
	case q >= 1:
		return h.Max
	}
	rank := uint64(math.Ceil(q * float64(h.N)))
	seen := uint64(0)
	for b, c := range h.Counts {
		if seen += c; seen >= rank {
			lo, w := bucketRange(b)
			return min(max(lo+w/2, h.Min), h.Max)
		}
	}
	return h.Max
}

// A CDFPoint says that Fraction of the values were at most Ns.
type CDFPoint struct {
	Ns       int64
	Fraction float64
}

// CDF returns the cumulative distribution, one point per non-empty bucket
// at the bucket's upper end (the last at Max), for plotting.
func (h *Histogram) CDF() []CDFPoint {
	var pts []CDFPoint
	seen := uint64(0)
	for b, c := range h.Counts {
		if c == 0 {
			continue
		}
		seen += c
		lo, w := bucketRange(b)
		pts = append(pts, CDFPoint{Ns: min(lo+w-1, h.Max), Fraction: float64(seen) / float64(h.N)})
	}
	return pts
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
