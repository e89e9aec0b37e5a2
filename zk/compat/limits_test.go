package compat

import (
	"io"
	"testing"
	"time"
)

// One client address may hold maxClientCnxns connections; one more is
// closed at once, before any answer (ZooKeeper's maxClientCnxns; coord's
// -max-client-conns, default 60 as ZooKeeper's). A connection that sends
// no connect request is closed after the sessionless timeout (ZooKeeper's
// zookeeper.nio.sessionlessCnxnTimeout; coord's -handshake-timeout, both
// 10 s by default), not held for a session timeout. Run against real
// processes of both.
func TestConnectionLimits(t *testing.T) {
	cl := newProcClusterOpts(t, 1, procOpts{
		coordArgs: []string{"-max-client-conns", "5", "-handshake-timeout", "1s"},
		zooCfg:    []string{"maxClientCnxns=5"},
		jvmProps:  []string{"-Dzookeeper.nio.sessionlessCnxnTimeout=1000"},
	})
	addr := cl.Addr(0)
	var held []*rawConn
	for i := 0; i < 5; i++ {
		c := rawConnect(t, addr, rawConnectOpts{})
		if c.SessionID == 0 {
			t.Fatalf("connection %d refused", i+1)
		}
		held = append(held, c)
	}
	// The server may close the sixth connection so fast that the dial
	// itself already fails (ZooKeeper: "connect: broken pipe").
	if extra, err := dialPlain(addr); err == nil {
		defer extra.Close()
		extra.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(extra); err != nil || len(b) != 0 {
			t.Fatalf("a sixth connection from one address: read %q, %v; want it closed at once", b, err)
		}
	} else {
		t.Logf("the sixth connection was closed while dialing: %v", err)
	}
	// The five keep working.
	for i, c := range held {
		if rep := c.call(opExists, func(w *jw) { w.str("/"); w.bool(false) }); rep.err != codeOK {
			t.Errorf("connection %d after the refusal: %d", i+1, rep.err)
		}
	}
	for _, c := range held {
		c.nc.Close()
	}

	// A silent connection is closed after the handshake timeout (1 s).
	time.Sleep(200 * time.Millisecond)
	silent, err := dialPlain(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(8 * time.Second))
	b, err := io.ReadAll(silent)
	took := time.Since(start)
	t.Logf("%s closed a silent connection after %v", cl.Name(), took.Round(10*time.Millisecond))
	if err != nil || len(b) != 0 || took < 500*time.Millisecond || took > 5*time.Second {
		t.Fatalf("a silent connection: read %q, %v after %v; want it closed after about 1 s", b, err, took)
	}
}
