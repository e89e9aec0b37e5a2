package compat

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"coord/internal/testcluster"
)

// Four-letter words as monitoring scripts read them (go-zookeeper's FLW
// parsers, and the keys of mntr and the shape of the others).
func TestFourLetterWords(t *testing.T) {
	cl := newCluster(t, 3)
	leader := cl.Leader()
	c := connect(t, "c", []string{cl.Addr(leader)}, clientOpts{})
	c.create("/flw", "", 0)
	_, _, _, err := c.GetW("/flw")
	must(t, "getW", err)

	if ok := zk.FLWRuok(cl.Addrs(), wait); len(ok) != 3 || !ok[0] || !ok[1] || !ok[2] {
		t.Errorf("ruok: %v", ok)
	}
	// srvr (go-zookeeper's FLWSrvr expects the pre-3.5 "built on" date
	// format, so it cannot parse ZooKeeper 3.8's either).
	modes := map[string]int{}
	for _, addr := range cl.Addrs() {
		out, err := fourLetter(addr, "srvr", wait)
		must(t, "srvr", err)
		if !srvrShape.MatchString(out) {
			t.Errorf("srvr output:\n%s", out)
			continue
		}
		modes[srvrShape.FindStringSubmatch(out)[1]]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Errorf("srvr modes: %v, want one leader and two followers", modes)
	}
	// cons lists the session with its id and counters.
	cons, err := fourLetter(cl.Addr(leader), "cons", wait)
	must(t, "cons", err)
	consShape := regexp.MustCompile(fmt.Sprintf(`(?m)^ /127\.0\.0\.1:\d+\[1\]\(queued=\d+,recved=\d+,sent=\d+,sid=0x%x,lop=\w+,est=\d+,to=10000,`, c.SessionID()))
	if !consShape.MatchString(cons) {
		t.Errorf("cons does not list session %x as ZooKeeper does:\n%s", c.SessionID(), cons)
	}
	mntr, err := fourLetter(cl.Addr(leader), "mntr", wait)
	must(t, "mntr", err)
	for _, key := range []string{"zk_version\t3.", "zk_server_state\tleader", "zk_znode_count\t", "zk_watch_count\t", "zk_ephemerals_count\t", "zk_num_alive_connections\t"} {
		if !strings.Contains(mntr, "\n"+key) && !strings.HasPrefix(mntr, key) {
			t.Errorf("mntr has no line %q:\n%s", key, mntr)
		}
	}
	for cmd, want := range map[string]string{
		"isro": "rw",
		"conf": "clientPort=",
		"envi": "Environment:\n",
		"wchs": "connections watching 1 paths\nTotal watches:1",
		"wchc": "\t/flw\n",
		"wchp": "/flw\n\t0x",
		"stat": "Clients:\n",
		"dump": "Session",
	} {
		out, err := fourLetter(cl.Addr(leader), cmd, wait)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %q %v, want it to contain %q", cmd, out, err, want)
		}
	}
}

var srvrShape = regexp.MustCompile(`\AZookeeper version: 3\.\d+\.\d+[^,\n]*, built on [^\n]+\n` +
	`Latency min/avg/max: \d+/[\d.]+/\d+\nReceived: \d+\nSent: \d+\nConnections: \d+\nOutstanding: \d+\n` +
	`Zxid: 0x[0-9a-f]+\nMode: (\w+)\nNode count: (\d+)\n`)

// The whitelist (ZooKeeper's 4lw.commands.whitelist, coord's
// -4lw-whitelist): coord's default is srvr and ruok, which on ZooKeeper
// is 4lw.commands.whitelist=ruok (ZooKeeper always adds srvr). Both serve
// those two and answer every other word, with a client holding a session,
// an ephemeral and a watch, with the same refusal, and nothing else.
func TestFourLetterWordsDefault(t *testing.T) {
	var cl Cluster
	switch target() {
	case "coord":
		cl = &coordCluster{tc: testcluster.New(t, 1, 0, nil)} // coord's default whitelist
	case "zookeeper":
		cl = newZKClusterOpts(t, 1, procOpts{zooCfg: []string{"4lw.commands.whitelist=ruok"}})
	default:
		cl = newCluster(t, 1) // fails with the bad target's name
	}
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	c.create("/flw-eph", "", zk.FlagEphemeral)
	_, _, _, err := c.ExistsW("/flw-watched")
	must(t, "existsW", err)

	if ok := zk.FLWRuok(cl.Addrs(), wait); len(ok) != 1 || !ok[0] {
		t.Errorf("ruok: %v", ok)
	}
	out, err := fourLetter(cl.Addr(0), "srvr", wait)
	if err != nil || !srvrShape.MatchString(out) {
		t.Errorf("srvr: %q %v", out, err)
	}
	for _, cmd := range []string{"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "stmk", "srst",
		"stat", "wchc", "wchp", "wchs", "mntr", "isro", "hash"} {
		out, err := fourLetter(cl.Addr(0), cmd, wait)
		if want := cmd + " is not executed because it is not in the whitelist.\n"; out != want {
			t.Errorf("%s: %q (%v), want %q", cmd, out, err, want)
		}
	}
}
