package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactPercentile is the nearest-rank q-quantile of sorted values: the
// value at rank ceil(q*n), 1-based.
func exactPercentile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestBucketsCoverValuesInOrder(t *testing.T) {
	// Every value maps into its bucket's range, buckets never go backwards,
	// and each bucket's top maps back to the bucket.
	prev := 0
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1000, 1 << 20, 1<<20 + 12345, 123456789, histMaxValue} {
		b := bucketOf(v)
		if b < prev || b >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d: out of order or range (prev %d, %d buckets)", v, b, prev, histBuckets)
		}
		prev = b
		if hi := bucketHigh(b); hi < v || bucketOf(hi) != b || bucketOf(hi+1) != b+1 && hi != histMaxValue {
			t.Fatalf("value %d: bucket %d top %d does not bound it", v, b, hi)
		}
		if v >= histSub && float64(bucketHigh(b)-v) >= histRelErr*float64(v) {
			t.Fatalf("value %d: bucket top %d is more than 1/%d above", v, bucketHigh(b), histHalf)
		}
	}
	if got := bucketOf(histMaxValue); got != histBuckets-1 {
		t.Fatalf("largest value lands in bucket %d, want the last, %d", got, histBuckets-1)
	}
}

func TestPercentileSmallValuesExact(t *testing.T) {
	var h hist
	for v := 1; v <= 100; v++ { // 1..100 ns: one bucket each
		h.record(time.Duration(v))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {0.999, 100}, {1, 100}, {0.001, 1}, {0.011, 2}} {
		if got := h.percentile(c.q); got != c.want {
			t.Errorf("p%v of 1..100 = %d, want %d", c.q*100, got, c.want)
		}
	}
}

func TestPercentileMatchesExactWithinBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h hist
	var vals []int64
	for range 200_000 {
		// Log-normal around 1 ms with a long tail, as latencies are.
		v := int64(math.Exp(rng.NormFloat64()*1.2) * 1e6)
		h.record(time.Duration(v))
		vals = append(vals, v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := exactPercentile(vals, q)
		got := int64(h.percentile(q))
		if got < exact || float64(got-exact) > histRelErr*float64(exact) {
			t.Errorf("p%v = %d, exact %d: outside [exact, exact×(1+1/%d)]", q*100, got, exact, histHalf)
		}
	}
	if got := h.percentile(1); int64(got) != vals[len(vals)-1] {
		t.Errorf("p100 = %d, want the maximum %d exactly", got, vals[len(vals)-1])
	}
	if h.n != uint64(len(vals)) || h.min != vals[0] || h.max != vals[len(vals)-1] {
		t.Errorf("n/min/max = %d/%d/%d, want %d/%d/%d", h.n, h.min, h.max, len(vals), vals[0], vals[len(vals)-1])
	}
}

func TestPercentileRanks(t *testing.T) {
	// 999 fast requests and one slow one: p99.9 is still fast (rank 999),
	// anything above it is the slow one.
	var h hist
	for range 999 {
		h.record(time.Millisecond)
	}
	fast := func(d time.Duration) bool {
		return d >= time.Millisecond && float64(d-time.Millisecond) <= histRelErr*float64(time.Millisecond)
	}
	if got := h.percentile(0.5); got != time.Millisecond {
		t.Errorf("p50 of identical values = %v, want exactly 1ms (clamped to the maximum)", got)
	}
	h.record(time.Second)
	if got := h.percentile(0.999); !fast(got) {
		t.Errorf("p99.9 = %v, want 1ms within 1/%d", got, histHalf)
	}
	if got := h.percentile(0.9991); got != time.Second {
		t.Errorf("p99.91 = %v, want 1s", got)
	}
	if got := h.percentile(0.5); !fast(got) {
		t.Errorf("p50 = %v, want 1ms within 1/%d", got, histHalf)
	}
}

func TestMergeEqualsRecordingTogether(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b, both hist
	for i := range 10_000 {
		v := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
		if i%3 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
		both.record(v)
	}
	var m hist
	m.merge(&a)
	m.merge(&hist{}) // merging an empty one changes nothing
	m.merge(&b)
	if m.counts != both.counts || m.n != both.n || m.min != both.min || m.max != both.max {
		t.Fatalf("merged histogram differs from one that recorded everything")
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		if m.percentile(q) != both.percentile(q) {
			t.Errorf("p%v: merged %v, together %v", q*100, m.percentile(q), both.percentile(q))
		}
	}
}

func TestEmptyAndClamped(t *testing.T) {
	var h hist
	if h.percentile(0.5) != 0 || h.mean() != 0 {
		t.Fatal("an empty histogram reports nonzero")
	}
	h.record(-5 * time.Second)
	h.record(time.Duration(math.MaxInt64))
	if h.min != 0 || h.max != histMaxValue {
		t.Fatalf("min/max = %d/%d, want 0/%d", h.min, h.max, histMaxValue)
	}
	if got := h.percentile(1); got != histMaxValue {
		t.Fatalf("p100 = %d, want %d", got, histMaxValue)
	}
}

func TestMedian(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{5 * ms}, 5 * ms},
		{[]time.Duration{9 * ms, 1 * ms, 5 * ms}, 5 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 3 * ms}, 2500 * time.Microsecond},
		{[]time.Duration{0, 7 * ms, 0}, 7 * ms}, // failed rounds (0) are left out
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestWorstWholeSecond(t *testing.T) {
	if got := worstWholeSecond([]uint64{10, 3, 8, 1}, 3500*time.Millisecond); got != 3 {
		t.Errorf("got %d, want 3 (the partial last second is left out)", got)
	}
	if got := worstWholeSecond([]uint64{7}, 500*time.Millisecond); got != 7 {
		t.Errorf("got %d, want 7 for a window shorter than a second", got)
	}
}

func TestFirstSuccesses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	evs := []writeEvent{
		{writer: 0, start: at(-5), end: at(1)},                // started before the kill: does not count
		{writer: 0, start: at(1), end: at(400), err: errTest}, // failed
		{writer: 0, start: at(401), end: at(900)},             // writer 0's first
		{writer: 1, start: at(2), end: at(700)},               // writer 1's first
		{writer: 1, start: at(701), end: at(710)},
	}
	first, all := firstSuccesses(evs, t0, 3)
	if all || len(first) != 2 || !first[0].Equal(at(900)) || !first[1].Equal(at(700)) {
		t.Fatalf("first = %v, all = %v", first, all)
	}
	if _, all := firstSuccesses(evs, t0, 2); !all {
		t.Fatal("both writers succeeded, all = false")
	}
}

var errTest = errString("connection loss")

type errString string

func (e errString) Error() string { return string(e) }
