package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaultsAndLists(t *testing.T) {
	c, err := parseConfig([]string{"-local", "3", "-workloads", "create, set", "-sessions", "1,16,64", "-inflight", "1,8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.local != 3 || len(c.servers) != 0 {
		t.Errorf("local %d servers %v", c.local, c.servers)
	}
	if !slices.Equal(c.workloads, []string{"create", "set"}) || !slices.Equal(c.sessions, []int{1, 16, 64}) || !slices.Equal(c.inflight, []int{1, 8}) {
		t.Errorf("workloads %v sessions %v inflight %v", c.workloads, c.sessions, c.inflight)
	}
	if c.duration != 10*time.Second || c.dataSize != 100 || c.basePort != 3880 || c.readPercent != 90 || c.failover {
		t.Errorf("defaults: duration %v data %d base %d read %v failover %v", c.duration, c.dataSize, c.basePort, c.readPercent, c.failover)
	}

	c, err = parseConfig([]string{"-servers", "a:1, b:2,,", "-workloads", "all", "-duration", "3s", "-json", "-"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.servers, []string{"a:1", "b:2"}) || !slices.Equal(c.workloads, workloads) || c.duration != 3*time.Second || c.jsonPath != "-" {
		t.Errorf("servers %v workloads %v duration %v json %q", c.servers, c.workloads, c.duration, c.jsonPath)
	}
	if !slices.Equal(c.inflight, []int{1}) {
		t.Errorf("inflight default %v, want [1]", c.inflight)
	}
}

func TestParseConfigFailoverAlone(t *testing.T) {
	c, err := parseConfig([]string{"-local", "3", "-failover"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.workloads) != 0 || c.failoverRounds != 5 {
		t.Errorf("-failover alone: workloads %v rounds %d, want none and 5", c.workloads, c.failoverRounds)
	}
	c, err = parseConfig([]string{"-local", "3", "-failover", "-workloads", "get"}, io.Discard)
	if err != nil || !slices.Equal(c.workloads, []string{"get"}) {
		t.Errorf("-failover -workloads get: %v %v", c.workloads, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{nil, "-servers"},
		{[]string{"-servers", "a:1", "-local", "3"}, "exclude"},
		{[]string{"-local", "0"}, "-local"},
		{[]string{"-local", "12"}, "at most 9"},
		{[]string{"-servers", "a:1", "-base-port", "5000"}, "only with -local"},
		{[]string{"-servers", "a:1", "-server-log-level", "info"}, "only with -local"},
		{[]string{"-local", "3", "-base-port", "65300"}, "-base-port"},
		{[]string{"-local", "3", "-workloads", "delete"}, `unknown workload "delete"`},
		{[]string{"-local", "3", "-workloads", "set,set"}, "twice"},
		{[]string{"-local", "3", "-workloads", ","}, "empty"},
		{[]string{"-local", "3", "-sessions", "1,0"}, `-sessions: "0"`},
		{[]string{"-local", "3", "-sessions", "x"}, `-sessions: "x"`},
		{[]string{"-local", "3", "-sessions", ""}, "-sessions: empty"},
		{[]string{"-local", "3", "-inflight", "-1"}, "-inflight"},
		{[]string{"-local", "3", "-sessions", "1000", "-inflight", "100"}, "at most 65536"},
		{[]string{"-local", "3", "-duration", "0s"}, "-duration"},
		{[]string{"-local", "3", "-warmup", "-1s"}, "-warmup"},
		{[]string{"-local", "3", "-read-percent", "101"}, "-read-percent"},
		{[]string{"-local", "3", "-keys", "0"}, "-keys"},
		{[]string{"-servers", "a:1", "-failover"}, "needs -local"},
		{[]string{"-local", "2", "-failover"}, ">= 3 voters"},
		{[]string{"-local", "3", "-failover", "-failover-rounds", "0"}, "-failover-rounds"},
		{[]string{"-local", "3", "-protocol", "zk", "-big-wipe"}, "-big-wipe needs -big"},
		{[]string{"-servers", "a:1", "-snapshot-during"}, "-snapshot-during needs -local"},
		{[]string{"-local", "3", "extra"}, "unexpected argument"},
		{[]string{"-local", "3", "-nosuchflag"}, "not defined"},
	} {
		_, err := parseConfig(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseConfig(%q) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestParseConfigHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseConfig([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-failover") {
		t.Fatalf("-h: err %v, usage %q", err, out.String())
	}
}

func TestRunRejectsBadFlagsWithoutStartingAnything(t *testing.T) {
	var stderr strings.Builder
	if code := run([]string{"-local", "3", "-sessions", "0"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2; stderr %q", code, stderr.String())
	}
}

func TestParseConfigProtocolsAndZooKeeper(t *testing.T) {
	c, err := parseConfig([]string{"-local", "3"}, io.Discard)
	if err != nil || c.protocol != "grpc" || c.zkSessionTimeout != 10*time.Second || c.watchKeys != 4 || c.prewarm != 0 {
		t.Errorf("defaults: protocol %q session timeout %v watch keys %d prewarm %v err %v", c.protocol, c.zkSessionTimeout, c.watchKeys, c.prewarm, err)
	}
	c, err = parseConfig([]string{"-local", "3", "-protocol", "zk", "-zk-session-timeout", "4s", "-workloads", "watch", "-watch-keys", "8"}, io.Discard)
	if err != nil || c.protocol != "zk" || c.zkSessionTimeout != 4*time.Second || !slices.Equal(c.workloads, []string{"watch"}) || c.watchKeys != 8 {
		t.Errorf("-local -protocol zk: %+v %v", c, err)
	}
	// -zookeeper speaks ZooKeeper's protocol without being told.
	c, err = parseConfig([]string{"-zookeeper", "3", "-failover", "-zk-heap", "512m", "-zk-jvm-flags", "-XX:+UseG1GC", "-keep", "-base-port", "6000", "-prewarm", "10s"}, io.Discard)
	if err != nil || c.protocol != "zk" || c.zookeeper != 3 || c.local != 0 || !c.failover || c.zkHeap != "512m" || c.basePort != 6000 || c.prewarm != 10*time.Second {
		t.Errorf("-zookeeper 3: %+v %v", c, err)
	}
	if c.zkClasspath != "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar" || c.zkJava != "java" {
		t.Errorf("-zookeeper defaults: classpath %q java %q", c.zkClasspath, c.zkJava)
	}
	c, err = parseConfig([]string{"-protocol", "zk", "-servers", "zk1:2181,zk2:2181"}, io.Discard)
	if err != nil || !slices.Equal(c.servers, []string{"zk1:2181", "zk2:2181"}) {
		t.Errorf("-protocol zk -servers: %v %v", c.servers, err)
	}
	if !slices.Contains(workloads, "watch") {
		t.Errorf("all = %v lacks watch", workloads)
	}
}

func TestParseConfigProtocolErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-local", "3", "-protocol", "http"}, `-protocol "http"`},
		{[]string{"-zookeeper", "3", "-protocol", "grpc"}, "-protocol zk"},
		{[]string{"-zookeeper", "3", "-local", "3"}, "exclude"},
		{[]string{"-zookeeper", "3", "-servers", "a:1"}, "exclude"},
		{[]string{"-zookeeper", "10"}, "at most 9"},
		{[]string{"-zookeeper", "-1"}, ">= 1"},
		{[]string{"-zookeeper", "3", "-coord-bin", "/x"}, "only with -local"},
		{[]string{"-zookeeper", "3", "-server-flags", "-x"}, "only with -local"},
		{[]string{"-local", "3", "-zk-heap", "2g"}, "only with -zookeeper"},
		{[]string{"-servers", "a:1", "-zk-classpath", "x.jar"}, "only with -zookeeper"},
		{[]string{"-local", "3", "-zk-session-timeout", "5s"}, "only with -protocol zk"},
		{[]string{"-local", "3", "-protocol", "zk", "-zk-session-timeout", "1ms"}, "-zk-session-timeout"},
		{[]string{"-zookeeper", "3", "-zk-heap", "1 g"}, "-zk-heap"},
		{[]string{"-zookeeper", "2", "-failover"}, ">= 3 voters"},
		{[]string{"-protocol", "zk", "-servers", "a:1", "-failover"}, "needs -local or -zookeeper"},
		{[]string{"-local", "3", "-watch-keys", "0"}, "-watch-keys"},
		{[]string{"-local", "3", "-keys", "5", "-watch-keys", "6"}, "-watch-keys"},
		{[]string{"-local", "3", "-prewarm", "-1s"}, "-prewarm"},
	} {
		_, err := parseConfig(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseConfig(%q) = %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func TestParseRuns(t *testing.T) {
	c, err := parseConfig([]string{"-local", "3", "-runs", "create:1x1, set:64x8,get:16,watch:64,set:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []runSpec{{"create", 1, 1}, {"set", 64, 8}, {"get", 16, 1}, {"watch", 64, 1}, {"set", 1, 1}}
	if !slices.Equal(c.runs, want) {
		t.Errorf("runs %v, want %v", c.runs, want)
	}
	if !slices.Equal(c.workloads, []string{"create", "set", "get", "watch"}) {
		t.Errorf("workloads %v", c.workloads)
	}
	// Without -runs: the cross product, watch once per session count.
	c, err = parseConfig([]string{"-local", "3", "-workloads", "set,watch", "-sessions", "1,16", "-inflight", "1,8"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want = []runSpec{{"set", 1, 1}, {"set", 1, 8}, {"set", 16, 1}, {"set", 16, 8}, {"watch", 1, 1}, {"watch", 16, 1}}
	if !slices.Equal(c.runs, want) {
		t.Errorf("cross runs %v, want %v", c.runs, want)
	}
	c, err = parseConfig([]string{"-local", "3", "-failover"}, io.Discard)
	if err != nil || len(c.runs) != 0 {
		t.Errorf("-failover alone: runs %v %v", c.runs, err)
	}
	for _, bad := range []struct{ runs, want string }{
		{"set", "workload:SESSIONSxINFLIGHT"},
		{"delete:1x1", "workload:SESSIONSxINFLIGHT"},
		{"set:0x1", "sessions"},
		{"set:ax1", "sessions"},
		{"set:1x0", "inflight"},
		{"set:1x", "inflight"},
		{"set:1x1001", "inflight"},
		{"watch:16x2", "watch takes only"},
		{"set:1000x100", "65536"},
		{",", "empty"},
	} {
		_, err := parseConfig([]string{"-local", "3", "-runs", bad.runs}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("-runs %q: %v, want an error containing %q", bad.runs, err, bad.want)
		}
	}
	if _, err := parseConfig([]string{"-local", "3", "-runs", "set:1", "-sessions", "4"}, io.Discard); err == nil || !strings.Contains(err.Error(), "replaces") {
		t.Errorf("-runs with -sessions: %v", err)
	}
}
