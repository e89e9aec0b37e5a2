package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"coord/zk"
)

// fourLetterWordsAll are ZooKeeper 3.8's four-letter words (zk.IsFourLetterWord).
var fourLetterWordsAll = []string{"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok",
	"stmk", "srst", "srvr", "stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash"}

// withSecrets connects a client to addr that holds an ephemeral and a watch,
// so that a word that lists sessions, paths or watches would show them.
func withSecrets(t *testing.T, addr string) (session int64, paths []string) {
	t.Helper()
	conn, events, err := gozk.Connect([]string{addr}, 10*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(10 * time.Second)
	for conn.State() != gozk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("no session on %s: %v", addr, conn.State())
		}
	}
	eph, watched := "/fourlw-secret-ephemeral", "/fourlw-secret-watched"
	if _, err := conn.Create(eph, nil, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := conn.ExistsW(watched); err != nil {
		t.Fatal(err)
	}
	return conn.SessionID(), []string{eph, watched}
}

// A default server answers srvr and ruok (DefaultFourLetterWords) and every
// other word exactly as ZooKeeper 3.8 answers a word its whitelist lacks,
// revealing nothing; with "*" (-4lw-whitelist '*') it serves them all.
func TestFourLetterWordsDefaultWhitelist(t *testing.T) {
	t.Parallel()
	if got := DefaultConfig().FourLetterWords; !slices.Equal(got, []string{"srvr", "ruok"}) {
		t.Fatalf("DefaultConfig().FourLetterWords = %q, want srvr and ruok", got)
	}
	def := NewTestCluster(t, 1, 0).Servers[0]
	all := NewTestClusterWith(t, 1, 0, func(cfg *Config) { cfg.FourLetterWords = []string{"*"} }).Servers[0]
	defSession, defPaths := withSecrets(t, def.ZKAddr())
	allSession, allPaths := withSecrets(t, all.ZKAddr())

	if out := fourLetter(t, def.ZKAddr(), "ruok"); out != "imok" {
		t.Errorf("ruok on a default server: %q, want imok", out)
	}
	srvr := fourLetter(t, def.ZKAddr(), "srvr")
	if !strings.HasPrefix(srvr, "Zookeeper version: ") || !strings.Contains(srvr, "Mode: standalone\n") {
		t.Errorf("srvr on a default server:\n%s", srvr)
	}
	for _, w := range fourLetterWordsAll {
		if w == "srvr" || w == "ruok" {
			continue
		}
		out := fourLetter(t, def.ZKAddr(), w)
		if want := zk.NotWhitelisted(w); out != want {
			t.Errorf("%s on a default server: %q, want ZooKeeper's %q", w, out, want)
		}
	}
	// What the served words show holds no session and no path.
	for _, w := range []string{"srvr", "ruok"} {
		out := fourLetter(t, def.ZKAddr(), w)
		for _, secret := range append(defPaths, fmt.Sprintf("%x", defSession)) {
			if strings.Contains(out, secret) {
				t.Errorf("%s on a default server shows %q:\n%s", w, secret, out)
			}
		}
	}

	// "*": every word is served (stmk and hash aside: coord answers them
	// as unlisted words whatever the whitelist says).
	for _, w := range fourLetterWordsAll {
		if w == "stmk" || w == "hash" {
			continue
		}
		if out := fourLetter(t, all.ZKAddr(), w); out == zk.NotWhitelisted(w) || out == "" {
			t.Errorf("%s with the whitelist \"*\": %q", w, out)
		}
	}
	sid := fmt.Sprintf("0x%x", allSession)
	for w, want := range map[string]string{"cons": sid, "dump": allPaths[0], "wchc": allPaths[1], "wchp": allPaths[1],
		"envi": "Environment:\n", "isro": "rw", "mntr": "zk_server_state\tstandalone"} {
		if out := fourLetter(t, all.ZKAddr(), w); !strings.Contains(out, want) {
			t.Errorf("%s with the whitelist \"*\": %q, want it to contain %q", w, out, want)
		}
	}
}

// /debug/pprof/ is served only with Config.Pprof (-pprof); without it the
// HTTP port answers 404 there and serves the rest as before.
func TestHTTPPprofOnlyWithFlag(t *testing.T) {
	t.Parallel()
	def := NewTestCluster(t, 1, 0).Servers[0]
	on := NewTestClusterWith(t, 1, 0, func(cfg *Config) { cfg.Pprof = true }).Servers[0]
	get := func(s *Server, path string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if code, body := get(def, p); code != http.StatusNotFound {
			t.Errorf("GET %s without Pprof: %d, want 404: %.200q", p, code, body)
		}
	}
	for _, p := range []string{"/metrics", "/health"} {
		if code, _ := get(def, p); code != http.StatusOK {
			t.Errorf("GET %s without Pprof: %d, want 200", p, code)
		}
	}
	if code, body := get(on, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ with Pprof: %d %.200q", code, body)
	}
	if code, body := get(on, "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "# HeapAlloc = ") {
		t.Errorf("GET /debug/pprof/heap?debug=1 with Pprof: %d %.200q", code, body)
	}
}
