package server

import (
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"coord/api"
	"coord/server/sessions"
)

// A server samples its own metrics every sampleInterval and keeps the last
// sampleKeep samples (10 minutes), for Admin.Samples: a few numbers an
// operator can follow over time without a Prometheus server. Each sample
// reads the request latency histogram (coord_server_request_duration_seconds,
// one child per op) of the server's registry:
//   - reads and writes are the requests answered since the server started,
//     of the read kinds (sessions.RunRead: getData, exists, getChildren,
//     the watch calls, auth, ...) and of the write kinds (OpKind.IsWrite:
//     create, delete, setData, setACL, multi, closeSession); pings, syncs,
//     reconfigs and refused requests are neither. They are the histogram's
//     counts, which are coord_server_requests_total summed over codes (the
//     session layer counts every answer in both, metrics.Request); taken
//     from the histogram, the totals and the quantiles of one sample come
//     from one consistent reading, so a sample whose writes moved has
//     quantiles and one whose writes did not has none.
//   - write_p50_ms and write_p99_ms are quantiles of the writes answered
//     since the previous sample, interpolated in the buckets of the
//     difference between the two samples' histograms (bucketQuantile).
const (
	sampleInterval = 2 * time.Second
	sampleKeep     = 300
)

// opClass is what a request's op label counts as in a sample.
type opClass uint8

const (
	opOther opClass = iota
	opRead
	opWrite
)

// sampleClasses maps the op label of the request metrics (OpKind.String)
// to its class.
var sampleClasses = func() map[string]opClass {
	m := map[string]opClass{}
	for _, k := range sessions.Kinds() {
		switch {
		case k.IsWrite():
			m[k.String()] = opWrite
		case k.Info().Run == sessions.RunRead:
			m[k.String()] = opRead
		}
	}
	return m
}()

// latencyName is the histogram a sample reads.
const latencyName = "coord_server_request_duration_seconds"

// requestCounts is one reading of the latency histogram: requests
// answered by class, and the write ops' buckets summed (every op's child
// has the same bounds).
type requestCounts struct {
	reads, writes uint64
	bounds        []float64 // the buckets' upper bounds (+Inf left out)
	writeCum      []uint64  // cumulative: writeCum[i] writes ≤ bounds[i]; the last, one past bounds, all writes
}

// readCounts reads the latency histogram from what g gathers.
func readCounts(g prometheus.Gatherer) (requestCounts, error) {
	var c requestCounts
	mfs, err := g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != latencyName {
			continue
		}
		for _, m := range mf.GetMetric() {
			op := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					op = l.GetValue()
				}
			}
			h := m.GetHistogram()
			switch sampleClasses[op] {
			case opRead:
				c.reads += h.GetSampleCount()
			case opWrite:
				c.writes += h.GetSampleCount()
				bs := h.GetBucket()
				if c.writeCum == nil {
					c.bounds = make([]float64, len(bs))
					for i, b := range bs {
						c.bounds[i] = b.GetUpperBound()
					}
					c.writeCum = make([]uint64, len(bs)+1)
				}
				if len(bs) != len(c.bounds) {
					continue // cannot happen: one vector, one set of bounds
				}
				for i, b := range bs {
					c.writeCum[i] += b.GetCumulativeCount()
				}
				c.writeCum[len(bs)] += h.GetSampleCount()
			}
		}
	}
	return c, err
}

// bucketQuantile is the q-quantile (0 < q ≤ 1) of the observations whose
// cumulative bucket counts are cum (cum[i] observations ≤ bounds[i]; the
// last, one past bounds, all of them), as Prometheus's histogram_quantile
// estimates it: the bucket the rank q×total falls in, interpolated
// linearly between its bounds (the first bucket's lower bound 0); a rank
// in the +Inf bucket gives the highest finite bound. 0 with no
// observations.
func bucketQuantile(q float64, bounds []float64, cum []uint64) float64 {
	if len(cum) != len(bounds)+1 || cum[len(bounds)] == 0 {
		return 0
	}
	rank := q * float64(cum[len(bounds)])
	i := sort.Search(len(cum), func(i int) bool { return float64(cum[i]) >= rank })
	if i >= len(bounds) {
		if len(bounds) == 0 {
			return 0
		}
		return bounds[len(bounds)-1]
	}
	lower, below := 0.0, uint64(0)
	if i > 0 {
		lower, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in == 0 { // q = 0 on an empty first bucket
		return lower
	}
	return lower + (bounds[i]-lower)*(rank-float64(below))/float64(in)
}

// sampler keeps a server's samples. take reads the metrics under the
// sampler's own mutex, which nothing on the request path takes; the
// histograms it reads are written without locks (Observe is atomic).
type sampler struct {
	interval time.Duration
	keep     int
	gather   prometheus.Gatherer
	// state fills in what the histogram does not say: applied and commit
	// index, role.
	state func(*api.Sample)
	log   *slog.Logger

	mu    sync.Mutex
	ring  []*api.Sample // at most keep; once full, next is the oldest
	next  int
	prev  []uint64 // the write buckets at the last sample (writeCum)
	taken int      // samples taken
}

func newSampler(interval time.Duration, keep int, gather prometheus.Gatherer, state func(*api.Sample), log *slog.Logger) *sampler {
	return &sampler{interval: interval, keep: max(keep, 1), gather: gather, state: state, log: log}
}

// newServerSampler samples s every sampleInterval. It gathers from a
// registry of its own that holds only the latency histogram (the same
// collector as on s.metrics.reg and /metrics): gathering the whole
// registry would also run its gauge functions (the watch registry's,
// session layer's and store's locks among them) and the Go and process
// collectors, every 2 s, for a number a sample does not use.
func newServerSampler(s *Server) *sampler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.metrics.latency)
	return newSampler(sampleInterval, sampleKeep, reg, func(x *api.Sample) {
		x.AppliedIndex = s.rep.Applied()
		x.CommitIndex = s.rep.CommitIndex()
		x.Role = s.Role()
	}, s.log)
}

// take adds a sample to the ring.
func (sm *sampler) take() {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	c, err := readCounts(sm.gather)
	if err != nil && sm.log != nil {
		sm.log.Warn("sampling the request metrics", "err", err)
	}
	x := &api.Sample{UnixMs: time.Now().UnixMilli(), Reads: c.reads, Writes: c.writes}
	if sm.state != nil {
		sm.state(x)
	}
	// The writes since the last sample: this histogram less the last one.
	if len(c.writeCum) > 0 {
		delta := slices.Clone(c.writeCum)
		if len(sm.prev) == len(delta) {
			for i := range delta {
				delta[i] -= min(delta[i], sm.prev[i])
			}
		}
		x.WriteP50Ms = 1000 * bucketQuantile(0.5, c.bounds, delta)
		x.WriteP99Ms = 1000 * bucketQuantile(0.99, c.bounds, delta)
		sm.prev = c.writeCum
	}
	if len(sm.ring) < sm.keep {
		sm.ring = append(sm.ring, x)
	} else {
		sm.ring[sm.next] = x
		sm.next = (sm.next + 1) % sm.keep
	}
	sm.taken++
}

// run takes a sample now and every interval until stop is closed.
func (sm *sampler) run(stop <-chan struct{}) {
	tick := time.NewTicker(sm.interval)
	defer tick.Stop()
	for {
		sm.take()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// list returns the samples, oldest first.
func (sm *sampler) list() []*api.Sample {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := make([]*api.Sample, 0, len(sm.ring))
	out = append(out, sm.ring[sm.next:]...)
	return append(out, sm.ring[:sm.next]...)
}

// sampleLoop samples this server until it closes.
func (s *Server) sampleLoop() {
	defer s.wg.Done()
	s.samples.run(s.closing)
}
