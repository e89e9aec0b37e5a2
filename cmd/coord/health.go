package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// runHealth is `coord health`: it asks a server's /health and exits 0 when
// the server says it is healthy (part of a cluster with a leader, serving
// sessions), 1 otherwise. It exists for container health checks: an image
// built FROM scratch has no curl or wget, only the coord binary.
func runHealth(args []string) int {
	fs := flag.NewFlagSet("coord health", flag.ContinueOnError)
	addr := fs.String("http-addr", "127.0.0.1:8080", "the server's HTTP address (its -http-addr)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	url := *addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord health: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Print(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(os.Stderr, "coord health: %s\n", resp.Status)
		return 1
	}
	return 0
}
