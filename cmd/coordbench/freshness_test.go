package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestFreshnessRows(t *testing.T) {
	// s2: 4 writes, 3 fresh at the first read; s3: 2 writes, none fresh;
	// o4: 2 writes, both fresh.
	s2 := &freshTally{server: "s2", role: "follower"}
	for _, lag := range []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 150 * time.Microsecond} {
		s2.add(1, lag)
	}
	s2.add(3, 900*time.Microsecond) // two rereads
	s3 := &freshTally{server: "s3", role: "follower"}
	s3.add(2, 400*time.Microsecond)
	s3.add(5, 2*time.Millisecond)
	s3.addErr(zk.ErrConnectionClosed)
	o4 := &freshTally{server: "s4", role: "observer"}
	o4.add(1, 120*time.Microsecond)
	o4.add(1, 130*time.Microsecond)

	rows := freshnessRows([]*freshTally{s2, s3, o4})
	type want struct {
		server, role          string
		writes, fresh         uint64
		pct                   float64
		p50, p99, max         time.Duration
		rereads, errorsWanted uint64
	}
	us := time.Microsecond
	for i, w := range []want{
		{"s2", "follower", 4, 3, 75, 150 * us, 900 * us, 900 * us, 2, 0},
		{"s3", "follower", 2, 0, 0, 400 * us, 2000 * us, 2000 * us, 5, 1},
		{"s4", "observer", 2, 2, 100, 120 * us, 130 * us, 130 * us, 0, 0},
		{"all", "follower", 6, 3, 50, 200 * us, 2000 * us, 2000 * us, 7, 1},
		{"all", "observer", 2, 2, 100, 120 * us, 130 * us, 130 * us, 0, 0},
		{"all", "all", 8, 5, 62.5, 150 * us, 2000 * us, 2000 * us, 7, 1},
	} {
		if i >= len(rows) {
			t.Fatalf("%d rows, want 6: %+v", len(rows), rows)
		}
		r := rows[i]
		// Percentiles come from the histogram: never below the exact
		// value and less than histRelErr above it.
		near := func(got, want time.Duration) bool {
			return got >= want && float64(got-want) <= histRelErr*float64(want)
		}
		if r.Server != w.server || r.Role != w.role || r.Writes != w.writes || r.Fresh != w.fresh || r.FreshPercent != w.pct ||
			!near(r.LagP50, w.p50) || !near(r.LagP99, w.p99) || r.LagMax != w.max || r.Rereads != w.rereads || r.Errors != w.errorsWanted {
			t.Errorf("row %d = %+v, want %+v", i, r, w)
		}
	}
	if len(rows) != 6 {
		t.Errorf("%d rows, want 6", len(rows))
	}

	// No readers' writes at all: zeros, not NaN.
	empty := freshnessRows([]*freshTally{{server: "zk2", role: "follower"}})
	if last := empty[len(empty)-1]; last.Writes != 0 || last.FreshPercent != 0 || last.LagP99 != 0 {
		t.Errorf("empty: %+v", last)
	}
}

func TestPrintFreshness(t *testing.T) {
	zk2 := &freshTally{server: "zk2", role: "follower"}
	zk2.add(1, 249*time.Microsecond) // reported as its bucket's top, 249.855 µs
	zk2.add(2, 1500*time.Microsecond)
	zk2.addErr(errors.New("zk: connection closed"))
	res := freshnessResult{Writer: "zk1", Path: "/coordbench/keys/p000/key-0000000000000000", Writes: 2,
		SetP50: 800 * time.Microsecond, SetP99: 1200 * time.Microsecond, Rows: freshnessRows([]*freshTally{zk2}),
		ErrorKinds: zk2.errs, Disconnects: 1}
	var b strings.Builder
	printFreshness(&b, res)
	out := b.String()
	for _, line := range []string{
		"# freshness: a session on zk1 (leader) sets /coordbench/keys/p000/key-0000000000000000 2 times (after 10 unreported); right after each ack one session on",
		"# writer's setData: p50 0.800 ms, p99 1.200 ms",
		"server   role       writes  fresh(%)   p50(ms)   p99(ms)   max(ms)  rereads  errors",
		"zk2      follower        2      50.0     0.250     1.500     1.500        1       1",
		"all      follower        2      50.0     0.250     1.500     1.500        1       1",
		"all      all             2      50.0     0.250     1.500     1.500        1       1",
		"    error: 1 × connection closed",
		"    warning: sessions lost their server 1 times",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("report lacks %q:\n%s", line, out)
		}
	}
}

func TestParseConfigFreshness(t *testing.T) {
	c, err := parseConfig([]string{"-zookeeper", "3", "-observers", "1", "-freshness"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.freshness || c.freshnessWrites != 1500 || c.observers != 1 || len(c.workloads) != 0 || c.protocol != "zk" {
		t.Errorf("-freshness alone: %+v", c)
	}
	c, err = parseConfig([]string{"-local", "3", "-protocol", "zk", "-freshness", "-freshness-writes", "200", "-workloads", "get"}, io.Discard)
	if err != nil || c.freshnessWrites != 200 || len(c.workloads) != 1 {
		t.Errorf("-freshness -workloads get: %+v %v", c, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"-local", "3", "-freshness"}, "-protocol zk"},
		{[]string{"-local", "3", "-protocol", "zk", "-freshness-writes", "10"}, "only with -freshness"},
		{[]string{"-local", "3", "-protocol", "zk", "-freshness", "-freshness-writes", "0"}, "1..1000000"},
		{[]string{"-servers", "a:1", "-observers", "1"}, "-local or -zookeeper"},
		{[]string{"-local", "5", "-observers", "5"}, "at most 9"},
		{[]string{"-local", "3", "-observers", "1", "-failover"}, "-observers"},
	} {
		if _, err := parseConfig(bad.args, io.Discard); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error with %q", bad.args, err, bad.want)
		}
	}
}
