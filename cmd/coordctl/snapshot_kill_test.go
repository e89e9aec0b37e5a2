package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"coord/client"
	"coord/server/replica"
	"coord/vocab"
)

// metric scrapes p's /metrics for one unlabelled sample.
func (p *proc) metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := healthClient.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// Issue 21: a server whose log passes -snapshot-log-bytes snapshots and
// keeps its log bounded, and after kill -9 restarts from the snapshot and
// the short log tail with every acknowledged write; its clients, kept
// connected across the kill, reconnect on their own and read them.
func TestSnapshotByLogSizeSurvivesKill9(t *testing.T) {
	const limit = 256 << 10
	c := newProcs(t, t.TempDir(), 1, 0)
	p := c.nodes[0]
	p.args = append(p.args, "-snapshot-log-bytes", strconv.Itoa(limit))
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", p.id, tail(p.log))
		}
	})
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.waitHealthy(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const writers, size, writes = 4, 2 << 10, 200 // 1.6 MB of data: 6× the limit
	conns := make([]*client.Conn, writers)
	for i := range conns {
		cn, _, err := client.Connect(ctx, []string{p.grpc})
		if err != nil {
			t.Fatal(err)
		}
		defer cn.Close(context.Background())
		conns[i] = cn
	}
	if _, err := conns[0].Create(ctx, "/k9", nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	last := make([][]byte, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i, cn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := fmt.Sprintf("/k9/w%d", i)
			if _, err := cn.Create(ctx, path, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
				errs <- err
				return
			}
			for k := range writes {
				data := append(bytes.Repeat([]byte{byte('a' + k%26)}, size-8), fmt.Sprintf("%08d", k)...)
				if _, err := cn.Set(ctx, path, data, -1); err != nil {
					errs <- fmt.Errorf("setData %s #%d: %w", path, k, err)
					return
				}
				last[i] = data
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	snaps := p.metric(t, "coord_raft_snapshots_total")
	since := p.metric(t, "coord_raft_log_bytes_since_snapshot")
	first := p.metric(t, "coord_raft_log_first_index")
	applied := p.metric(t, "coord_raft_applied_index")
	t.Logf("before kill: %v snapshots, %v log bytes since the last, log [%v, %v], raft log store %d bytes",
		snaps, since, first, applied, replica.LogStoreBytes(filepath.Join(p.dir, "data")))
	if snaps < 2 || since > limit+1<<20 || first < 2 {
		t.Fatalf("with %d bytes written and -snapshot-log-bytes %d: %v snapshots, %v bytes since the last, first log index %v",
			writers*writes*size, limit, snaps, since, first)
	}

	// kill -9, and start again at once.
	p.cmd.Process.Kill()
	<-p.done
	restarted := time.Now()
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	// The clients reconnect on their own (the session outlives the
	// restart) and read every acknowledged write.
	for i, cn := range conns {
		path := fmt.Sprintf("/k9/w%d", i)
		for {
			got, _, err := cn.Get(ctx, path)
			if errors.Is(err, vocab.ConnectionLoss) && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("after kill -9: get %s: %v", path, err)
			}
			if !bytes.Equal(got, last[i]) {
				t.Errorf("after kill -9: %s ends %q, want %q", path, got[max(0, len(got)-8):], last[i][size-8:])
			}
			break
		}
	}
	t.Logf("every write read back %v after the restart", time.Since(restarted).Round(time.Millisecond))
	if got := p.metric(t, "coord_raft_applied_index"); got < applied {
		t.Errorf("after kill -9: applied index %v, before %v", got, applied)
	}
}
