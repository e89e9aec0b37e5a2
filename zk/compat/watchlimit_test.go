package compat

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

const codeQuotaExceeded = -125

// TestWatchesPerSession: with -max-watches-per-session 4, a session's fifth
// watch is refused with QuotaExceeded (go-zookeeper: "unknown error: -125")
// and the read fails rather than answer without its watch; a watch the
// session holds already is no new one; a watch that fired makes room. The
// bound holds across a kill -9 and restart of the server the client is on:
// the client re-registers its four watches at once (setWatches) and they
// fire, while a forged setWatches of six registers four and answers
// QuotaExceeded. coord only: ZooKeeper has no such limit (and coord has none
// by default).
func TestWatchesPerSession(t *testing.T) {
	if target() != "coord" {
		t.Skip("ZooKeeper has no limit on watches per session")
	}
	cl := newProcClusterOpts(t, 3, procOpts{coordArgs: []string{"-max-watches-per-session", "4"}}).(*coordProcs)
	lead := cl.Leader()
	w := connect(t, "writer", cl.Addrs(), clientOpts{})
	w.create("/w", "", 0)
	for _, p := range []string{"/w/0", "/w/1", "/w/2", "/w/3", "/w/4", "/w/5"} {
		w.create(p, "", 0)
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(codeQuotaExceeded)) {
			t.Fatalf("%s: %v, want error %d (QuotaExceeded)", what, err, codeQuotaExceeded)
		}
	}

	// One client on the leader alone, so that it reconnects to the same
	// server after the crash.
	c := connect(t, "c", []string{cl.Addr(lead)}, clientOpts{})
	_, _, ch0, err := c.GetW("/w/0")
	must(t, "getData watch", err)
	_, _, ch1, err := c.ExistsW("/w/1")
	must(t, "exists watch", err)
	_, _, chKids, err := c.ChildrenW("/w")
	must(t, "getChildren watch", err)
	_, _, _, err = c.GetW("/w/0")
	must(t, "the same getData watch again", err)
	ok, _, chMissing, err := c.ExistsW("/w/missing")
	must(t, "exists watch on a missing node (the fourth)", err)
	if ok {
		t.Fatal("/w/missing exists")
	}
	_, _, _, err = c.GetW("/w/2")
	refused("the fifth watch, getData", err)
	_, _, _, err = c.ExistsW("/w/3")
	refused("the fifth watch, exists", err)
	_, _, _, err = c.ChildrenW("/w/0")
	refused("the fifth watch, getChildren", err)
	// Reads without a watch are not limited.
	_, _, err = c.Get("/w/2")
	must(t, "getData without a watch", err)
	if n := metric(t, cl.nodes[lead].http, `coord_watch_refused_total{op="getData"}`); n != 1 {
		t.Errorf("coord_watch_refused_total{op=getData} = %v, want 1", n)
	}

	// addWatch, from the raw client on another server.
	other := (lead + 1) % 3
	r := rawConnect(t, cl.Addr(other), rawConnectOpts{})
	for i := 0; i < 4; i++ {
		if e := r.addWatch("/w/"+strconv.Itoa(i), 0); e != codeOK {
			t.Fatalf("addWatch %d: %d", i, e)
		}
	}
	if e := r.addWatch("/w/4", 1); e != codeQuotaExceeded {
		t.Fatalf("the fifth watch, addWatch: %d, want %d", e, codeQuotaExceeded)
	}
	r.barrier()
	rid, rpw, rzxid := r.SessionID, r.Passwd, r.lastZxid.Load()
	r.nc.Close()

	// kill -9 the leader, which c is on, and start it again at once: c
	// reconnects as soon as it serves and re-registers its four watches.
	m := c.mark()
	cl.Restart(lead)
	if _, ok := c.rec.waitForSince(m, isSessionState(zk.StateHasSession), 30*time.Second); !ok {
		t.Fatalf("c did not reconnect after the restart: %v", c.rec.since(m))
	}
	c.barrier()
	_, _, _, err = c.GetW("/w/4")
	refused("after the restart, a fifth watch", err)

	// The raw session re-attaches to the restarted server with six data
	// watches: the first four are registered, QuotaExceeded says the rest
	// are not.
	re := rawConnect(t, cl.Addr(lead), rawConnectOpts{sessionID: rid, passwd: rpw, lastZxid: rzxid})
	if re.SessionID != rid {
		t.Fatalf("raw re-attach: session %x, want %x", re.SessionID, rid)
	}
	if e := re.callErr(opSetWatches2, func(jw *jw) {
		jw.long(rzxid)
		jw.strs([]string{"/w/0", "/w/1", "/w/2", "/w/3", "/w/4", "/w/5"})
		jw.strs(nil)
		jw.strs(nil)
		jw.strs(nil)
		jw.strs(nil)
	}); e != codeQuotaExceeded {
		t.Fatalf("setWatches2 of six: %d, want %d", e, codeQuotaExceeded)
	}
	if n := metric(t, cl.nodes[lead].http, `coord_watch_refused_total{op="setWatches"}`); n != 2 {
		t.Errorf("coord_watch_refused_total{op=setWatches} = %v, want 2", n)
	}

	// Every watch c re-registered fires, and the raw session's first four.
	for _, p := range []string{"/w/0", "/w/1", "/w/2", "/w/3", "/w/4", "/w/5"} {
		_, err := w.Set(p, []byte("x"), -1)
		must(t, "set "+p, err)
	}
	w.create("/w/missing", "", 0)
	for what, ch := range map[string]<-chan zk.Event{"getData /w/0": ch0, "exists /w/1": ch1,
		"getChildren /w": chKids, "exists /w/missing": chMissing} {
		waitEvent(t, what+" after the restart", ch)
	}
	re.barrier()
	var paths []string
	for _, ev := range re.eventsNow() {
		paths = append(paths, ev.path)
	}
	if strings.Join(paths, " ") != "/w/0 /w/1 /w/2 /w/3" {
		t.Errorf("raw session's events after setWatches of six: %v, want /w/0 to /w/3", paths)
	}
	// The watches fired: there is room again.
	_, _, _, err = c.GetW("/w/4")
	must(t, "a watch after the others fired", err)
}

// metric reads one sample of a coord server's /metrics (0 if absent).
func metric(t testing.TB, httpAddr, sample string) float64 {
	t.Helper()
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}
