package memnet_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"coord/internal/memnet"
)

// TestGRPC serves gRPC's health service on one host and calls it from
// another, through an isolation and a heal.
func TestGRPC(t *testing.T) {
	n := memnet.New()
	lis := listen(t, n.Host("s1"), "s1:7000")
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("coord", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	client := n.Host("c")
	cc, err := grpc.NewClient("passthrough:///s1:7000",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return client.Dial(ctx, addr)
		}),
		// Reconnect quickly after the heal (the default backoff starts at 1 s).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	check := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "coord"})
		if err == nil && res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("status %v", res.GetStatus())
		}
		return err
	}
	for range 20 {
		if err := check(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// A streaming call sees the cut.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "coord"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	n.Isolate("c")
	watchErr := make(chan error, 1)
	go func() { _, err := watch.Recv(); watchErr <- err }()
	select {
	case err := <-watchErr:
		if err == nil {
			t.Fatal("Watch went on across the cut")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not end when its connection was cut")
	}
	if err := check(50 * time.Millisecond); err == nil {
		t.Fatal("a call succeeded across the cut")
	}

	n.Heal()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := check(time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call succeeded after the heal: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
