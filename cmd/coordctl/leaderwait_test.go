package main

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"coord/api"
)

// electingAdmin is an Admin server that knows no leader for its first
// noLeader Status calls and leads after them.
type electingAdmin struct {
	api.UnimplementedAdminServer
	noLeader int32
	calls    atomic.Int32
}

func (e *electingAdmin) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	if e.calls.Add(1) <= e.noLeader {
		return &api.StatusResponse{Id: "s1", Role: "follower"}, nil
	}
	return &api.StatusResponse{Id: "s1", Role: "leader", LeaderId: "s1"}, nil
}

func (e *electingAdmin) Members(context.Context, *api.MembersRequest) (*api.MembersResponse, error) {
	return &api.MembersResponse{Members: []*api.Member{{Id: "s1"}}}, nil
}

func serveElecting(t *testing.T, noLeader int32) (*electingAdmin, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &electingAdmin{noLeader: noLeader}
	srv := grpc.NewServer()
	api.RegisterAdminServer(srv, e)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return e, ln.Addr().String()
}

// TestLeaderAdminWaitsForAnElection: a command for the leader asked while
// the server knows none (an election under way) asks again until one is
// known, up to leaderWait; after that it says the server knows no leader.
func TestLeaderAdminWaitsForAnElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, addr := serveElecting(t, 3)
	g := &globals{servers: []string{addr}, dialTimeout: time.Second}
	a, _, err := g.leaderAdmin(ctx)
	if err != nil {
		t.Fatalf("leaderAdmin during a short election: %v", err)
	}
	a.Close()
	if n := e.calls.Load(); n != 4 {
		t.Errorf("Status asked %d times, want 4 (3 without a leader)", n)
	}

	defer func(w time.Duration) { leaderWait = w }(leaderWait)
	leaderWait = 300 * time.Millisecond
	_, addr = serveElecting(t, 1000)
	g = &globals{servers: []string{addr}, dialTimeout: time.Second}
	start := time.Now()
	_, _, err = g.leaderAdmin(ctx)
	if err == nil || !strings.Contains(err.Error(), "knows no leader") {
		t.Fatalf("leaderAdmin with no election in sight: %v", err)
	}
	if d := time.Since(start); d < leaderWait {
		t.Errorf("gave up after %v, before leaderWait %v", d, leaderWait)
	}
}

// TestHealthWaitsForAnElection: endpoint health asks a member that answers
// but knows no leader again until it knows one, up to leaderWait; after
// that the member is reported without a leader.
func TestHealthWaitsForAnElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, addr := serveElecting(t, 3)
	g := &globals{servers: []string{addr}, dialTimeout: time.Second}
	s := memberStatus{member: &api.Member{GrpcAddr: addr}}
	g.healthOf(ctx, &s, true)
	if s.err != nil || s.st.LeaderId != "s1" {
		t.Fatalf("health during a short election: %+v, %v", s.st, s.err)
	}
	if n := e.calls.Load(); n != 4 {
		t.Errorf("Status asked %d times, want 4 (3 without a leader)", n)
	}

	defer func(w time.Duration) { leaderWait = w }(leaderWait)
	leaderWait = 300 * time.Millisecond
	_, addr = serveElecting(t, 1000)
	s = memberStatus{member: &api.Member{GrpcAddr: addr}}
	start := time.Now()
	g.healthOf(ctx, &s, true)
	if s.err != nil || s.st.LeaderId != "" {
		t.Fatalf("health with no election in sight: %+v, %v", s.st, s.err)
	}
	if d := time.Since(start); d < leaderWait {
		t.Errorf("gave up after %v, before leaderWait %v", d, leaderWait)
	}
}
