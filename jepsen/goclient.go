package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"coord/api"
	"coord/client"
	"coord/vocab"
)

// The workloads on coord's own Go client (package client, over gRPC) see
// what go-zookeeper hides: the zxid of every message a server sends the
// session (through a gRPC stream interceptor, below the client), the
// server the session is on, and precise session events.

// zxidObs is one message a server sent a session, as the client received
// it: "connected" (the server's last applied zxid when it took the
// session), "response" (its last applied zxid when it answered) or
// "event" (the zxid of the change a watch event announces; -1 for events
// a server synthesises on re-attach).
type zxidObs struct {
	At      int64  // history clock at receipt
	Session int64  // 0 until the first connected message
	Server  string // the gRPC address the stream went to
	Kind    string
	Zxid    int64
	Path    string // events only
	Type    int32  // events only: vocab.EventType
	Err     int32  // responses only: the error code
}

func (o zxidObs) String() string {
	s := fmt.Sprintf("%.3fs %s from %s zxid 0x%x", secs(o.At), o.Kind, o.Server, o.Zxid)
	if o.Kind == "event" {
		s += fmt.Sprintf(" %s %s", vocab.EventType(o.Type), o.Path)
	}
	if o.Err != 0 {
		s += " err " + vocab.Code(o.Err).String()
	}
	return s
}

// zxidTap records every message of one client.Conn's streams, in the order
// the client's stream readers received them (one stream at a time).
type zxidTap struct {
	hist *History

	mu      sync.Mutex
	session int64
	obs     []zxidObs
}

func (t *zxidTap) note(server string, m *api.ServerMessage) {
	o := zxidObs{At: t.hist.Now(), Server: server}
	switch {
	case m.GetConnected() != nil:
		o.Kind, o.Zxid = "connected", m.GetConnected().GetZxid()
	case m.GetResponse() != nil:
		o.Kind, o.Zxid, o.Err = "response", m.GetResponse().GetZxid(), m.GetResponse().GetErr()
	case m.GetEvent() != nil:
		ev := m.GetEvent()
		o.Kind, o.Zxid, o.Path, o.Type = "event", ev.GetZxid(), ev.GetPath(), ev.GetType()
	default:
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.Kind == "connected" && t.session == 0 {
		t.session = m.GetConnected().GetSessionId()
	}
	o.Session = t.session
	t.obs = append(t.obs, o)
}

// Obs returns a copy of what the tap recorded.
func (t *zxidTap) Obs() []zxidObs {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]zxidObs(nil), t.obs...)
	for i := range out {
		out[i].Session = t.session
	}
	return out
}

// dialOption is the interceptor that feeds the tap.
func (t *zxidTap) dialOption() grpc.DialOption {
	return grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &tapStream{ClientStream: cs, tap: t, server: cc.Target()}, nil
	})
}

type tapStream struct {
	grpc.ClientStream
	tap    *zxidTap
	server string
}

func (s *tapStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if sm, ok := m.(*api.ServerMessage); ok {
			s.tap.note(s.server, sm)
		}
	}
	return err
}

// sessionEvent is a session state change a Go client reported.
type sessionEvent struct {
	At      int64
	Session int64
	State   client.State
	Server  string
}

// goConn is a coord client session with its tap and its session events.
type goConn struct {
	*client.Conn
	tap *zxidTap

	mu     sync.Mutex
	events []sessionEvent
	// relay, if set, receives the client's session events too (a recipes
	// adapter reads them).
	relay chan client.Event
}

// Events returns a copy of the session events so far.
func (g *goConn) Events() []sessionEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]sessionEvent(nil), g.events...)
}

// dialGo opens a session with coord's Go client on servers (gRPC
// addresses, tried in the given order unless shuffle), bounded by ctx and
// twice the op timeout. With relay the session events are passed on to
// goConn.relay for a recipes adapter.
func (e *Env) dialGo(ctx context.Context, servers []string, shuffle bool, timeout time.Duration, relay bool) (*goConn, error) {
	if len(servers) == 0 {
		return nil, errors.New("jepsen: no gRPC addresses (Env.GRPCAddrs)")
	}
	tap := &zxidTap{hist: e.History}
	cctx, cancel := context.WithTimeout(ctx, 2*e.OpTimeout)
	defer cancel()
	c, events, err := client.Connect(cctx, servers, client.WithSessionTimeout(timeout),
		client.WithShuffle(shuffle), client.WithDialTimeout(e.OpTimeout), client.WithDialOptions(tap.dialOption()))
	if err != nil {
		return nil, err
	}
	g := &goConn{Conn: c, tap: tap}
	if relay {
		g.relay = make(chan client.Event, 64)
	}
	sid := c.SessionID()
	go func() {
		for ev := range events {
			g.mu.Lock()
			g.events = append(g.events, sessionEvent{At: e.History.Now(), Session: sid, State: ev.State, Server: ev.Server})
			g.mu.Unlock()
			if g.relay != nil {
				g.relay <- ev
			}
		}
		if g.relay != nil {
			close(g.relay)
		}
	}()
	return g, nil
}

// closeGo closes a session, bounded by the op timeout.
func (e *Env) closeGo(g *goConn) {
	ctx, cancel := context.WithTimeout(context.Background(), e.OpTimeout)
	defer cancel()
	g.Close(ctx)
}

// goDefinite reports whether a Go client error says for sure that a write
// did not happen.
func goDefinite(err error) bool {
	switch vocab.CodeOf(err) {
	case vocab.BadVersion, vocab.NodeExists, vocab.NoNode, vocab.NotEmpty, vocab.BadArguments:
		return true
	}
	return false
}

// goOutcome maps a Go client write's error.
func goOutcome(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case goDefinite(err):
		return Fail
	}
	return Info
}

// goEnded reports whether the session of a Go client is over for good.
func goEnded(err error) bool {
	return errors.Is(err, client.ErrClosed) || errors.Is(err, vocab.SessionExpired) || errors.Is(err, vocab.AuthFailed)
}

// describeOps renders ops as a sub-history, in invocation order, one a
// line.
func describeOps(ops []Op) []string {
	ops = append([]Op(nil), ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	var out []string
	for _, op := range ops {
		out = append(out, describeOp(op))
	}
	return out
}

func describeOp(op Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  [%.3fs..%.3fs] p%d", secs(op.Invoke), secs(op.Complete), op.Process)
	if op.Session != 0 {
		fmt.Fprintf(&b, " s0x%x", op.Session)
	}
	if op.Server != "" {
		fmt.Fprintf(&b, "@%s", op.Server)
	}
	fmt.Fprintf(&b, " %s", op.F)
	if op.Key != "" {
		b.WriteString(" " + op.Key)
	}
	if op.Path != "" {
		b.WriteString(" " + op.Path)
	}
	if op.F == "write" || op.F == "cas" || op.F == "enqueue" {
		fmt.Fprintf(&b, " %d", op.Value)
	}
	fmt.Fprintf(&b, " -> %s", op.Outcome)
	if op.Outcome == OK {
		if op.OutValue != 0 || op.F == "read" {
			fmt.Fprintf(&b, " %d", op.OutValue)
		}
		if op.OutVersion != 0 {
			fmt.Fprintf(&b, " v%d", op.OutVersion)
		}
		if op.Zxid != 0 {
			fmt.Fprintf(&b, " zxid 0x%x", op.Zxid)
		}
	}
	if op.Err != "" {
		fmt.Fprintf(&b, " (%s)", op.Err)
	}
	return b.String()
}

// limitDetails keeps a verdict's details readable.
func limitDetails(d []string, n int) []string {
	if len(d) > n {
		return append(d[:n:n], fmt.Sprintf("... and %d more", len(d)-n))
	}
	return d
}
