package reconfig

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"coord/fsm"

	"coord/server/replica"
	"coord/server/sessions"
)

// TestRenderConfigNumbers: numbers are kept by raft address, taken from
// the id's trailing number, else the lowest free one; client addresses come
// from what the server knows or the current text.
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
	current := "server.5=10.0.0.3:7000:7001:observer;10.0.0.3:2181\n"
	got, complete := k.renderConfig(servers, current, 1)
	want := "server.1=10.0.0.1:7000:7001:participant;10.0.0.1:2181\n" +
		"server.2=10.0.0.2:7000:7001:participant;10.0.0.2:2181\n" +
		"server.5=10.0.0.3:7000:7001:observer;10.0.0.3:2181\n"
	if got != want || !complete {
		t.Fatalf("renderConfig =\n%s(complete %v), want\n%s", got, complete, want)
	}
}

// TestRenderConfigRoles: a voter is a participant; a non-voter keeps the
// role its line has (the text is what a new leader promotes by), one new
// to the text takes the role it joined with, else observer; a role an
// operator set on the leader wins until the text changes.
func TestRenderConfigRoles(t *testing.T) {
	k := New(Config{}, nil, knownServers{
		"s2": {ID: "s2", Observer: true},                                                     // its flags say observer; the text says participant
		"s3": {ID: "s3"},                                                                     // its flags say voter; the text says observer
		"s4": {ID: "s4", GRPCAddr: "10.0.0.4:7001", ZKAddr: "10.0.0.4:2181"},                 // joined as a voter, not in the text yet
		"s5": {ID: "s5", GRPCAddr: "10.0.0.5:7001", ZKAddr: "10.0.0.5:2181", Observer: true}, // joined as an observer
	})
	servers := []replica.Member{
		{ID: "s1", Addr: "10.0.0.1:7000", Voter: true},
		{ID: "s2", Addr: "10.0.0.2:7000"},
		{ID: "s3", Addr: "10.0.0.3:7000"},
		{ID: "s4", Addr: "10.0.0.4:7000"},
		{ID: "s5", Addr: "10.0.0.5:7000"},
	}
	current := "server.1=10.0.0.1:7000:7001:observer;10.0.0.1:2181\n" +
		"server.2=10.0.0.2:7000:7001:participant;10.0.0.2:2181\n" +
		"server.3=10.0.0.3:7000:7001:observer;10.0.0.3:2181\n"
	roles := func() string {
		text, _ := k.renderConfig(servers, current, 7)
		var out []string
		for _, l := range parseConfigText(text) {
			out = append(out, fmt.Sprintf("%d:%v", l.N, l.Observer))
		}
		return strings.Join(out, " ")
	}
	if got, want := roles(), "1:false 2:false 3:true 4:false 5:true"; got != want {
		t.Errorf("roles (n:observer) %s, want %s", got, want)
	}
	// An operator makes s2 an observer and s3 a participant on this
	// leader while the text has version 7 (SetRole reads it from the
	// state machine, which this test has not: set it by hand).
	k.roles = map[string]roleSet{"10.0.0.2:7000": {observer: true, at: 7}, "10.0.0.3:7000": {observer: false, at: 7}}
	if got, want := roles(), "1:false 2:true 3:false 4:false 5:true"; got != want {
		t.Errorf("after the operator's roles: %s, want %s", got, want)
	}
	// The text changed since (another server's reconfig): it decides.
	k.roles = map[string]roleSet{"10.0.0.2:7000": {observer: true, at: 6}}
	if got, want := roles(), "1:false 2:false 3:true 4:false 5:true"; got != want {
		t.Errorf("with a stale operator's role: %s, want %s", got, want)
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
