// Package fourletter is a client of ZooKeeper's four-letter words (ruok,
// srvr, mntr, ...): it connects to a ZooKeeper-protocol port, writes the
// word and reads the whole answer, which ends when the server closes the
// connection. Used by coordctl's 4lw command, the tools and the tests that
// ask coord or Apache ZooKeeper servers how they are.
package fourletter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Options bound one exchange and say whether it speaks TLS. The zero value
// leaves every bound to the context.
type Options struct {
	// DialTimeout bounds connecting (zero: only the context does).
	DialTimeout time.Duration
	// Timeout bounds the exchange once connected: the TLS handshake,
	// writing the word and reading the answer (zero: only the context's
	// deadline does).
	Timeout time.Duration
	// TLS, when not nil, is the client configuration to speak TLS with (a
	// server's TLS-only or secure ZooKeeper port). Without a ServerName the
	// host of addr is verified.
	TLS *tls.Config
}

// Ask sends word to the server at addr and returns everything the server
// writes before it closes the connection. ctx bounds the whole exchange (its
// deadline, when sooner than the Options' bounds, and its cancellation).
//
// A failed read returns what arrived before it with the error, for the
// caller to judge; a connection closed without a byte is ("", nil): a
// TLS-only port that refuses plaintext does that. A failed TLS handshake is
// an error that starts with "TLS: ".
func Ask(ctx context.Context, addr, word string, o Options) (string, error) {
	d := net.Dialer{Timeout: o.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	var deadline time.Time
	if o.Timeout > 0 {
		deadline = time.Now().Add(o.Timeout)
	}
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	nc.SetDeadline(deadline)
	// A cancelled context ends a read that is waiting for the server.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return "", fmt.Errorf("TLS: %w", err)
		}
		nc = tc
	}
	if _, err := io.WriteString(nc, word); err != nil {
		return "", cancelled(ctx, err)
	}
	b, err := io.ReadAll(nc)
	return string(b), cancelled(ctx, err)
}

// cancelled is ctx's error for an exchange that failed because ctx was
// cancelled, err otherwise: a deadline's i/o timeout stays a net.Error whose
// Timeout is true.
func cancelled(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return err
}
