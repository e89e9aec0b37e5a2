package reconfig

import (
	"context"
	"testing"

	"coord/fsm"

	"coord/server/replica"
	"coord/server/sessions"
)

// TestRenderConfigNumbers: numbers are kept by raft address, taken from
// the id's trailing number, else the lowest free one; roles follow raft's
// suffrage; client addresses come from what the server knows or the
// current text.
func TestRenderConfigNumbers(t *testing.T) {
	k := New(Config{}, nil, knownServers{
		"s1":    {ID: "s1", GRPCAddr: "10.0.0.1:7001", ZKAddr: "10.0.0.1:2181"},
		"alpha": {ID: "alpha", GRPCAddr: "10.0.0.2:7001", ZKAddr: "10.0.0.2:2181"},
		"s7":    {ID: "s7", GRPCAddr: "10.0.0.3:7001"},
	})
	servers := []replica.Member{
		{ID: "s7", Addr: "10.0.0.3:7000"},
		{ID: "alpha", Addr: "10.0.0.2:7000", Voter: true},
		{ID: "s1", Addr: "10.0.0.1:7000", Voter: true},
	}
	// s7's raft address is server.5 in the current text, with its client
	// address.
	current := "server.5=10.0.0.3:7000:7001:participant;10.0.0.3:2181\n"
	got, complete := k.renderConfig(servers, current)
	want := "server.1=10.0.0.1:7000:7001:participant;10.0.0.1:2181\n" +
		"server.2=10.0.0.2:7000:7001:participant;10.0.0.2:2181\n" +
		"server.5=10.0.0.3:7000:7001:observer;10.0.0.3:2181\n"
	if got != want || !complete {
		t.Fatalf("renderConfig =\n%s(complete %v), want\n%s", got, complete, want)
	}
}

// knownServers is a Server that knows the servers it holds and does nothing.
type knownServers map[string]Member

func (m knownServers) Members() map[string]Member                  { return m }
func (knownServers) Learn(Member)                                  {}
func (knownServers) Discover(context.Context)                      {}
func (knownServers) Audit(string, *fsm.Command, fsm.Result, error) {}

func TestReconfigTarget(t *testing.T) {
	cur := parseConfigText("server.1=h:1:2:participant;h:3\nserver.2=h:4:5:participant;h:6\nversion=1")
	if len(cur) != 2 {
		t.Fatalf("parsed %v", cur)
	}
	tgt, err := reconfigTarget(cur, &sessions.ReconfigArgs{Joining: "server.3=h:7:8:observer;9", Leaving: "1"})
	if err != nil || len(tgt) != 2 || tgt[0].N != 2 || tgt[1].N != 3 || !tgt[1].Observer || tgt[1].Client != "0.0.0.0:9" {
		t.Fatalf("incremental target %+v %v", tgt, err)
	}
	for _, bad := range []sessions.ReconfigArgs{
		{Leaving: "x"}, {Joining: "server.3=h:7:8"}, {Joining: "server.3=h:7:8:boss;9"}, {Joining: "server.3=h:0:8;9"},
		{Joining: "server.3=h:1:8;9"}, // h:1 is server.1's raft address
	} {
		if _, err := reconfigTarget(cur, &bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	tgt, err = reconfigTarget(cur, &sessions.ReconfigArgs{NewMembers: "server.4=h:10:11:participant;h:12\nversion=5"})
	if err != nil || len(tgt) != 1 || tgt[0].String() != "server.4=h:10:11:participant;h:12" {
		t.Fatalf("non-incremental target %+v %v", tgt, err)
	}
}
