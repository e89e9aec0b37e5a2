package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/client"
	"coord/vocab"
)

// session opens a client session on any of the servers. A failure to reach
// every server within --dial-timeout is an unreachableError.
func (g *globals) session(ctx context.Context) (*client.Conn, error) {
	opts := []client.Option{client.WithDialTimeout(g.dialTimeout), client.WithMaxRetries(len(g.servers))}
	if g.user != "" {
		user, pass, _ := strings.Cut(g.user, ":")
		opts = append(opts, client.WithDigestAuth(user, pass))
	}
	if g.tlsConf != nil {
		opts = append(opts, client.WithTLS(g.tlsConf))
	}
	dctx, cancel := context.WithTimeout(ctx, g.dialTimeout*2)
	defer cancel()
	c, _, err := client.Connect(dctx, g.servers, opts...)
	if err != nil {
		if errors.Is(err, vocab.AuthFailed) {
			return nil, err
		}
		return nil, unreachableError{servers: g.servers, err: rootCause(err), hint: g.portHint(ctx, g.servers, err)}
	}
	return c, nil
}

// withSession runs fn on a new session and closes the session after.
func (g *globals) withSession(ctx context.Context, fn func(*client.Conn) error) error {
	c, err := g.session(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), g.dialTimeout)
		defer cancel()
		c.Close(cctx)
	}()
	return fn(c)
}

// onSession runs fn on a session for one command, within the command's
// timeout.
func (g *globals) onSession(cmd *cobra.Command, fn func(context.Context, *client.Conn) error) error {
	ctx, cancel := g.ctx(cmd)
	defer cancel()
	return g.withSession(ctx, func(c *client.Conn) error { return fn(ctx, c) })
}

// rootCause keeps the innermost message of a wrapped chain, which names
// what went wrong without the layers' prefixes.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// admin is an Admin client on one server.
type admin struct {
	addr string
	cc   *grpc.ClientConn
	api.AdminClient
}

func (g *globals) dialAdmin(addr string) (*admin, error) {
	creds := insecure.NewCredentials()
	if g.tlsConf != nil {
		creds = credentials.NewTLS(g.tlsConf)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithUnaryInterceptor(g.adminUnary), grpc.WithStreamInterceptor(g.adminStream))
	if err != nil {
		return nil, usageError{fmt.Errorf("server address %q: %v", addr, err)}
	}
	return &admin{addr: addr, cc: cc, AdminClient: api.NewAdminClient(cc)}, nil
}

func (a *admin) Close() { a.cc.Close() }

// adminUnary and adminStream send --user as the admin digest on every
// Admin call and turn the server's refusals into errors that say which
// credential is missing or wrong.
func (g *globals) adminUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, err := g.adminContext(ctx)
	if err != nil {
		return err
	}
	return g.authHint(invoker(ctx, method, req, reply, cc, opts...))
}

func (g *globals) adminStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, err := g.adminContext(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, g.authHint(err)
	}
	return hintStream{ClientStream: cs, g: g}, nil
}

// hintStream explains refusals that arrive with a stream's first message.
type hintStream struct {
	grpc.ClientStream
	g *globals
}

func (s hintStream) RecvMsg(m any) error { return s.g.authHint(s.ClientStream.RecvMsg(m)) }

func (g *globals) adminContext(ctx context.Context) (context.Context, error) {
	if g.user == "" {
		return ctx, nil
	}
	for _, r := range g.user {
		if r < ' ' || r > '~' {
			return ctx, usageError{errors.New("--user: an admin call sends user:password as gRPC metadata, which takes printable ASCII only")}
		}
	}
	return metadata.AppendToOutgoingContext(ctx, api.AdminDigestMetadata, g.user), nil
}

// authHint rewrites an Admin refusal (Unauthenticated: no admin identity
// was sent; PermissionDenied: what was sent is not one) into a message
// that names the credential to pass or the one that was wrong, keeping the
// code for exitCode.
func (g *globals) authHint(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		sent := g.sentIdentity()
		if sent == "" {
			return status.Error(st.Code(), "the server wants an admin identity: pass --user super:<password> (its -super-digest) "+
				"or --cert/--key with a certificate in its -admin-x509")
		}
		return status.Errorf(st.Code(), "the server wants an admin identity and did not take %s: %s", sent, msg)
	case codes.PermissionDenied:
		if _, why, ok := strings.Cut(msg, " is refused: "); ok {
			msg = why
		}
		if strings.Contains(msg, "no admin identity configured") {
			return status.Error(st.Code(), msg)
		}
		var fix []string
		if g.user != "" && strings.Contains(msg, "-super-digest") {
			fix = append(fix, "check --user (the -super-digest user and its password)")
		}
		if g.tls.cert != "" && strings.Contains(msg, "-admin-x509") {
			fix = append(fix, "use --cert/--key of a certificate listed in the server's -admin-x509")
		}
		if len(fix) > 0 {
			msg += ": " + strings.Join(fix, ", or ")
		}
		return status.Errorf(st.Code(), "the server refused the admin identity (%s): %s", g.sentIdentity(), msg)
	}
	return err
}

// sentIdentity says which admin credentials this coordctl sends.
func (g *globals) sentIdentity() string {
	var sent []string
	if g.user != "" {
		user, _, _ := strings.Cut(g.user, ":")
		sent = append(sent, "--user "+user)
	}
	if g.tls.cert != "" {
		sent = append(sent, "--cert "+g.tls.cert)
	}
	return strings.Join(sent, ", ")
}

// status asks one server for its status within the dial timeout.
func (g *globals) statusOf(ctx context.Context, addr string) (*api.StatusResponse, error) {
	a, err := g.dialAdmin(addr)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	sctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
	defer cancel()
	st, err := a.Status(sctx, &api.StatusRequest{})
	if hint := g.portHint(ctx, []string{addr}, err); hint != "" {
		return nil, unreachableError{servers: []string{addr}, err: err, hint: hint}
	}
	return st, adminErr("status", addr, err)
}

// anyAdmin returns an Admin client on the first server that answers a
// Status call, with that answer.
func (g *globals) anyAdmin(ctx context.Context) (*admin, *api.StatusResponse, error) {
	var last error
	for _, addr := range g.servers {
		a, err := g.dialAdmin(addr)
		if err != nil {
			return nil, nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, g.dialTimeout)
		st, err := a.Status(sctx, &api.StatusRequest{})
		cancel()
		if err == nil {
			return a, st, nil
		}
		a.Close()
		last = adminErr("status", addr, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, unreachableError{servers: g.servers, err: last, hint: g.portHint(ctx, g.servers, last)}
}

// anyMember is anyAdmin on a server that answers Members, with its answer:
// a server removed from the cluster answers FailedPrecondition, and the
// next of --servers is asked.
func (g *globals) anyMember(ctx context.Context) (*admin, *api.StatusResponse, *api.MembersResponse, error) {
	servers := g.servers
	defer func() { g.servers = servers }()
	for len(g.servers) > 0 {
		a, st, err := g.anyAdmin(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		m, err := a.Members(ctx, &api.MembersRequest{})
		if err == nil {
			return a, st, m, nil
		}
		a.Close()
		if status.Code(err) != codes.FailedPrecondition || ctx.Err() != nil {
			return nil, nil, nil, adminErr("members", a.addr, err)
		}
		i := slices.Index(g.servers, a.addr)
		if i < 0 || i == len(g.servers)-1 {
			return nil, nil, nil, adminErr("members", a.addr, err)
		}
		g.servers = g.servers[i+1:]
	}
	return nil, nil, nil, errors.New("no server to ask")
}

// members lists the cluster's members as any server sees them.
func (g *globals) members(ctx context.Context) ([]*api.Member, *api.StatusResponse, error) {
	a, st, m, err := g.anyMember(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer a.Close()
	return m.Members, st, nil
}

// leaderWait is how long leaderAdmin waits for a server that knows no
// leader (an election under way) to learn of one: a few election
// timeouts.
var leaderWait = 5 * time.Second

// leaderAdmin returns an Admin client on the leader: it asks any server who
// leads and where that server's gRPC address is, asking again for up to
// leaderWait (within ctx) while the server knows no leader.
func (g *globals) leaderAdmin(ctx context.Context) (*admin, []*api.Member, error) {
	deadline := time.Now().Add(leaderWait)
	for {
		a, st, m, err := g.anyMember(ctx)
		if err != nil {
			return nil, nil, err
		}
		if st.Role == "leader" {
			return a, m.Members, nil
		}
		a.Close()
		if st.LeaderId != "" {
			return g.dialLeader(st, m.Members)
		}
		noLeader := fmt.Errorf("server %s (%s) knows no leader", st.Id, a.addr)
		if time.Now().After(deadline) {
			return nil, nil, noLeader
		}
		select {
		case <-ctx.Done():
			return nil, nil, noLeader
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialLeader dials the leader st names, at the address the member list
// gives.
func (g *globals) dialLeader(st *api.StatusResponse, members []*api.Member) (*admin, []*api.Member, error) {
	for _, mem := range members {
		if mem.Id == st.LeaderId {
			if mem.GrpcAddr == "" {
				return nil, nil, fmt.Errorf("leader %s: gRPC address unknown to %s", mem.Id, st.Id)
			}
			la, err := g.dialAdmin(mem.GrpcAddr)
			return la, members, err
		}
	}
	return nil, nil, fmt.Errorf("leader %s is not in the member list", st.LeaderId)
}

// findMember returns the member with the given id.
func findMember(ms []*api.Member, id string) (*api.Member, error) {
	for _, m := range ms {
		if m.Id == id {
			return m, nil
		}
	}
	return nil, usageError{fmt.Errorf("no member with id %q", id)}
}

// portHint says what a failed dial most likely reached, when the error
// shows that something took the connection at addrs but did not answer as
// coord's gRPC port: an HTTP server (coord's -http-addr), a TLS server
// without --tls, a plaintext one with it, or anything else that hung up
// (a ZooKeeper port, most likely: it reads gRPC's preface as a request
// length it does not take and closes, or resets, the connection). "" when
// the error says nothing of the kind (nothing listening, a timeout).
func (g *globals) portHint(ctx context.Context, addrs []string, err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	where := strings.Join(addrs, ",")
	const wantGRPC = "coordctl's --servers wants coord's -grpc-addr, default 2182"
	switch {
	case strings.Contains(msg, "tls: first record does not look like a TLS handshake"):
		return fmt.Sprintf("%s did not answer with TLS: is it a plaintext server (leave out --tls and the TLS flags) or not coord's -grpc-addr (default 2182)?", where)
	case strings.Contains(msg, "looked like an HTTP/1.1 header"):
		return fmt.Sprintf("%s answered with HTTP/1.1, not gRPC (is it coord's -http-addr? %s)", where, wantGRPC)
	case !slices.ContainsFunc([]string{"error reading server preface", "connection reset by peer", "broken pipe"},
		func(s string) bool { return strings.Contains(msg, s) }):
		return "" // it did not take the connection (refused, timed out)
	case g.tlsConf == nil && slices.ContainsFunc(addrs, func(a string) bool { return speaksTLS(ctx, a, g.dialTimeout) }):
		return fmt.Sprintf("%s answered with TLS: pass --tls (and --cacert with the CA of its certificate)", where)
	}
	return fmt.Sprintf("%s did not answer as coord's gRPC port (is it a ZooKeeper port? %s)", where, wantGRPC)
}

// speaksTLS reports whether addr answers a TLS handshake: it completes, or
// the server refuses it with a TLS alert (no client certificate, say). The
// certificate is not checked: nothing is sent over the connection.
func speaksTLS(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} // a probe: it sends nothing
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert)
}
