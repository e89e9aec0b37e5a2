package client

import (
	"crypto/tls"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Defaults for the options.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultDialTimeout    = 2 * time.Second
	DefaultBackoffMin     = 20 * time.Millisecond
	DefaultBackoffMax     = time.Second
)

// Option configures Connect.
type Option func(*options)

type options struct {
	sessionTimeout time.Duration
	dialTimeout    time.Duration
	logger         *slog.Logger
	auth           []authCred
	maxRetries     int
	backoffMin     time.Duration
	backoffMax     time.Duration
	shuffle        bool
	dialOptions    []grpc.DialOption
}

// authCred is an identity the session presents: at connect and again on
// every re-attach.
type authCred struct {
	scheme string
	auth   []byte
}

func defaultOptions() options {
	return options{
		sessionTimeout: DefaultSessionTimeout,
		dialTimeout:    DefaultDialTimeout,
		logger:         slog.New(slog.DiscardHandler),
		backoffMin:     DefaultBackoffMin,
		backoffMax:     DefaultBackoffMax,
		shuffle:        true,
	}
}

// WithSessionTimeout asks for a session timeout. The server negotiates it
// into its own bounds; Conn.SessionTimeout reports the result. The client
// pings at a third of the negotiated timeout when idle.
func WithSessionTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.sessionTimeout = d
		}
	}
}

// WithDialTimeout bounds one attempt to reach a server: opening the stream and
// the connect handshake.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.dialTimeout = d
		}
	}
}

// WithLogger routes the client's logs to l. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithDigestAuth authenticates the session as the digest identity
// user:password, at connect and on every re-attach.
func WithDigestAuth(user, password string) Option {
	return WithAuth("digest", []byte(user+":"+password))
}

// WithAuth authenticates the session with an identity of any scheme, as
// Conn.AddAuth does after connecting.
func WithAuth(scheme string, auth []byte) Option {
	return func(o *options) {
		o.auth = append(o.auth, authCred{scheme: scheme, auth: append([]byte(nil), auth...)})
	}
}

// WithMaxRetries makes Connect give up after n consecutive failed attempts
// to reach a server (0, the default, means no limit: Connect tries until its
// context ends). It does not shorten the life of an established session: a
// broken one is tried on every server until its timeout passes, so a server
// that restarts within the timeout takes it back.
func WithMaxRetries(n int) Option {
	return func(o *options) {
		if n >= 0 {
			o.maxRetries = n
		}
	}
}

// WithBackoff sets the pause after a full round of failed attempts over the
// server list: it starts at min and doubles up to max, with jitter.
func WithBackoff(min, max time.Duration) Option {
	return func(o *options) {
		if min > 0 {
			o.backoffMin = min
		}
		if max >= o.backoffMin {
			o.backoffMax = max
		}
	}
}

// WithShuffle chooses whether the server list is shuffled (the default, to
// spread sessions over servers) or tried in the order given.
func WithShuffle(shuffle bool) Option {
	return func(o *options) { o.shuffle = shuffle }
}

// WithDialOptions adds gRPC dial options (for example TLS credentials, which
// replace the default insecure ones).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// WithTLS connects over TLS with cfg (nil: the system's roots, no client
// certificate): the servers' certificates are verified against cfg's
// RootCAs, and cfg's Certificates are presented to servers that ask
// (mutual TLS).
func WithTLS(cfg *tls.Config) Option {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
}
