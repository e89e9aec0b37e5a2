package compat

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"coord/internal/testcluster"
)

// The numbers of conf, dirs, srvr, stat and cons on a server with a few
// clients that did a few operations: ZooKeeper reports real values (the
// packets, connections, each connection's last operation, the data
// directory's size, the quorum's settings), and so must coord, in
// ZooKeeper's layout.
func TestFourLetterWordsStats(t *testing.T) {
	// conf shows raft's ports as the quorum's, dirs the sizes of raft's
	// files: raft on TCP, its stores on disk.
	cl := newCluster(t, 3, testcluster.OnTCP)
	addr := cl.Addr(0)
	c1 := connect(t, "c1", []string{addr}, clientOpts{})
	c2 := connect(t, "c2", []string{addr}, clientOpts{})
	c3 := connect(t, "c3", []string{addr}, clientOpts{})
	c1.create("/flw-stats", "x", 0)
	_, _, err := c2.Get("/flw-stats")
	must(t, "get", err)
	_, err = c3.Set("/flw-stats", []byte("y"), -1)
	must(t, "set", err)
	_, _, err = c3.Exists("/flw-stats-none")
	must(t, "exists", err)

	word := func(cmd string) string {
		t.Helper()
		out, err := fourLetter(addr, cmd, wait)
		must(t, cmd, err)
		return out
	}
	num := func(out, re string) int64 {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s in:\n%s", re, out)
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		return v
	}

	// srvr: every connect, request, reply and word so far is a packet.
	srvr := word("srvr")
	if !srvrShape.MatchString(srvr) {
		t.Fatalf("srvr:\n%s", srvr)
	}
	lat := regexp.MustCompile(`Latency min/avg/max: (\d+)/([\d.]+)/(\d+)\n`).FindStringSubmatch(srvr)
	lmin, _ := strconv.ParseInt(lat[1], 10, 64)
	lavg, _ := strconv.ParseFloat(lat[2], 64)
	lmax, _ := strconv.ParseInt(lat[3], 10, 64)
	if lmin > lmax || lavg < float64(lmin) || lavg > float64(lmax) {
		t.Errorf("srvr latency min/avg/max %d/%v/%d", lmin, lavg, lmax)
	}
	// 3 connects, 4 requests and this srvr received; 3 connect
	// responses and 4 replies sent.
	if r, s := num(srvr, `Received: (\d+)\n`), num(srvr, `Sent: (\d+)\n`); r < 8 || s < 7 {
		t.Errorf("srvr Received %d Sent %d, want at least 8 and 7:\n%s", r, s, srvr)
	}
	if n := num(srvr, `Connections: (\d+)\n`); n != 4 {
		t.Errorf("srvr Connections %d, want 4 (3 sessions and srvr's own)", n)
	}
	if n := num(srvr, `Outstanding: (\d+)\n`); n != 0 {
		t.Errorf("srvr Outstanding %d, want 0 (idle)", n)
	}
	if strings.Contains(srvr, "Zxid: 0x0\n") {
		t.Errorf("srvr Zxid 0 after writes:\n%s", srvr)
	}

	// stat: the sessions in brief and the asking connection itself.
	stat := word("stat")
	brief := regexp.MustCompile(`(?m)^ /127\.0\.0\.1:\d+\[1\]\(queued=0,recved=(\d+),sent=(\d+)\)$`).FindAllStringSubmatch(stat, -1)
	if len(brief) != 3 {
		t.Errorf("stat lists %d sessions, want 3:\n%s", len(brief), stat)
	}
	for _, m := range brief {
		if r, _ := strconv.Atoi(m[1]); r < 2 {
			t.Errorf("stat: a session received %s packets, want at least 2 (connect and a request):\n%s", m[1], stat)
		}
		if s, _ := strconv.Atoi(m[2]); s < 2 {
			t.Errorf("stat: a session was sent %s packets, want at least 2:\n%s", m[2], stat)
		}
	}
	self := regexp.MustCompile(`(?m)^ /127\.0\.0\.1:\d+\[0\]\(queued=0,recved=1,sent=0\)$`)
	if !self.MatchString(stat) {
		t.Errorf("stat does not list its own connection as ZooKeeper does:\n%s", stat)
	}
	if !strings.Contains(stat, "\n\nLatency min/avg/max: ") {
		t.Errorf("stat:\n%s", stat)
	}

	// cons: each session's last operation, ids and latencies.
	cons := word("cons")
	if !self.MatchString(cons) {
		t.Errorf("cons does not list its own connection as ZooKeeper does:\n%s", cons)
	}
	for _, tc := range []struct {
		c        *client
		lop      string
		lcxid    int
		received int
	}{{c1, "CREA", 1, 2}, {c2, "GETD", 1, 2}, {c3, "EXIS", 2, 3}} {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^ /127\.0\.0\.1:\d+\[1\]\(queued=0,recved=(\d+),sent=(\d+),sid=0x%x,`+
			`lop=(\w+),est=(\d+),to=\d+,(?:lcxid=0x([0-9a-f]+),)?lzxid=0x([0-9a-f]+),lresp=(\d+),llat=(\d+),`+
			`minlat=(\d+),avglat=(\d+),maxlat=(\d+)\)$`, tc.c.SessionID()))
		m := re.FindStringSubmatch(cons)
		if m == nil {
			t.Errorf("cons does not list session 0x%x as ZooKeeper does:\n%s", tc.c.SessionID(), cons)
			continue
		}
		atoi := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
		if m[3] == "PING" {
			continue // the client pinged since: the rest moved on
		}
		if m[3] != tc.lop || atoi(m[1]) != int64(tc.received) || atoi(m[2]) != int64(tc.received) {
			t.Errorf("session 0x%x: lop=%s recved=%s sent=%s, want %s and %d each", tc.c.SessionID(), m[3], m[1], m[2], tc.lop, tc.received)
		}
		if m[5] != strconv.FormatInt(int64(tc.lcxid), 16) {
			t.Errorf("session 0x%x: lcxid=0x%s, want 0x%x", tc.c.SessionID(), m[5], tc.lcxid)
		}
		if m[6] == "0" || m[6] == "ffffffffffffffff" {
			t.Errorf("session 0x%x: lzxid=0x%s", tc.c.SessionID(), m[6])
		}
		if atoi(m[4]) == 0 || atoi(m[7]) == 0 {
			t.Errorf("session 0x%x: est=%s lresp=%s", tc.c.SessionID(), m[4], m[7])
		}
		if mn, avg, mx := atoi(m[9]), atoi(m[10]), atoi(m[11]); mn > avg || avg > mx || atoi(m[8]) > mx {
			t.Errorf("session 0x%x: llat=%s min/avg/max %d/%d/%d", tc.c.SessionID(), m[8], mn, avg, mx)
		}
	}

	// conf: the server's own settings, and the quorum's.
	confShape := regexp.MustCompile(`\AclientPort=(\d+)\nsecureClientPort=-1\ndataDir=\S+\ndataDirSize=(\d+)\n` +
		`dataLogDir=\S+\ndataLogSize=(\d+)\ntickTime=(\d+)\nmaxClientCnxns=\d+\nminSessionTimeout=(\d+)\n` +
		`maxSessionTimeout=(\d+)\nclientPortListenBacklog=-1\nserverId=(\d+)\ninitLimit=-?\d+\nsyncLimit=-?\d+\n` +
		`electionAlg=3\nelectionPort=(\d+)\nquorumPort=(\d+)\npeerType=0\nmembership: \n` +
		`(?:server\.\d+=127\.0\.0\.1:\d+:\d+:participant(?:;\S+)?\n){3}version=[0-9a-f]+\z`)
	// coord's /zookeeper/config (which conf's membership shows) follows
	// its servers' promotion to voters a moment after they join.
	var conf string
	var m []string
	for deadline := time.Now().Add(wait); m == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		conf = word("conf")
		m = confShape.FindStringSubmatch(conf)
	}
	if m == nil {
		t.Fatalf("conf is not a quorum member's, as ZooKeeper's:\n%s", conf)
	}
	if _, port, _ := strings.Cut(addr, "127.0.0.1:"); m[1] != port {
		t.Errorf("conf clientPort=%s, want %s", m[1], port)
	}
	for i, name := range []string{"", "clientPort", "dataDirSize", "dataLogSize", "tickTime", "minSessionTimeout",
		"maxSessionTimeout", "serverId", "electionPort", "quorumPort"} {
		if i > 0 && m[i] == "0" {
			t.Errorf("conf %s=0:\n%s", name, conf)
		}
	}
	if !strings.Contains(conf, fmt.Sprintf("\nserver.%s=127.0.0.1:%s:%s:participant", m[7], m[9], m[8])) {
		t.Errorf("conf: no membership line for serverId %s with its quorum and election ports:\n%s", m[7], conf)
	}

	// dirs: the data (snapshot) and log directories' sizes.
	dirs := word("dirs")
	if d, l := num(dirs, `\Adatadir_size: (\d+)\n`), num(dirs, `\nlogdir_size: (\d+)\n\z`); d == 0 || l == 0 {
		t.Errorf("dirs:\n%s", dirs)
	}
}
