package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"coord/server"
)

// runLocal runs a cluster of real coord processes on loopback: voters that
// bootstrap together and observers the leader adds. Server i (from 1) uses
// raft port base+i, gRPC port base+100+i, gossip port base+200+i, HTTP
// port base+300+i and the ZooKeeper protocol on port base+400+i, so
// -base-port moves every port (and none is a single server's default, such
// as coordctl's 127.0.0.1:2182). Flags after "--" are passed to every
// server, after the ones coord local gives it (so they win). A server that
// exits (killed, say) leaves the others running; Ctrl-C stops them all at
// once.
func runLocal(args []string) int {
	fs := flag.NewFlagSet("coord local", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: coord local [flags] [-- server flags]

Runs a cluster of real coord processes on loopback. Server flags after "--"
go to every server (coord -help lists them), for example
  coord local -voters 3 -- -tick 500ms -log-level debug
Ctrl-C stops every server.

Flags:
`)
		fs.PrintDefaults()
	}
	voters := fs.Int("voters", 3, "number of voters")
	observers := fs.Int("observers", 1, "number of observers")
	dir := fs.String("dir", "coord-local", "parent directory of the servers' data directories")
	base := fs.Int("base-port", 2880, "server i listens for raft on base+i, gRPC on base+100+i, gossip on base+200+i, HTTP on base+300+i, ZooKeeper clients on base+400+i")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	serverArgs := fs.Args()
	if i := len(args) - len(serverArgs); len(serverArgs) > 0 && (i == 0 || args[i-1] != "--") {
		fmt.Fprintf(os.Stderr, "coord local: unexpected %q: server flags go after \"--\" (coord local -help)\n", serverArgs[0])
		return 2
	}
	if *voters < 1 || *observers < 0 {
		fmt.Fprintln(os.Stderr, "coord local: need at least one voter")
		return 2
	}
	n := *voters + *observers
	raftAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", *base+i) }
	grpcAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", *base+100+i) }
	zkAddr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", *base+400+i) }
	var peers []string
	for i := 1; i <= n; i++ {
		p := fmt.Sprintf("s%d=%s,%s", i, raftAddr(i), grpcAddr(i))
		if i > *voters {
			p += ",observer"
		}
		peers = append(peers, p)
	}
	// One cluster key for every server: each proves membership on the peer
	// plane with it (kept in the parent directory, made on first start).
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "coord local:", err)
		return 1
	}
	keyFile := filepath.Join(*dir, server.ClusterKeyName)
	if err := ensureKeyFile(keyFile); err != nil {
		fmt.Fprintln(os.Stderr, "coord local: cluster key:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord local:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var procs []*exec.Cmd
	for i := 1; i <= n; i++ {
		var others []string
		for j, p := range peers {
			if j != i-1 {
				others = append(others, p)
			}
		}
		args := []string{"-id", fmt.Sprintf("s%d", i), "-data-dir", filepath.Join(*dir, fmt.Sprintf("s%d", i)),
			"-raft-addr", raftAddr(i), "-grpc-addr", grpcAddr(i), "-peers", strings.Join(others, ";"),
			"-gossip-addr", fmt.Sprintf("127.0.0.1:%d", *base+200+i), "-http-addr", fmt.Sprintf("127.0.0.1:%d", *base+300+i),
			"-zk-addr", zkAddr(i), "-cluster-key-file", keyFile}
		if i > 1 {
			args = append(args, "-join", fmt.Sprintf("127.0.0.1:%d", *base+201), "-bootstrap="+fmt.Sprint(i <= *voters))
		}
		if i > *voters {
			args = append(args, "-observer", "-bootstrap=false")
		}
		args = append(args, serverArgs...)
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "coord local:", err)
			stopAll(procs)
			return 1
		}
		procs = append(procs, cmd)
		role := "voter"
		if i > *voters {
			role = "observer"
		}
		fmt.Fprintf(os.Stderr, "coord local: s%d (%s) pid %d grpc %s zk %s raft %s\n", i, role, cmd.Process.Pid, grpcAddr(i), zkAddr(i), raftAddr(i))
		fmt.Fprintf(os.Stderr, "coord local: s%d restarts with: %s %s\n", i, self, strings.Join(args, " "))
	}
	var grpcs, zks []string
	for i := 1; i <= n; i++ {
		grpcs, zks = append(grpcs, grpcAddr(i)), append(zks, zkAddr(i))
	}
	fmt.Fprintf(os.Stderr, "coord local: coordctl --servers %s (or export COORD_SERVERS=%[1]s COORD_ZK_SERVERS=%s); ZooKeeper clients: %[2]s\n",
		strings.Join(grpcs, ","), strings.Join(zks, ","))
	// A server that exits leaves the others running (start it again with
	// the line above and it catches up); Ctrl-C stops them all.
	exited := make(chan int, len(procs))
	for i, p := range procs {
		go func() { p.Wait(); exited <- i }()
	}
	for running := len(procs); running > 0; running-- {
		select {
		case <-ctx.Done():
			// Stop them together, so that none outlives the others for
			// long (a lone survivor would hold elections); the waiters
			// above own Wait: signal, then wait for them.
			for _, p := range procs {
				p.Process.Signal(syscall.SIGTERM)
			}
			for ; running > 0; running-- {
				<-exited
			}
			return 0
		case i := <-exited:
			fmt.Fprintf(os.Stderr, "coord local: s%d exited (%v); the others keep running\n", i+1, procs[i].ProcessState)
		}
	}
	fmt.Fprintln(os.Stderr, "coord local: every server exited")
	return 1
}

func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		if p.ProcessState == nil {
			p.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		p.Wait()
	}
}
