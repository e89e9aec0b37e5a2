package zkproc

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A standalone server and a three-server ensemble start, serve, say their
// modes over srvr, and are gone after Kill.
func TestStart(t *testing.T) {
	if err := Check(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	one, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if out, err := FourLetter(one.Servers[0].Addr, "srvr"); err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("standalone srvr: %q %v", out, err)
	}

	three, err := Start(ctx, Options{Dir: t.TempDir(), Servers: 3, Config: "tickTime=100\ninitLimit=100\nsyncLimit=50"})
	if err != nil {
		t.Fatal(err)
	}
	defer three.Close()
	modes := map[string]int{}
	for _, s := range three.Servers {
		out, err := FourLetter(s.Addr, "srvr")
		if err != nil {
			t.Fatalf("server %d: %v", s.ID, err)
		}
		_, mode, _ := strings.Cut(out, "Mode: ")
		mode, _, _ = strings.Cut(mode, "\n")
		modes[mode]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v, want one leader and two followers", modes)
	}
	three.Servers[0].Kill()
	if _, err := FourLetter(three.Servers[0].Addr, "srvr"); err == nil {
		t.Fatal("a killed server still answers")
	}
	if len(three.Addrs()) != 3 || three.Addrs()[1] != three.Servers[1].Addr {
		t.Fatalf("Addrs %v", three.Addrs())
	}
}
