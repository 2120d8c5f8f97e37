package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the order statistic Quantile approximates: the value
// of rank ceil(q*n) in sorted order.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// TestQuantileKnownDistributions records values drawn from known
// distributions and checks each quantile against the exact order
// statistic and against the distribution's own quantile, within the
// histogram's resolution (half a bucket: 1/32 of the value).
func TestQuantileKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	for _, d := range []struct {
		name string
		draw func() int64
		// want is the distribution's q-quantile, 0 to check only
		// against the sample.
		want func(q float64) float64
	}{
		{"constant 1234", func() int64 { return 1234 }, func(float64) float64 { return 1234 }},
		{"uniform 0..15, exact", func() int64 { return rng.Int64N(16) }, nil},
		{"uniform 1..100000", func() int64 { return 1 + rng.Int64N(100000) }, func(q float64) float64 { return q * 100000 }},
		{"exponential mean 1000", func() int64 { return int64(rng.ExpFloat64() * 1000) }, func(q float64) float64 { return -1000 * math.Log(1-q) }},
		{"two modes: 50 and 1e6", func() int64 {
			if rng.IntN(100) < 95 {
				return 50
			}
			return 1e6
		}, func(q float64) float64 {
			if q <= 0.95 {
				return 50
			}
			return 1e6
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			var h Histogram
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = d.draw()
				h.Record(vals[i])
			}
			slices.Sort(vals)
			if h.N != n || h.Min != vals[0] || h.Max != vals[n-1] {
				t.Fatalf("N %d, Min %d, Max %d; want %d, %d, %d", h.N, h.Min, h.Max, n, vals[0], vals[n-1])
			}
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
				got, exact := h.Quantile(q), exactQuantile(vals, q)
				tol := float64(exact)/32 + 0.5
				if exact < subBuckets {
					tol = 0 // counted exactly
				}
				if math.Abs(float64(got-exact)) > tol {
					t.Errorf("q=%v: %d, exact order statistic %d (tolerance %.1f)", q, got, exact, tol)
				}
				if d.want != nil && q > 0 && q < 1 {
					// The sample's quantile is near the distribution's:
					// 4% covers the bucket and the sampling error at
					// n=200000 for these q.
					if w := d.want(q); math.Abs(float64(got)-w) > 0.04*w+1 {
						t.Errorf("q=%v: %d, distribution's quantile %.0f", q, got, w)
					}
				}
			}
		})
	}
}

// TestHistogramMergeAndCDF checks that merging is recording both, and the
// CDF ends at Max with fraction 1 and never decreases.
func TestHistogramMergeAndCDF(t *testing.T) {
	var a, b, both Histogram
	for i := range int64(10000) {
		a.Record(i * 3)
		b.Record(1e7 - i)
		both.Record(i * 3)
		both.Record(1e7 - i)
	}
	a.Merge(&b)
	if a != both {
		t.Fatalf("merged: N %d Min %d Max %d; recorded together: N %d Min %d Max %d", a.N, a.Min, a.Max, both.N, both.Min, both.Max)
	}
	cdf := a.CDF()
	last := cdf[len(cdf)-1]
	if last.Ns != a.Max || last.Fraction != 1 {
		t.Errorf("CDF ends at %+v, want {%d 1}", last, a.Max)
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Ns <= cdf[i-1].Ns || cdf[i].Fraction < cdf[i-1].Fraction {
			t.Fatalf("CDF not increasing at %d: %+v then %+v", i, cdf[i-1], cdf[i])
		}
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.CDF() != nil {
		t.Error("empty histogram: want quantile 0 and no CDF")
	}
	empty.Record(-5) // a clock step
	if empty.Min != 0 || empty.Max != 0 {
		t.Errorf("negative value: Min %d Max %d, want 0 0", empty.Min, empty.Max)
	}
}

// TestBuckets checks that every bucket's range maps back to it and that
// buckets tile the values without gaps, up to the largest int64.
func TestBuckets(t *testing.T) {
	next := int64(0)
	for b := range histBuckets {
		lo, w := bucketRange(b)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", b, lo, next)
		}
		if bucketOf(lo) != b || bucketOf(lo+w-1) != b {
			t.Fatalf("bucket %d: [%d, %d] maps to %d and %d", b, lo, lo+w-1, bucketOf(lo), bucketOf(lo+w-1))
		}
		if w > lo/subBuckets && lo >= subBuckets {
			t.Fatalf("bucket %d: width %d over 1/%d of %d", b, w, subBuckets, lo)
		}
		next = lo + w
		if b == histBuckets-1 && lo+w-1 != math.MaxInt64 {
			t.Fatalf("last bucket ends at %d, want MaxInt64", lo+w-1)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
