package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"coord/server/replica"
	"coord/vocab"
)

// metrics are the server's Prometheus collectors, registered on the
// server's own registry (no global state), named coord_<subsystem>_<name>.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	events   prometheus.Counter
	// leaderLossDrops counts client connections closed because this
	// server lost contact with a leader; notServing the times it stopped
	// serving (leaderloss.go).
	leaderLossDrops prometheus.Counter
	notServing      prometheus.Counter
	// acceptErrors counts failed accepts on the ZooKeeper port (retried);
	// connsRefused client connections closed by a limit, by reason.
	acceptErrors prometheus.Counter
	connsRefused *prometheus.CounterVec
	// throttles counts the times a connection's outbound queue filled and
	// its requests stopped being read; throttled is how many are so now.
	throttles prometheus.Counter
	throttled prometheus.Gauge
	// readOnlySessions counts sessions connected in read-only mode
	// (sessions/readonly.go).
	readOnlySessions prometheus.Counter
	// stages times the write path stage by stage (replica.Stage), one
	// histogram child per stage looked up once.
	stages [replica.NumStages]prometheus.Observer
	// watchesRefused counts watches refused by MaxWatchesPerSession, by
	// the request that asked for them.
	watchesRefused *prometheus.CounterVec
	// touchReports times a follower's reports of its clients' pings to
	// the leader (touch.go), by result.
	touchReports *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coord_server_requests_total", Help: "Client requests answered, by operation and ZooKeeper result code.",
	}, []string{"op", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coord_server_request_duration_seconds", Help: "Time from a request's arrival to its answer being queued.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	}, []string{"op"})
	m.events = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_watch_events_total", Help: "Watch events queued to sessions connected here.",
	})
	m.leaderLossDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_leader_loss_disconnects_total", Help: "Client connections closed because this server had no contact with a leader for the session's bound.",
	})
	m.notServing = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_not_serving_total", Help: "Times this server stopped serving because it had no contact with a leader.",
	})
	m.acceptErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_accept_errors_total", Help: "Failed accepts on the ZooKeeper port (retried after a short pause).",
	})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coord_server_connections_refused_total", Help: "Client connections closed by a limit: per_address_limit (MaxClientConns), total_limit (MaxClientTotal) or handshake_timeout.",
	}, []string{"reason"})
	m.throttles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_connection_throttles_total", Help: "Times a client connection's outbound queue reached its bound and the server stopped reading its requests.",
	})
	m.throttled = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "coord_server_throttled_connections", Help: "Client connections whose requests are not being read now because their outbound queue is full.",
	})
	m.readOnlySessions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_read_only_sessions_total", Help: "Sessions connected in read-only mode (the server cut off from the quorum, the client accepting a read-only server).",
	})
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coord_write_stage_seconds",
		Help: "Time writes spend in each stage of the write path, observed where the stage happens (see docs/benchmarks.md): session, forward, propose_queue, raft (per entry), apply (per entry), local_apply, reply, total, append (per log store append, fsync included).",
		// 10 µs to 1.3 s in steps of 1.5×: fine enough for a p50 and p99.
		Buckets: prometheus.ExponentialBuckets(10e-6, 1.5, 30),
	}, []string{"stage"})
	for st := replica.Stage(0); st < replica.NumStages; st++ {
		m.stages[st] = stages.WithLabelValues(st.String())
	}
	m.reg.MustRegister(stages)
	m.watchesRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "coord_watch_refused_total", Help: "Watches not registered because their session held -max-watches-per-session watches (the request answered QuotaExceeded), by request.",
	}, []string{"op"})
	m.touchReports = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "coord_session_touch_report_seconds",
		Help: "Time a follower's report of the sessions its clients were heard from took to be answered by the leader (Internal.Touch), by result: ok, or failed (the sessions go with the next report). A leader that expires sessions whose clients ping a follower shows here first.",
		// 1 ms to 16 s.
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 15),
	}, []string{"result"})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(m.requests, m.latency, m.events, m.leaderLossDrops, m.notServing,
		m.acceptErrors, m.connsRefused, m.throttles, m.throttled, m.readOnlySessions, m.watchesRefused, m.touchReports,
		gauge("coord_server_read_only", "1 if this server is in read-only mode (cut off from the quorum, serving read-only sessions).", func() float64 {
			if s.ReadOnly() {
				return 1
			}
			return 0
		}),
		gauge("coord_server_serving", "1 if this server serves sessions (it has contact with a leader).", func() float64 {
			if s.Serving() {
				return 1
			}
			return 0
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_server_proposal_mismatches_total",
			Help: "Entries of this server's origin that carried another command than the request waiting for them (always 0; the request fails)."},
			func() float64 { return float64(s.rep.Stats().Mismatched) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_server_snapshot_failed_requests_total",
			Help: "Requests failed (ConnectionLoss) because a snapshot was installed while they waited for their entries."},
			func() float64 { return float64(s.rep.Stats().SnapshotFailed) }),
		gauge("coord_fsm_znodes", "Znodes in this server's state.", func() float64 { return float64(s.rep.View().NodeCount()) }),
		gauge("coord_fsm_last_zxid", "Zxid of the last applied command.", func() float64 { return float64(s.rep.LastZxid()) }),
		gauge("coord_session_sessions", "Sessions in the cluster's session table.", func() float64 {
			return float64(s.sess.Sessions())
		}),
		gauge("coord_session_connections", "Sessions connected to this server.", func() float64 {
			return float64(s.sess.ConnCount())
		}),
		gauge("coord_watch_watches", "Watches registered on this server.", func() float64 { return float64(s.sess.Watches().Len()) }),
		gauge("coord_raft_leader", "1 if this server is the raft leader.", func() float64 {
			if s.rep != nil && s.rep.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("coord_raft_term", "Current raft term.", func() float64 { return float64(s.rep.Term()) }),
		gauge("coord_raft_commit_index", "Raft commit index as this server knows it.", func() float64 { return float64(s.rep.CommitIndex()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_peer_connections_refused_total",
			Help: "Connections to the peer port (raft and server-to-server calls) refused at the handshake: not a member (no certificate, another cluster's key, a client certificate)."},
			func() float64 { return float64(s.rep.Stats().PeerRefused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_raft_fast_applied_entries_total",
			Help: "Log entries this server applied as soon as the leader reported them committed (its Commits stream or its answer to a forwarded write), before raft did."},
			func() float64 { return float64(s.rep.Stats().FastApplied) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_raft_snapshots_total",
			Help: "Snapshots this server persisted since it started (by log size, raft's entry count or an admin request)."},
			func() float64 { return float64(s.rep.SnapshotStats().Taken) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_raft_snapshots_skipped_no_space_total",
			Help: "Snapshots due by log size that were skipped because the data directory had no room for them (the log grows instead, until the free-space check refuses writes)."},
			func() float64 { return float64(s.rep.SnapshotStats().SkippedNoSpace) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_raft_snapshot_duration_seconds_total",
			Help: "Time spent persisting snapshots since this server started."},
			func() float64 { return s.rep.SnapshotStats().Duration.Seconds() }),
		gauge("coord_raft_snapshot_last_duration_seconds", "Time the last snapshot took to persist.", func() float64 {
			return s.rep.SnapshotStats().LastDuration.Seconds()
		}),
		gauge("coord_raft_snapshot_last_size_bytes", "Size of the last snapshot persisted.", func() float64 {
			return float64(s.rep.SnapshotStats().LastSize)
		}),
		gauge("coord_raft_snapshot_last_index", "Raft index the last snapshot taken or installed here covers.", func() float64 {
			return float64(s.rep.SnapshotStats().LastIndex)
		}),
		gauge("coord_raft_log_bytes_since_snapshot", "Bytes of log entries applied since the state of the last snapshot (a snapshot is taken past -snapshot-log-bytes).", func() float64 {
			return float64(s.rep.SnapshotStats().LogBytes)
		}),
		gauge("coord_raft_log_first_index", "First index in this server's raft log (moves up when the log is compacted).", func() float64 {
			i, _ := s.rep.FirstIndex()
			return float64(i)
		}),
		gauge("coord_raft_applied_index", "Raft index of the last entry applied here.", func() float64 { return float64(s.rep.Applied()) }),
	)
	return m
}

// observe counts an answered request.
// Request, Event and Throttled are the session layer's (sessions.Metrics).

// Request counts a request answered with code.
func (m *metrics) Request(op string, code vocab.Code, start time.Time) {
	m.requests.WithLabelValues(op, code.String()).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// ObserveStage times a write's stage (replica.StageObserver, and the
// session layer's).
func (m *metrics) ObserveStage(st replica.Stage, d time.Duration) {
	if st < replica.NumStages {
		m.stages[st].Observe(d.Seconds())
	}
}

// Event counts a watch event or state notification queued to a session.
func (m *metrics) Event() { m.events.Inc() }

// Throttled follows a connection that starts or stops waiting for room in
// its outbound queue.
func (m *metrics) Throttled(start bool) {
	if start {
		m.throttles.Inc()
		m.throttled.Inc()
		return
	}
	m.throttled.Dec()
}

// ReadOnlySession counts a session connected in read-only mode.
func (m *metrics) ReadOnlySession() { m.readOnlySessions.Inc() }

// WatchesRefused counts watches refused by MaxWatchesPerSession.
func (m *metrics) WatchesRefused(op string, n int) {
	m.watchesRefused.WithLabelValues(op).Add(float64(n))
}
