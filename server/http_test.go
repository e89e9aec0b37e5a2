package server

import (
	"coord/vocab"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// /metrics speaks Prometheus and counts requests; /health and /status
// answer JSON.
func TestHTTPEndpoints(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/m", "", vocab.ModePersistent))
	if r := s.create("/m", "", vocab.ModePersistent); vocab.Code(r.Err) != vocab.NodeExists {
		t.Fatalf("second create: %v", r)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + srv.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`coord_server_requests_total{code="ok",op="create"} 1`,
		`coord_server_requests_total{code="node already exists",op="create"} 1`,
		"coord_fsm_znodes 5", "coord_raft_leader 1", "coord_session_connections 1",
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q:\n%s", code, want, body)
		}
	}
	code, body = get("/health")
	var h map[string]any
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 || h["healthy"] != true || h["role"] != "leader" {
		t.Fatalf("/health %d %s", code, body)
	}
	code, body = get("/status")
	if code != 200 || !strings.Contains(body, `"role":"leader"`) {
		t.Fatalf("/status %d %s", code, body)
	}
}
