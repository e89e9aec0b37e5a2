package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coord/client"
	"coord/vocab"
)

// An import whose server is killed with SIGKILL while batches are in flight,
// and started again at once, finishes: coordctl's session re-attaches, the
// batch whose answer was lost is found applied or sent again (never
// twice), and the tree's digest is the file's.
func TestImportSurvivesKill9(t *testing.T) {
	c := startCluster(t, 3, 0)

	// 1 + 40×500 nodes of 256 bytes: about ten multis of 512 KiB.
	f := vocab.ExportFile{Format: vocab.ExportFormat, Root: "/imp"}
	open := []vocab.ACLText{{Scheme: "world", ID: "anyone", Perms: "cdrwa"}}
	f.Nodes = append(f.Nodes, vocab.ExportNode{Path: "", ACL: open, Mode: "persistent"})
	for i := range 40 {
		d := fmt.Sprintf("/d%02d", i)
		f.Nodes = append(f.Nodes, vocab.ExportNode{Path: d, ACL: open, Mode: "persistent"})
		for j := range 499 {
			data := bytes.Repeat([]byte{byte('a' + j%26)}, 256)
			f.Nodes = append(f.Nodes, vocab.ExportNode{Path: fmt.Sprintf("%s/n%03d", d, j), Data: data, ACL: open, Mode: "persistent"})
		}
	}
	file := filepath.Join(t.TempDir(), "imp.json")
	b, _ := json.Marshal(f)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := vocab.ExportDigest(f.Nodes)

	// coordctl knows only s1: the kill takes its connection away, and the
	// restart gives it back.
	victim := c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.ctl, "import", "--command-timeout", "90s", file)
	cmd.Env = ctlEnv(t, victim.grpc)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the first batch is in: the next ones are in flight.
	watcher, _, err := client.Connect(ctx, []string{c.nodes[1].grpc})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	for {
		if ok, _, err := watcher.Exists(ctx, "/imp/d00"); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		time.Sleep(2 * time.Millisecond) // no watch: the kill should come within a batch
	}
	victim.cmd.Process.Kill()
	<-victim.done
	if err := victim.start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	t.Logf("import: %v\nstdout %q\nstderr (tail) %q", err, stdout.String(), tailString(stderr.String(), 400))
	if err != nil || stdout.String() != fmt.Sprintf("Imported %d nodes to /imp (%s)\n", len(f.Nodes), want) {
		t.Fatalf("import across a kill -9 of its server: %v; stdout %q", err, stdout.String())
	}
	if out := mustRun(t, c.grpcAddrs(), "digest", "/imp"); out != fmt.Sprintf("%s %d nodes /imp\n", want, len(f.Nodes)) {
		t.Fatalf("digest after the import: %q, want %s", out, want)
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
