package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is a latency histogram in the manner of HdrHistogram: values below
// 2^histSubBits nanoseconds have a bucket each, and every power of two above
// is split into 2^(histSubBits-1) equal buckets, so a bucket is at most
// 1/2^(histSubBits-1) of the values it holds wide. Its size is fixed
// however long a run lasts; one worker records into its own hist and the
// run merges them.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	min    int64
	max    int64
	sum    float64 // for the mean; exactness does not matter
}

const (
	histSubBits = 8
	histSub     = 1 << histSubBits // exact buckets below this many ns
	histHalf    = histSub / 2      // buckets per power of two above
	histMaxBits = 40               // values are clamped below 2^40 ns (18 min)
	histBuckets = histSub + (histMaxBits-histSubBits)*histHalf
)

// histMaxValue is the largest value a bucket can tell apart.
const histMaxValue = 1<<histMaxBits - 1

// histRelErr bounds |reported - exact| / exact for any percentile.
const histRelErr = 1.0 / histHalf

func bucketOf(v int64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits // >= 1
	return histSub + (shift-1)*histHalf + int(v>>shift) - histHalf
}

// bucketHigh is the largest value that falls into bucket b.
func bucketHigh(b int) int64 {
	if b < histSub {
		return int64(b)
	}
	shift := (b-histSub)/histHalf + 1
	sub := int64((b-histSub)%histHalf + histHalf)
	return (sub+1)<<shift - 1
}

// record adds one latency. Negative values count as 0 and values beyond
// histMaxValue as histMaxValue.
func (h *hist) record(d time.Duration) {
	v := min(max(int64(d), 0), histMaxValue)
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
	h.counts[bucketOf(v)]++
}

// merge adds o's values to h.
func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// percentile returns the nearest-rank q-quantile (0 < q <= 1): the smallest
// recorded value v such that at least ceil(q*n) values are <= v, reported
// as the top of v's bucket and clamped to the recorded minimum and maximum.
// So it is never below the exact value and at most histRelErr above it; it
// is exact for values under 256 ns, for the minimum and for the maximum.
// An empty histogram gives 0.
func (h *hist) percentile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(bucketHigh(b), h.min), h.max))
		}
	}
	return time.Duration(h.max) // unreachable: the counts add up to n
}

func (h *hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}
