package server

import (
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"coord/api"
	"coord/fsm"
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
		Name: "coord_server_connections_refused_total", Help: "Client connections closed by a limit: per_address_limit (MaxClientConns) or handshake_timeout.",
	}, []string{"reason"})
	m.throttles = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coord_server_connection_throttles_total", Help: "Times a client connection's outbound queue reached its bound and the server stopped reading its requests.",
	})
	m.throttled = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "coord_server_throttled_connections", Help: "Client connections whose requests are not being read now because their outbound queue is full.",
	})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(m.requests, m.latency, m.events, m.leaderLossDrops, m.notServing,
		m.acceptErrors, m.connsRefused, m.throttles, m.throttled,
		gauge("coord_server_serving", "1 if this server serves sessions (it has contact with a leader).", func() float64 {
			if s.Serving() {
				return 1
			}
			return 0
		}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_server_proposal_mismatches_total",
			Help: "Entries of this server's origin that carried another command than the request waiting for them (always 0; the request fails)."},
			func() float64 { return float64(s.fsm.mismatched.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_server_snapshot_failed_requests_total",
			Help: "Requests failed (ConnectionLoss) because a snapshot was installed while they waited for their entries."},
			func() float64 { return float64(s.fsm.skipped.Load()) }),
		gauge("coord_fsm_znodes", "Znodes in this server's state.", func() float64 { return float64(s.fsm.fsm.View().NodeCount()) }),
		gauge("coord_fsm_last_zxid", "Zxid of the last applied command.", func() float64 { return float64(s.fsm.fsm.LastZxid()) }),
		gauge("coord_session_sessions", "Sessions in the cluster's session table.", func() float64 {
			return float64(s.tracker.Len())
		}),
		gauge("coord_session_connections", "Sessions connected to this server.", func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(len(s.conns))
		}),
		gauge("coord_watch_watches", "Watches registered on this server.", func() float64 { return float64(s.watches.Len()) }),
		gauge("coord_raft_leader", "1 if this server is the raft leader.", func() float64 {
			if s.raft != nil && s.raft.State() == raft.Leader {
				return 1
			}
			return 0
		}),
		gauge("coord_raft_term", "Current raft term.", func() float64 { return float64(s.raft.CurrentTerm()) }),
		gauge("coord_raft_commit_index", "Raft commit index as this server knows it.", func() float64 { return float64(s.raft.CommitIndex()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coord_raft_fast_applied_entries_total",
			Help: "Log entries this server applied as soon as the leader reported them committed (its Commits stream or its answer to a forwarded write), before raft did."},
			func() float64 { return float64(s.fsm.fast.Load()) }),
		gauge("coord_raft_applied_index", "Raft index of the last entry applied here.", func() float64 { return float64(s.fsm.applied.Load()) }),
	)
	return m
}

// observe counts an answered request.
func (m *metrics) observe(op string, code int32, start time.Time) {
	m.requests.WithLabelValues(op, fsm.Code(code).String()).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// opName names a request's operation as ZooKeeper does.
func opName(req *api.Request) string {
	switch req.Op.(type) {
	case *api.Request_Ping:
		return "ping"
	case *api.Request_Close:
		return "closeSession"
	case *api.Request_Create:
		return "create"
	case *api.Request_Delete:
		return "delete"
	case *api.Request_SetData:
		return "setData"
	case *api.Request_SetAcl:
		return "setACL"
	case *api.Request_Multi:
		return "multi"
	case *api.Request_GetData:
		return "getData"
	case *api.Request_Exists:
		return "exists"
	case *api.Request_GetChildren:
		return "getChildren"
	case *api.Request_GetAcl:
		return "getACL"
	case *api.Request_Sync:
		return "sync"
	case *api.Request_AddWatch:
		return "addWatch"
	case *api.Request_RemoveWatches:
		return "removeWatches"
	case *api.Request_CheckWatches:
		return "checkWatches"
	case *api.Request_Auth:
		return "auth"
	case *api.Request_GetAllChildrenNumber:
		return "getAllChildrenNumber"
	case *api.Request_GetEphemerals:
		return "getEphemerals"
	case *api.Request_MultiRead:
		return "multiRead"
	case *api.Request_SetWatches:
		return "setWatches"
	case *api.Request_WhoAmI:
		return "whoAmI"
	}
	return "unknown"
}

// throttle follows a connection that starts or stops waiting for room in
// its outbound queue.
func (m *metrics) throttle(start bool) {
	if start {
		m.throttles.Inc()
		m.throttled.Inc()
		return
	}
	m.throttled.Dec()
}
