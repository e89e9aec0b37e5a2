package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/internal/zkproc"
)

// startZooKeeper runs a standalone Apache ZooKeeper 3.8 (Debian's package)
// on a free loopback port, or skips the test when it is not installed.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	if err := zkproc.Check(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := zkproc.Start(ctx, zkproc.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			t.Logf("ZooKeeper log:\n%s", tail(e.Servers[0].Log))
		}
	})
	return e.Servers[0].Addr
}

// import --from-zookeeper copies a live ZooKeeper tree (data, ACLs,
// sequential names, binary and empty data; ephemerals left out) into
// coord, ends with equal digests, and a second run finds everything there.
func TestImportFromZooKeeper(t *testing.T) {
	zkAddr := startZooKeeper(t)
	zc, events, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if err := waitZKSession(t.Context(), events, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	world := zk.WorldACL(zk.PermAll)
	mine := append(zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "ops", "pw")...)
	create := func(p string, data []byte, flags int32, acl []zk.ACL) string {
		t.Helper()
		got, err := zc.Create(p, data, flags, acl)
		if err != nil {
			t.Fatalf("ZooKeeper create %s: %v", p, err)
		}
		return got
	}
	create("/app", []byte("a"), 0, world)
	create("/app/cfg", []byte(`{"k":1}`), 0, mine)
	create("/app/bin", []byte{0, 1, 2, 0xff}, 0, world)
	create("/app/empty", []byte{}, 0, world)
	create("/app/q", nil, 0, world)
	var seq []string
	for i := 0; i < 3; i++ {
		seq = append(seq, create("/app/q/item-", []byte(fmt.Sprint(i)), zk.FlagSequence, world))
	}
	create("/app/deep", nil, 0, world)
	for i := 0; i < 200; i++ {
		create(fmt.Sprintf("/app/deep/n%03d", i), []byte(strings.Repeat("x", i)), 0, world)
	}
	create("/app/lock", []byte("mine"), zk.FlagEphemeral, world)
	create("/elsewhere", []byte("not copied"), 0, world)

	coord := startCluster(t, 1, 0).grpcAddrs()
	var res zkImport
	jsonOut(t, coord, &res, "import", "--from-zookeeper", zkAddr, "/app")
	if !res.Same || res.Ephemerals != 1 || res.Nodes != 209 || res.Created != 209 || res.Present != 0 || res.ZKDigest != res.Digest {
		t.Fatalf("import --from-zookeeper: %+v", res)
	}
	if out := mustRun(t, coord, "get", "/app/cfg"); strings.TrimSpace(out) != `{"k":1}` {
		t.Fatalf("get /app/cfg: %q", out)
	}
	if out := mustRun(t, coord, "ls", "/app/q"); !strings.Contains(out, filepath.Base(seq[2])) {
		t.Fatalf("ls /app/q: %q (want %v)", out, seq)
	}
	fails(t, coord, exitNoNode, "get", "/app/lock")
	fails(t, coord, exitNoNode, "get", "/elsewhere")
	acl := strings.Split(strings.TrimSpace(mustRun(t, coord, "acl", "get", "/app/cfg")), "\n")
	if len(acl) != 2 || acl[0] != "world:anyone:r" || !strings.HasPrefix(acl[1], "digest:ops:") || !strings.HasSuffix(acl[1], ":cdrwa") {
		t.Fatalf("acl of /app/cfg: %q", acl)
	}

	// Again: everything is there already.
	var again zkImport
	jsonOut(t, coord, &again, "import", "--from-zookeeper", zkAddr, "/app")
	if !again.Same || again.Created != 0 || again.Present != 209 {
		t.Fatalf("second import: %+v", again)
	}
	raw, _ := json.Marshal(again)
	t.Logf("second run: %s", raw)
}
