package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
	"coord/internal/freeport"
)

// TestLocalSurvivesAKilledServer runs `coord local` as a user does and
// kills one of its servers: the others keep running and serving (issue 27
// item 2: coord local stopped them all), every port follows -base-port
// (item 1: the ZooKeeper ports did not, and s2's was coordctl's default
// 2182), and Ctrl-C (SIGTERM) stops the rest.
func TestLocalSurvivesAKilledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real coord processes")
	}
	dir := t.TempDir()
	bin := buildCoord(t, dir)
	base := freeBase(t, 3)
	cmd := exec.Command(bin, "local", "-voters", "3", "-observers", "0", "-dir", filepath.Join(dir, "cl"), "-base-port", strconv.Itoa(base))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	pids := map[string]int{}
	zks := map[string]string{}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	started := regexp.MustCompile(`^coord local: (s\d) \(voter\) pid (\d+) grpc \S+ zk (\S+) `)
	for len(pids) < 3 {
		select {
		case l := <-lines:
			if m := started.FindStringSubmatch(l); m != nil {
				pids[m[1]], _ = strconv.Atoi(m[2])
				zks[m[1]] = m[3]
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("coord local did not start 3 servers: %v", pids)
		}
	}
	for id, zk := range zks {
		if want := fmt.Sprintf("127.0.0.1:%d", base+400+int(id[1]-'0')); zk != want {
			t.Errorf("%s's ZooKeeper port %s, want %s (base+400+i)", id, zk, want)
		}
	}
	grpcAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", base+100+i) }
	// waitLeader waits until the servers name a leader other than not.
	waitLeader := func(not string, servers ...int) {
		deadline := time.Now().Add(30 * time.Second)
		for _, i := range servers {
			for {
				cc, err := grpc.NewClient(grpcAddr(i), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				st, err := api.NewAdminClient(cc).Status(ctx, &api.StatusRequest{})
				cancel()
				cc.Close()
				if err == nil && st.LeaderId != "" && st.LeaderId != not {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("s%d has no leader (other than %q): %v %v", i, not, st, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	waitLeader("", 1, 3)
	if err := syscall.Kill(pids["s2"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("coord local exited when s2 was killed: %v", err)
	default:
	}
	waitLeader("s2", 1, 3)
	for _, id := range []string{"s1", "s3"} {
		if err := syscall.Kill(pids[id], 0); err != nil {
			t.Errorf("%s is gone after s2 was killed: %v", id, err)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("coord local did not stop on SIGTERM")
	}
	for _, id := range []string{"s1", "s3"} {
		if err := syscall.Kill(pids[id], 0); err == nil {
			t.Errorf("%s still runs after coord local stopped", id)
		}
	}
}

// freeBase is a base port for coord local with n servers.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	base, err := freeport.LocalBase(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// TestLocalCtrlCStopsCleanly: the flags after "--" reach every server, and
// Ctrl-C stops a 3-voter + 1-observer cluster without an ERROR line (it
// logged a score of them: raft's failures to reach the peers that were
// stopping too, and the elections of servers that outlived their leader).
func TestLocalCtrlCStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real coord processes")
	}
	dir := t.TempDir()
	bin := buildCoord(t, dir)
	base := freeBase(t, 4)
	cmd := exec.Command(bin, "local", "-voters", "3", "-observers", "1", "-dir", filepath.Join(dir, "cl"),
		"-base-port", strconv.Itoa(base), "--", "-max-client-conns", "7")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// Every server knows the leader, the observer as an observer.
	deadline := time.Now().Add(60 * time.Second)
	for i := 1; i <= 4; i++ {
		for {
			cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", base+100+i), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := api.NewAdminClient(cc).Status(ctx, &api.StatusRequest{})
			cancel()
			cc.Close()
			if err == nil && st.LeaderId != "" && (i < 4 || st.Role == "observer") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("s%d: no leader: %v %v\n%s", i, st, err, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if n := strings.Count(out.String(), " -max-client-conns 7\n"); n != 4 {
		t.Errorf("%d servers start with the flags after \"--\", want 4:\n%s", n, out.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("coord local did not stop on SIGINT")
	}
	log := out.String()
	_, stopping, _ := strings.Cut(log, `msg="shutting down"`)
	if n := strings.Count(stopping, "level=ERROR"); n != 0 {
		t.Errorf("%d ERROR lines while the cluster stopped:\n%s", n, stopping)
	}
}

// buildCoord builds this checkout's coord into dir (once per test: each
// runs its own processes).
func buildCoord(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "coord")
	if out, err := exec.Command("go", "build", "-o", bin, "coord/cmd/coord").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
