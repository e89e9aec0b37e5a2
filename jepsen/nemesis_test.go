package jepsen

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"
)

// TestNemeses runs a short seeded run per nemesis (of nemesis_*.go) and
// asserts, from the evidence each fault records in its description, that
// the fault really took effect, that it was healed, and that every checker
// passes afterwards.
//
//	go test -v -run TestNemeses -timeout 10m ./jepsen/
//	go test -v -run 'TestNemeses/latency' ./jepsen/
func TestNemeses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 15 s per nemesis")
	}
	bin, err := BuildCoord(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		nemesis string
		root    bool
		// evidence must match the description of at least one fault
		// that was injected without error.
		evidence string
		check    func(t *testing.T, desc string)
		// all must each match some fault's description.
		all []string
		// power: a power or disk nemesis of issue 30 (powerTests).
		power bool
	}{
		{nemesis: "partition-bridge", root: true, evidence: `bridge s\d sees .*probe: s\d->s\d cut, s\d->s\d ok, s\d->s\d ok`},
		{nemesis: "partition-oneway", root: true,
			evidence: `healed: s\d counted (INPUT DROP [1-9]\d* packets.*OUTPUT ACCEPT [1-9]|INPUT ACCEPT [1-9]\d* packets.*OUTPUT DROP [1-9])`},
		{nemesis: "loss", root: true, evidence: `healed: s\d counted INPUT DROP [1-9]\d* packets, OUTPUT DROP [1-9]\d* packets`},
		{nemesis: "latency", root: true, evidence: `(tbf|netem).*took .* before, .* after; healed: s\d qdisc after heal: qdisc noqueue`,
			check: func(t *testing.T, desc string) {
				m := regexp.MustCompile(`took (\S+) before, (\S+) after`).FindStringSubmatch(desc)
				before, _ := time.ParseDuration(m[1])
				after, _ := time.ParseDuration(m[2])
				if after < before+50*time.Millisecond {
					t.Errorf("GET /metrics took %v before the fault and %v during it", before, after)
				}
			}},
		{nemesis: "kill-majority", evidence: `kill -9 s\d,s\d \(2 of 3 voters\)`},
		{nemesis: "membership", evidence: `members s1:voter s2:voter s3:voter -> .*; healed: members after heal s1:voter s2:voter s3:voter$`,
			all: []string{`-> s1:voter s2:voter s3:voter s4\S*:observer;`, `remove voter s\d .*-> s\d:voter s\d:voter;`, `new leader s\d`}},
		{nemesis: "disk-full", root: true, evidence: `probe write: .*no space left on device.*; healed: s3 (kept running|exited)`},
		{nemesis: "disk-slow", root: true, evidence: `probe: 10 dsync writes of 4 KiB took (\S+); healed: throttled writes served: \S+ Write [1-9]`,
			check: func(t *testing.T, desc string) {
				m := regexp.MustCompile(`probe: 10 dsync writes of 4 KiB took ([0-9.]+[mµn]?s)`).FindStringSubmatch(desc)
				if d, _ := time.ParseDuration(m[1]); d < 100*time.Millisecond {
					t.Errorf("10 throttled dsync writes took only %v", d)
				}
			}},
		{nemesis: "power-loss", root: true, power: true, evidence: `^power off s\d \(1 of 3 servers\); s\d lost [1-9]\d* unsynced changes \[.*write of wal/`},
		{nemesis: "power-loss-minority", root: true, power: true, evidence: `^power off s\d \(1 of 3 servers\); s\d lost [1-9]\d* unsynced changes`},
		{nemesis: "power-loss-all", root: true, power: true, evidence: `^power off s1,s2,s3 \(3 of 3 servers\); s1 lost [1-9]\d* unsynced changes.*; s2 lost [1-9]\d* .*; s3 lost [1-9]\d* `},
		{nemesis: "torn-write", root: true, power: true, evidence: `right after a write of its (raft log|snapshot) \((wal/\S+\.wal|snapshots/\S+/state\.bin)\); s\d lost [1-9]\d* unsynced changes( \[[^]]*\])? \(torn \S+: kept \d+ of [1-9]\d* bytes`},
		{nemesis: "fsync-error", root: true, power: true, evidence: `^fsync fails with EIO on s\d's data directory; [1-9]\d* fsyncs failed, the server stopped after \S+; healed: s\d stopped: .*level=ERROR msg="raft store failed: the server must stop".*input/output error`},
		{nemesis: "bitflip", root: true, power: true, evidence: `^kill -9 s\d; in its (log|snapshot|stable) \(\S+.*\) flip bit [0-7] of byte \d+ of \d+ \(0x[0-9a-f]{2} -> 0x[0-9a-f]{2}\); s\d (refused to start: .*(fails its checksum|CRC)|started and is healthy)`},
		{nemesis: "clock", root: true, evidence: `timens_offsets: monotonic -?[1-9]\d* 0 boottime -?[1-9]\d* 0`},
	} {
		t.Run(tc.nemesis, func(t *testing.T) {
			if tc.root && !root {
				t.Skip("needs root")
			}
			if tc.power {
				powerTests(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			rep, err := Run(ctx, Config{
				Voters: 3, Duration: 10 * time.Second, Seed: 5,
				Nemeses:   []string{tc.nemesis},
				Workloads: []string{"register", "sessions", "sequential"},
				Workers:   2, Interval: 700 * time.Millisecond, Hold: 1500 * time.Millisecond,
				Bin: bin, Dir: t.TempDir(), Log: testLog(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range rep.Notes {
				t.Errorf("note: %s", n)
			}
			re := regexp.MustCompile(tc.evidence)
			seen := false
			for _, f := range rep.Faults {
				t.Logf("fault %s: %s (err %q)", f.Nemesis, f.Desc, f.Err)
				if f.Err != "" {
					t.Errorf("fault %s: %s", f.Nemesis, f.Err)
					continue
				}
				if re.MatchString(f.Desc) {
					seen = true
					if tc.check != nil {
						tc.check(t, f.Desc)
					}
				}
			}
			for _, want := range tc.all {
				found := false
				for _, f := range rep.Faults {
					found = found || regexp.MustCompile(want).MatchString(f.Desc)
				}
				if !found {
					t.Errorf("no fault shows %q", want)
				}
			}
			if !seen {
				t.Errorf("no fault shows %q", tc.evidence)
			}
			for _, v := range rep.Verdicts {
				t.Logf("%s: %s: %s %v", v.Checker, v.Result, v.Summary, v.Details)
				if v.Result != Pass {
					t.Errorf("checker %s: %s", v.Checker, v.Result)
				}
			}
			if len(rep.Verdicts) == 0 {
				t.Errorf("no verdicts")
			}
		})
	}
}
