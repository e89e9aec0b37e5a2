package server

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"coord/api"
	"coord/server/console"
	"coord/server/internal/logbridge"
	"coord/server/replica"
)

// startHTTP serves /metrics (Prometheus), /health and the admin reads as
// JSON (/status, /members) on Config.HTTPAddr, the console under /ui/
// (unless Config.NoConsole), and /debug/pprof/ with Config.Pprof.
func (s *Server) startHTTP() error {
	lis, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("server: HTTP listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/health", s.serveHealth)
	if s.cfg.Pprof {
		// Only with -pprof: profiles show anyone who reaches this port the
		// server's heap, goroutines, CPU and execution trace. Without it
		// /debug/pprof/ is 404 (no pattern matches).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	admin := &adminService{s: s}
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := admin.Status(r.Context(), &api.StatusRequest{})
		writeJSON(w, st, err)
	})
	mux.HandleFunc("/members", func(w http.ResponseWriter, r *http.Request) {
		m, err := admin.Members(r.Context(), &api.MembersRequest{})
		writeJSON(w, m, err)
	})
	if !s.cfg.NoConsole {
		// The console (server/console): a client of this server's own
		// session layer, so every read and write goes through the ACL
		// checks of the identities its user signed in with.
		s.console = console.New(console.Config{Log: s.log.With("component", "console"), Idle: s.cfg.ConsoleIdle,
			MaxRequestBytes: int64(s.cfg.MaxRequestBytes) * 8}, consoleServer{s})
		mux.Handle("/ui/", s.console.Handler())
		mux.Handle("GET /ui", s.console.Handler())
		mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	}
	if s.tls != nil {
		lis = tls.NewListener(lis, s.tls.serverConfig())
	}
	s.httpLis = lis
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: log.New(logbridge.Writer(s.log.With("component", "http")), "", 0)}
	go s.http.Serve(lis)
	return nil
}

// HTTPAddr returns the HTTP listener's address ("" when HTTP is off).
func (s *Server) HTTPAddr() string {
	if s.httpLis == nil {
		return ""
	}
	return s.httpLis.Addr().String()
}

// serveHealth answers 200 when this server is part of a cluster with a
// leader it has heard from and serves sessions (leaderloss.go), 503
// otherwise.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	_, leader := s.rep.LeaderWithID()
	state := s.rep.Role()
	serving := s.Serving()
	healthy := leader != "" && state != replica.Shutdown && state != replica.Candidate && serving
	body := map[string]any{"id": s.cfg.ID, "role": s.Role(), "leader": string(leader), "healthy": healthy,
		"serving": serving, "applied_index": s.rep.Applied()}
	if age := s.leaderContactAge(time.Now()); age < math.MaxInt64 {
		body["leader_contact_age_ms"] = age.Milliseconds()
	}
	w.Header().Set("Content-Type", "application/json")
	if !healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}
