package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"coord/server"
)

// --servers pointed at something that answers, but not as coord's gRPC
// port, says what it likely is and what to pass instead.
func TestWrongPort(t *testing.T) {
	// A ZooKeeper-ish port: reads a request, answers with a jute frame and
	// hangs up, as ZooKeeper does with a length it does not take.
	zk, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zk.Close() })
	go func() {
		for {
			c, err := zk.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.ReadFull(c, make([]byte, 4))
				c.Write([]byte{0, 0, 0, 4, 0, 0, 0, 0})
			}()
		}
	}()
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes coordctl fails
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	zkAddr, webAddr, tlsAddr := zk.Addr().String(), web.Listener.Addr().String(), tlsSrv.Listener.Addr().String()
	const grpcAddr = "coordctl's --servers wants coord's -grpc-addr, default 2182"
	for _, c := range []struct {
		servers string
		args    []string
		want    string
	}{
		{zkAddr, []string{"get", "/"}, zkAddr + " did not answer as coord's gRPC port (is it a ZooKeeper port? " + grpcAddr + ")"},
		{zkAddr, []string{"members"}, zkAddr + " did not answer as coord's gRPC port (is it a ZooKeeper port? " + grpcAddr + ")"},
		{webAddr, []string{"get", "/"}, webAddr + " answered with HTTP/1.1, not gRPC (is it coord's -http-addr? " + grpcAddr + ")"},
		{webAddr, []string{"status"}, webAddr + " answered with HTTP/1.1, not gRPC (is it coord's -http-addr? " + grpcAddr + ")"},
		{tlsAddr, []string{"get", "/"}, tlsAddr + " answered with TLS: pass --tls (and --cacert with the CA of its certificate)"},
		{webAddr, []string{"--tls", "get", "/"}, webAddr + " did not answer with TLS: is it a plaintext server"},
	} {
		r := fails(t, c.servers, exitUnreachable, c.args...)
		if !strings.HasPrefix(r.stderr, "coordctl: "+c.want) {
			t.Errorf("coordctl %q at %s: %q, want %q", c.args, c.servers, r.stderr, c.want)
		}
	}
	// endpoint health reports the same for the endpoint that is wrong.
	r := ctl(t, webAddr, "", "endpoint", "health")
	if r.code != exitCheckFailed || !strings.Contains(r.stdout, webAddr+" is unhealthy: "+webAddr+" answered with HTTP/1.1") {
		t.Errorf("endpoint health at the HTTP port: %+v", r)
	}
}

// An unknown global flag is named as such, not taken for the command's
// name (cobra's command search takes the next word for its value).
func TestUnknownFlag(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sever", "x", "create", "/hello"}, "unknown flag: --sever"},
		{[]string{"--tsl", "create", "/hello"}, "unknown flag: --tsl"},
		{[]string{"-Z", "ls", "/"}, "unknown shorthand flag: 'Z' in -Z"},
		{[]string{"--tsl", "sessions", "kill", "0x1"}, "unknown flag: --tsl"},
		{[]string{"frobnicate", "-R"}, `unknown command "frobnicate" for "coordctl"`},
	} {
		if r := fails(t, dead, exitUsage, c.args...); r.stderr != "coordctl: "+c.want+"\n" {
			t.Errorf("coordctl %q: %q, want %q", c.args, r.stderr, c.want)
		}
	}
}

// Data over the servers' limit says how large it is and what they take,
// whether the server refuses it (BadArguments) or drops a request larger
// than it reads at all (the client sees ConnectionLoss).
func TestOversizeData(t *testing.T) {
	if defaultMaxDataBytes != server.DefaultMaxDataBytes {
		t.Fatalf("defaultMaxDataBytes %d, server.DefaultMaxDataBytes %d", defaultMaxDataBytes, server.DefaultMaxDataBytes)
	}
	s := shared(t).grpcAddrs()
	fresh(t, s, "/oversize")
	mustRun(t, s, "create", "/oversize")
	for _, n := range []int{defaultMaxDataBytes + 1, 2 << 20} {
		data := strings.Repeat("x", n)
		for _, args := range [][]string{{"set", "/oversize", "-"}, {"create", "/oversize/c", "-"}} {
			r := ctl(t, s, data, args...)
			want := fmt.Sprintf("coordctl: %s %s: data is %d bytes; the servers take at most %d unless started with a larger -max-data-bytes (ZooKeeper's jute.maxbuffer)\n",
				args[0], args[1], n, defaultMaxDataBytes)
			if r.code != exitError || r.stderr != want {
				t.Errorf("%s of %d bytes: exit %d, %q, want %q", args[0], n, r.code, r.stderr, want)
			}
		}
	}
	// At the limit it is taken.
	if r := ctl(t, s, strings.Repeat("x", defaultMaxDataBytes), "set", "/oversize", "-"); r.code != 0 {
		t.Errorf("set of %d bytes: %+v", defaultMaxDataBytes, r)
	}
}

// The plain progress line (not a terminal) says what it counts.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	g := &globals{stderr: &out}
	p := g.progress("check perf setData", "seconds", 5)
	p.last = time.Now().Add(-time.Minute)
	p.add(2)
	if got := out.String(); got != "check perf setData: 2/5 seconds\n" {
		t.Fatalf("progress: %q", got)
	}
}
