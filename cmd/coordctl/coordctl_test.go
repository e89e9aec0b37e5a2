package main

import (
	"bufio"
	"context"
	"coord/vocab"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fresh deletes what an earlier run (-count) left at roots on the shared
// cluster.
func fresh(t *testing.T, servers string, roots ...string) {
	t.Helper()
	for _, r := range roots {
		if res := ctl(t, servers, "", "rm", "-r", r); res.code != 0 && res.code != exitNoNode {
			t.Fatalf("rm -r %s: %+v", r, res)
		}
	}
}

func TestZnodeCommands(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/zc")
	run := func(args ...string) string { t.Helper(); return mustRun(t, s, args...) }

	if out := run("create", "/zc", "hello"); out != "Created /zc\n" {
		t.Fatalf("create: %q", out)
	}
	run("create", "-p", "/zc/a/b", "deep")
	if out := run("create", "-s", "/zc/q-", "x"); out != "Created /zc/q-0000000001\n" {
		t.Fatalf("create -s: %q", out) // /zc/a was child 0
	}
	run("create", "-c", "/zc/cont")
	run("create", "--ttl", "1h", "/zc/cont/ttl")
	if r := ctl(t, s, "from stdin", "create", "/zc/in", "-"); r.code != 0 {
		t.Fatalf("create from stdin: %+v", r)
	}

	if out := run("get", "/zc"); out != "hello\n" {
		t.Fatalf("get: %q", out)
	}
	if out := run("get", "--stat", "/zc/in"); !strings.HasPrefix(out, "from stdin\ncZxid = 0x") || !strings.Contains(out, "dataLength = 10\n") {
		t.Fatalf("get --stat: %q", out)
	}
	var got struct {
		Path string
		Data string
		Stat statJSON
	}
	jsonOut(t, s, &got, "get", "--stat", "/zc")
	if got.Path != "/zc" || got.Data != "hello" || got.Stat.NumChildren != 4 || got.Stat.Version != 0 {
		t.Fatalf("get -o json: %+v", got)
	}
	var st statJSON
	jsonOut(t, s, &st, "stat", "/zc/a/b")
	if st.DataLength != 4 || st.EphemeralOwner != 0 {
		t.Fatalf("stat -o json: %+v", st)
	}
	if out := run("stat", "-o", "table", "/zc"); !strings.HasPrefix(out, "FIELD") || !strings.Contains(out, "numChildren     4") {
		t.Fatalf("stat -o table: %q", out)
	}

	if out := run("ls", "/zc"); out != "a\ncont\nin\nq-0000000001\n" {
		t.Fatalf("ls: %q", out)
	}
	var list []string
	jsonOut(t, s, &list, "ls", "-R", "/zc")
	want := []string{"/zc", "/zc/a", "/zc/cont", "/zc/in", "/zc/q-0000000001", "/zc/a/b", "/zc/cont/ttl"}
	if !slices.Equal(list, want) {
		t.Fatalf("ls -R: %q, want %q", list, want)
	}
	tree := run("tree", "--sizes", "--counts", "/zc/a")
	if tree != "/zc/a [0 B, 1 child]\n└── b [4 B, 0 children]\n" {
		t.Fatalf("tree: %q", tree)
	}

	if out := run("set", "-v", "0", "/zc", "v1"); out != "Set /zc (version 1)\n" {
		t.Fatalf("set: %q", out)
	}
	var set struct{ Stat statJSON }
	jsonOut(t, s, &set, "set", "/zc", "v2")
	if set.Stat.Version != 2 {
		t.Fatalf("set -o json: %+v", set)
	}

	// Errors: one line, an exit code per kind.
	if r := fails(t, s, exitBadVersion, "set", "-v", "0", "/zc", "v3"); r.stderr != "coordctl: set /zc: bad version\n" {
		t.Fatalf("BadVersion: %q", r.stderr)
	}
	fails(t, s, exitNoNode, "get", "/zc/nope")
	fails(t, s, exitNoNode, "stat", "/zc/nope")
	fails(t, s, exitNodeExists, "create", "/zc", "again")
	fails(t, s, exitNotEmpty, "rm", "/zc/a")
	fails(t, s, exitBadVersion, "rm", "-v", "7", "/zc/a/b")
	fails(t, s, exitUsage, "create", "-c", "-e", "/zc/x")
	fails(t, s, exitUsage, "get")

	// ACLs.
	if out := run("acl", "get", "/zc"); out != "world:anyone:cdrwa\n" {
		t.Fatalf("acl get: %q", out)
	}
	run("create", "--acl", "world:anyone:ra", "/zc/ro", "x")
	var acl struct {
		ACL []vocab.ACLText
	}
	jsonOut(t, s, &acl, "acl", "get", "/zc/ro")
	if len(acl.ACL) != 1 || acl.ACL[0] != (vocab.ACLText{Scheme: "world", ID: "anyone", Perms: "ra"}) {
		t.Fatalf("acl get -o json: %+v", acl)
	}
	// NoAuth names the ACL that refused: the node's, or for a create its
	// parent's.
	if r := fails(t, s, exitNoAuth, "set", "/zc/ro", "y"); r.stderr != "coordctl: set /zc/ro: not allowed by the ACL of /zc/ro (NoAuth)\n" {
		t.Fatalf("NoAuth of set: %q", r.stderr)
	}
	if r := fails(t, s, exitNoAuth, "create", "/zc/ro/x"); r.stderr != "coordctl: create /zc/ro/x: not allowed by the ACL of /zc/ro (NoAuth)\n" {
		t.Fatalf("NoAuth of create: %q", r.stderr)
	}
	if out := run("acl", "set", "/zc/ro", "world:anyone:cdrwa"); out != "Set ACL of /zc/ro (aclVersion 1)\n" {
		t.Fatalf("acl set: %q", out)
	}
	run("set", "/zc/ro", "y")
	fails(t, s, exitBadVersion, "acl", "set", "-v", "0", "/zc/ro", "world:anyone:r")

	if out := run("sync", "/zc"); !strings.HasPrefix(out, "Synced /zc on ") {
		t.Fatalf("sync: %q", out)
	}
	if out := run("rm", "-r", "/zc/a"); out != "Deleted /zc/a (2 nodes)\n" {
		t.Fatalf("rm -r: %q", out)
	}
	if out := run("rm", "-v", "1", "/zc/ro"); out != "Deleted /zc/ro (1 node)\n" {
		t.Fatalf("rm: %q", out)
	}
	fails(t, s, exitNoNode, "get", "/zc/a/b")
}

func TestMulti(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/mu")
	mustRun(t, s, "create", "/mu", "0")
	file := filepath.Join(t.TempDir(), "ops.json")
	os.WriteFile(file, []byte(`[{"op":"check","path":"/mu","version":0},
		{"op":"create","path":"/mu/a","data":"1"},
		{"op":"create","path":"/mu/s-","mode":"persistent_sequential"},
		{"op":"set","path":"/mu","data":"2"}]`), 0o644)
	out := mustRun(t, s, "multi", file)
	if out != "check /mu: ok\ncreate /mu/a: created /mu/a\ncreate /mu/s-: created /mu/s-0000000001\nset /mu: version 1\n" {
		t.Fatalf("multi: %q", out)
	}
	// All or nothing: the check fails now, so /mu/b is not created.
	bad := `[{"op":"create","path":"/mu/b"},{"op":"check","path":"/mu","version":0}]`
	r := ctl(t, s, bad, "multi", "-o", "json", "-")
	if r.code != exitBadVersion {
		t.Fatalf("failing multi: exit %d, stderr %q", r.code, r.stderr)
	}
	var res struct {
		OK      bool
		Results []struct{ Op, Path, Error string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.OK || len(res.Results) != 2 || res.Results[1].Error != "bad version" {
		t.Fatalf("failing multi -o json: %v %s", err, r.stdout)
	}
	fails(t, s, exitNoNode, "stat", "/mu/b")
	if r := ctl(t, s, `[{"op":"frob","path":"/mu"}]`, "multi", "-"); r.code != exitUsage {
		t.Fatalf("bad op: %+v", r)
	}
}

func TestWatch(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/wa")
	mustRun(t, s, "create", "/wa", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.ctl, "watch", "-R", "-o", "json", "--count", "3", "/wa")
	cmd.Env = ctlEnv(t, s)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The watch is set once coordctl says so.
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "watching /wa on ") {
		t.Fatalf("watch: first stderr line %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	mustRun(t, s, "set", "/wa", "1")
	mustRun(t, s, "create", "/wa/x")
	mustRun(t, s, "rm", "/wa/x")
	var events []map[string]any
	dec := json.NewDecoder(stdout)
	for {
		var ev map[string]any
		if err := dec.Decode(&ev); err != nil {
			break
		}
		events = append(events, ev)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch exited: %v", err)
	}
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%s %s", ev["type"], ev["path"]))
	}
	want := []string{"NodeDataChanged /wa", "NodeCreated /wa/x", "NodeDeleted /wa/x"}
	if !slices.Equal(got, want) {
		t.Fatalf("watch events %q, want %q", got, want)
	}
}

// TestExportImport copies a 10,000-node tree with data (text and binary)
// and ACLs out and back in and compares digests. (Containers and TTL nodes
// are not in it: the server reports them as persistent, as ZooKeeper does,
// so an export cannot tell them apart yet.)
func TestExportImport(t *testing.T) {
	s := shared(t).grpcAddrs()
	fresh(t, s, "/big", "/big2", "/big3")
	dir := t.TempDir()
	// A tree of 1 + 100 + 100*100 nodes, written as an export file.
	f := vocab.ExportFile{Format: vocab.ExportFormat, Root: "/big"}
	open := []vocab.ACLText{{Scheme: "world", ID: "anyone", Perms: "cdrwa"}}
	f.Nodes = append(f.Nodes, vocab.ExportNode{Path: "", Data: []byte("root"), ACL: open, Mode: "persistent"})
	for i := range 100 {
		d := fmt.Sprintf("/d%02d", i)
		f.Nodes = append(f.Nodes, vocab.ExportNode{Path: d, ACL: open, Mode: "persistent"})
		for j := range 100 {
			n := vocab.ExportNode{Path: fmt.Sprintf("%s/n%02d", d, j), Data: fmt.Appendf(nil, "value %d/%d", i, j), ACL: open, Mode: "persistent"}
			if j == 3 {
				n.ACL = []vocab.ACLText{{Scheme: "world", ID: "anyone", Perms: "r"}, {Scheme: "ip", ID: "127.0.0.1", Perms: "cdrwa"}}
			}
			if j == 9 {
				n.Data = []byte{0, 0xff, 0xfe} // not UTF-8
			}
			f.Nodes = append(f.Nodes, n)
		}
	}
	gen := filepath.Join(dir, "gen.json")
	b, _ := json.Marshal(f)
	os.WriteFile(gen, b, 0o644)
	want := vocab.ExportDigest(f.Nodes)

	start := time.Now()
	out := mustRun(t, s, "import", gen)
	if out != fmt.Sprintf("Imported 10101 nodes to /big (%s)\n", want) {
		t.Fatalf("import: %q", out)
	}
	t.Logf("imported 10101 nodes in %v", time.Since(start))
	if out := mustRun(t, s, "digest", "/big"); out != want+" 10101 nodes /big\n" {
		t.Fatalf("digest after import: %q, want %s", out, want)
	}

	start = time.Now()
	exported := filepath.Join(dir, "big.json")
	r := ctl(t, s, "", "export", "--file", exported, "/big")
	if r.code != 0 || !strings.Contains(r.stderr, "exported 10101 nodes of /big (0 ephemeral left out), "+want) {
		t.Fatalf("export: %+v", r)
	}
	t.Logf("exported in %v", time.Since(start))
	var back vocab.ExportFile
	b, _ = os.ReadFile(exported)
	if err := json.Unmarshal(b, &back); err != nil || back.Digest != want || len(back.Nodes) != 10101 {
		t.Fatalf("export file: %v, digest %s, %d nodes", err, back.Digest, len(back.Nodes))
	}
	mustRun(t, s, "import", "--to", "/big2", exported)
	if out := mustRun(t, s, "digest", "/big2"); out != want+" 10101 nodes /big2\n" {
		t.Fatalf("digest of the copy: %q, want %s", out, want)
	}
	fails(t, s, exitNodeExists, "import", exported)

	// A file whose nodes do not match its digest is refused.
	back.Nodes[5].Data = []byte("tampered")
	b, _ = json.Marshal(back)
	os.WriteFile(exported, b, 0o644)
	fails(t, s, exitUsage, "import", "--to", "/big3", exported)
	out = mustRun(t, s, "rm", "-r", "/big2")
	if out != "Deleted /big2 (10101 nodes)\n" {
		t.Fatalf("rm -r: %q", out)
	}
}

func TestClusterReads(t *testing.T) {
	c := shared(t)
	s := c.grpcAddrs()
	var status []statusJSON
	jsonOut(t, s, &status, "status")
	leaders := 0
	for _, m := range status {
		if m.Error != "" || m.Leader == "" || m.AppliedIndex == 0 {
			t.Fatalf("status: %+v", m)
		}
		if m.Role == "leader" {
			leaders++
		}
	}
	if len(status) != 3 || leaders != 1 {
		t.Fatalf("status: %+v", status)
	}
	if out := mustRun(t, s, "status"); !strings.HasPrefix(out, "ID  ") || strings.Count(out, "\n") != 4 {
		t.Fatalf("status text: %q", out)
	}
	var members []memberJSON
	jsonOut(t, s, &members, "members")
	if len(members) != 3 || members[0].ID != "s1" || members[0].GRPCAddr != c.nodes[0].grpc {
		t.Fatalf("members: %+v", members)
	}
	lead := mustRun(t, s, "leader")
	if id, _, _ := strings.Cut(lead, " "); id != status[slices.IndexFunc(status, func(m statusJSON) bool { return m.Role == "leader" })].ID {
		t.Fatalf("leader %q, status %+v", lead, status)
	}
	if out := mustRun(t, s, "endpoint", "health", "--cluster"); strings.Count(out, "is healthy") != 3 {
		t.Fatalf("endpoint health: %q", out)
	}
	// One endpoint down: health says so and exits 10.
	dead := freePorts(t, 1)[0]
	r := ctl(t, s, "", "--servers", fmt.Sprintf("%s,127.0.0.1:%d", c.nodes[0].grpc, dead), "endpoint", "health")
	if r.code != exitCheckFailed || !strings.Contains(r.stdout, "is unhealthy") || r.stderr != "coordctl: 1 of 2 endpoints unhealthy\n" {
		t.Fatalf("endpoint health with a dead endpoint: %+v", r)
	}
	var snap []struct{ Index uint64 }
	jsonOut(t, s, &snap, "--user", ctlAdminUser, "snapshot", "take")
	if len(snap) != 1 || snap[0].Index == 0 {
		t.Fatalf("snapshot take: %+v", snap)
	}
	if out := ctl(t, s, "", "--zk-servers", c.nodes[0].zk, "4lw", "ruok"); out.stdout != "imok\n" {
		t.Fatalf("4lw ruok: %+v", out)
	}
	var mntr []struct {
		Server string
		Values map[string]string
	}
	jsonOut(t, s, &mntr, "--zk-servers", c.zkAddrs(), "4lw", "mntr")
	if len(mntr) != 3 || mntr[0].Values["zk_server_state"] == "" {
		t.Fatalf("4lw mntr: %+v", mntr)
	}
	// A word the whitelist lacks: the server's refusal, as ZooKeeper's.
	if out := ctl(t, s, "", "--zk-servers", c.nodes[0].zk, "4lw", "cons"); out.stdout != "cons is not executed because it is not in the whitelist.\n" {
		t.Fatalf("4lw cons: %+v", out)
	}
}

func TestConnectionErrors(t *testing.T) {
	dead := freePorts(t, 2)
	servers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", dead[0], dead[1])
	start := time.Now()
	r := fails(t, servers, exitUnreachable, "get", "/")
	if !strings.HasPrefix(r.stderr, "coordctl: no server answered at "+servers+": ") {
		t.Fatalf("unreachable: %q", r.stderr)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("unreachable took %v", d)
	}
	fails(t, servers, exitUnreachable, "status")
	fails(t, servers, exitUnreachable, "members")
	fails(t, servers, exitUnreachable, "--zk-servers", servers, "4lw", "ruok")
	if r := fails(t, servers, exitUsage, "--cacert", "missing-ca.pem", "status"); !strings.Contains(r.stderr, "--cacert") {
		t.Fatalf("--cacert of a missing file: %q", r.stderr)
	}
	fails(t, servers, exitUsage, "--cert", "client.pem", "get", "/")
	fails(t, servers, exitUsage, "-o", "yaml", "get", "/")
	fails(t, servers, exitUsage, "frobnicate")
}

// TestServerSources: --servers beats COORD_SERVERS beats the config file.
func TestServerSources(t *testing.T) {
	good := shared(t).nodes[0].grpc
	dead := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	cfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(cfg, fmt.Appendf(nil, `{"servers":[%q],"output":"json"}`, good), 0o644)

	// The config file alone (COORD_SERVERS empty): reaches good, prints JSON.
	r := ctl(t, "", "", "--config", cfg, "ls", "/")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "[") {
		t.Fatalf("config file: %+v", r)
	}
	// The environment beats the file.
	if r := ctl(t, dead, "", "--config", cfg, "ls", "/"); r.code != exitUnreachable {
		t.Fatalf("env over file: %+v", r)
	}
	// The flag beats both.
	if r := ctl(t, dead, "", "--config", cfg, "--servers", good, "-o", "text", "ls", "/"); r.code != 0 || strings.HasPrefix(r.stdout, "[") {
		t.Fatalf("flag over env: %+v", r)
	}
	fails(t, dead, exitUsage, "--config", filepath.Join(t.TempDir(), "missing.json"), "ls", "/")
}

// TestMembership adds a server as an observer, promotes it, hands it the
// leadership and removes a former voter, all through coordctl.
func TestMembership(t *testing.T) {
	c := startCluster(t, 3, 1)
	s4 := c.nodes[3]
	servers := c.grpcAddrs()
	members := func() map[string]memberJSON {
		t.Helper()
		var ms []memberJSON
		jsonOut(t, servers, &ms, "members")
		out := map[string]memberJSON{}
		for _, m := range ms {
			out[m.ID] = m
		}
		return out
	}
	if ms := members(); len(ms) != 3 {
		t.Fatalf("members before: %+v", ms)
	}
	if out := mustRun(t, servers, "--user", ctlAdminUser, "add-observer", "s4", s4.raft); out != "added s4 ("+s4.raft+") as observer\n" {
		t.Fatalf("add-observer: %q", out)
	}
	if m := members()["s4"]; m.Role != "observer" {
		t.Fatalf("s4 after add-observer: %+v", m)
	}
	if err := s4.waitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	fails(t, servers, exitUsage, "promote", "s9")
	if out := mustRun(t, servers, "--user", ctlAdminUser, "promote", "s4"); out != "promoted s4 to voter\n" {
		t.Fatalf("promote: %q", out)
	}
	if m := members()["s4"]; m.Role != "voter" {
		t.Fatalf("s4 after promote: %+v", m)
	}
	if out := mustRun(t, servers, "--user", ctlAdminUser, "move-leader", "s4"); out != "leader is now s4\n" {
		t.Fatalf("move-leader: %q", out)
	}
	if out := mustRun(t, servers, "leader"); !strings.HasPrefix(out, "s4 ") {
		t.Fatalf("leader after move-leader: %q", out)
	}
	if out := mustRun(t, servers, "--user", ctlAdminUser, "remove", "s1"); out != "removed s1\n" {
		t.Fatalf("remove: %q", out)
	}
	ms := members()
	if _, ok := ms["s1"]; ok || len(ms) != 3 || !ms["s4"].Leader {
		t.Fatalf("members after remove: %+v", ms)
	}
}
