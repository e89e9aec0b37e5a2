package replica

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// A peer channel to a server that is down tries again at least every
// quarter second (with jitter and a busy machine, well under the old cap
// of a second) once its backoff has grown: a healed partition or a
// restarted peer is redialled within that, not gRPC's second or more,
// which a follower serving again (raft reaches it at once) would spend
// failing syncs. Dials are counted at the peer plane's dialer, which
// refuses them all for three seconds.
func TestPeerChannelRedialsSoon(t *testing.T) {
	auth, err := KeyAuth(bytes.Repeat([]byte("k"), MinClusterKeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dials []time.Time
	refuse := func(ctx context.Context, addr string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, time.Now())
		mu.Unlock()
		return nil, errors.New("connection refused (test)")
	}
	p, err := newPeerPlane(&Config{PeerListener: lis, PeerDial: refuse, PeerAuth: auth}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	cc, err := p.conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cc.Connect()
	time.Sleep(3 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(dials) < 6 {
		t.Fatalf("%d dials in 3 s", len(dials))
	}
	// The backoff reaches its cap after 7 tries (20 ms × 1.6^n); the
	// gaps after that are the cap, with gRPC's 20% jitter.
	var widest time.Duration
	for i := 8; i < len(dials); i++ {
		widest = max(widest, dials[i].Sub(dials[i-1]))
	}
	t.Logf("%d dials in 3 s; widest gap once backed off %v", len(dials), widest)
	if widest > 600*time.Millisecond {
		t.Fatalf("the channel waited %v between dials to a server that is down; a healed peer waits that long for its first sync", widest)
	}
}
