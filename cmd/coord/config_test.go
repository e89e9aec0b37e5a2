package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCapture runs coord with args and returns its exit code and what it
// wrote to standard error.
func runCapture(t *testing.T, args ...string) (int, string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stderr
	os.Stderr = f
	rc := run(args)
	os.Stderr = saved
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return rc, string(b)
}

func writeConfig(t *testing.T, settings map[string]any) string {
	t.Helper()
	b, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "coord.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A misspelt key in the -config file is refused (exit 2), naming the key
// and the flag it was likely meant to be, as is a value the flag cannot
// take. (-log-level x stops a coord that ignores the file's keys before it
// starts a server.)
func TestConfigFileRefusesWhatItCannotUse(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		settings map[string]any
		want     []string
	}{
		{map[string]any{"data-dri": "d"}, []string{`unknown key "data-dri"`, `did you mean "data-dir"?`}},
		{map[string]any{"max_sesion_timeout": "40s"}, []string{`unknown key "max_sesion_timeout"`, `did you mean "max-session-timeout"?`}},
		{map[string]any{"tick": 2000}, []string{`key "tick"`, `invalid value "2000" for -tick`}},
		{map[string]any{"tick": []string{"2s"}}, []string{"-tick takes one value, not a list"}},
	} {
		rc, out := runCapture(t, "-config", writeConfig(t, tc.settings), "-log-level", "x")
		if rc != 2 {
			t.Errorf("config %v: exit %d, want 2", tc.settings, rc)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("config %v: %q does not say %q", tc.settings, out, w)
			}
		}
	}
	if _, err := os.Stat("coord-data"); !os.IsNotExist(err) {
		t.Errorf("a refused config made ./coord-data (stat: %v)", err)
	}
}

// Every flag of a server can be set in the -config file, under its name:
// the file's keys are the FlagSet's flags, so a new flag cannot be missing
// from the file.
func TestConfigFileSetsEveryFlag(t *testing.T) {
	fs, _ := serverFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		for _, key := range []string{f.Name, strings.ReplaceAll(f.Name, "-", "_")} {
			fs, _ := serverFlags()
			fs.SetOutput(new(strings.Builder))
			if err := fs.Parse([]string{"-config", writeConfig(t, map[string]any{key: f.DefValue})}); err != nil {
				t.Fatal(err)
			}
			if err := applyConfigFile(fs); err != nil {
				t.Errorf("config file key %q: %v", key, err)
				continue
			}
			set := false
			fs.Visit(func(g *flag.Flag) { set = set || g.Name == f.Name })
			if !set {
				t.Errorf("config file key %q does not set -%s", key, f.Name)
			}
		}
	})
}

// The file's values reach the server's configuration as the same flags'
// would: "" turns gossip off (as -gossip-addr "" does; the file's "" was
// ignored), TLS files can be named, lists may be arrays, and flags given
// on the command line win.
func TestConfigFileValues(t *testing.T) {
	path := writeConfig(t, map[string]any{
		"gossip_addr": "", "tls-cert": "c.pem", "tls-key": "k.pem", "tls-ca": "ca.pem", "peer-cert": "p.pem",
		"observer": true, "tick": "1s", "leader-loss-fraction": 0.25, "max-client-conns": 7,
		"peers": []string{"s2=127.0.0.1:2,127.0.0.1:3", "s3=127.0.0.1:4,127.0.0.1:5,observer"}, "join": []string{"a:1", "b:2"},
		"max-session-timeout": "30s",
	})
	fs, build := serverFlags()
	if err := fs.Parse([]string{"-config", path, "-max-session-timeout", "25s"}); err != nil {
		t.Fatal(err)
	}
	opts, err := build()
	if err != nil {
		t.Fatal(err)
	}
	c := opts.cfg
	if c.GossipAddr != "" || c.TLSCert != "c.pem" || c.TLSKey != "k.pem" || c.TLSCA != "ca.pem" || c.PeerCert != "p.pem" ||
		!c.Observer || c.Bootstrap || c.Tick != time.Second || c.MinSessionTimeout != 2*time.Second ||
		c.LeaderLossFraction != 0.25 || c.MaxClientConns != 7 || len(c.Peers) != 2 || !c.Peers[1].Observer ||
		strings.Join(c.GossipJoin, ",") != "a:1,b:2" {
		t.Errorf("config from the file: %+v", c)
	}
	if c.MaxSessionTimeout != 25*time.Second {
		t.Errorf("-max-session-timeout 25s on the command line gave %v (the file says 30s)", c.MaxSessionTimeout)
	}
}

// Validation errors name the flag a user gave, not only the field
// (Config.LeaderLossFraction, session's Bounds.Max).
func TestFlagErrorsNameTheFlag(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-leader-loss-fraction", "0.9"}, "-leader-loss-fraction"},
		{[]string{"-max-session-timeout", "1s"}, "-max-session-timeout"},
		{[]string{"-min-session-timeout", "1500us"}, "-min-session-timeout"},
		{[]string{"-commit-timeout", "1s"}, "-commit-timeout"},
		{[]string{"-max-outstanding", "0"}, "-max-outstanding"},
		{[]string{"-peer-source-ip", "nope"}, "-peer-source-ip"},
	} {
		rc, out := runCapture(t, tc.args...)
		if rc != 2 || !strings.Contains(out, tc.want) || strings.Contains(out, "Bounds.") {
			t.Errorf("coord %q: exit %d, %q: want exit 2 naming %s", tc.args, rc, out, tc.want)
		}
	}
}

// -help shows the default leader-loss fraction short, not as
// 0.3333333333333333.
func TestHelpShowsShortDefaults(t *testing.T) {
	rc, out := runCapture(t, "-help")
	if rc != 0 || !strings.Contains(out, "(default 0.333)") || strings.Contains(out, "0.3333") {
		t.Errorf("coord -help: exit %d; the -leader-loss-fraction default is not shown as 0.333:\n%s", rc, out)
	}
}

// The default -commit-timeout (50 ms) follows a shorter -raft-timeout down,
// so a user who sets only the raft timeout is not told the commit timeout
// is too long; one given explicitly is checked as given.
func TestCommitTimeoutDefaultFollowsRaftTimeout(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 50 * time.Millisecond},
		{[]string{"-raft-timeout", "20ms"}, 20 * time.Millisecond},
		{[]string{"-raft-timeout", "20ms", "-commit-timeout", "5ms"}, 5 * time.Millisecond},
	} {
		fs, build := serverFlags()
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		opts, err := build()
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := opts.cfg.CommitTimeout; got != tc.want {
			t.Errorf("%q: CommitTimeout %v, want %v", tc.args, got, tc.want)
		}
	}
}
