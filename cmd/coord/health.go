package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	addr := fs.String("http-addr", "127.0.0.1:8080", "the server's HTTP address (its -http-addr); https://ADDR for a server with TLS")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	caFile := fs.String("tls-ca", "", "PEM CA that signed the server's certificate (verify it; without it, a TLS server's certificate is not checked: the probe reads /health only)")
	certFile := fs.String("tls-cert", "", "PEM client certificate, for a server started with -tls-client-auth")
	keyFile := fs.String("tls-key", "", "PEM private key of -tls-cert")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tlsCfg, err := healthTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord health: %v\n", err)
		return 2
	}
	url := *addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
		if *caFile != "" || *certFile != "" {
			url = "https://" + *addr
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	status, body, err := getHealth(ctx, client, url)
	if err == nil && status == http.StatusBadRequest && strings.Contains(body, "HTTP request to an HTTPS server") {
		// The server speaks TLS (its -tls-cert): ask again over https, as
		// the image's HEALTHCHECK must work with TLS on and no flags.
		url = "https://" + strings.TrimPrefix(url, "http://")
		status, body, err = getHealth(ctx, client, url)
	}
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate") {
			msg += " (the server wants a client certificate: pass -tls-cert and -tls-key)"
		}
		fmt.Fprintf(os.Stderr, "coord health: %s\n", msg)
		return 1
	}
	fmt.Print(body)
	if status != http.StatusOK {
		fmt.Fprintf(os.Stderr, "coord health: %d %s\n", status, http.StatusText(status))
		return 1
	}
	return 0
}

// getHealth asks url's /health and returns the status and body.
func getHealth(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), nil
}

// healthTLS is the probe's TLS: verify the server against caFile if
// given (else do not verify: the probe sends nothing and reads only
// /health), and present a client certificate if given.
func healthTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: caFile == ""} //nolint:gosec // see above
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
