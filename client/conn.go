package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/vocab"
)

// Conn is a client session with a coord cluster. It is safe for concurrent
// use: calls from many goroutines are pipelined on the session's one stream,
// written in the order they are made and answered in that order. When the
// stream breaks the Conn re-attaches the session to another server,
// re-registering its watches; calls in flight fail with vocab.ConnectionLoss,
// calls made meanwhile wait for the new stream (or their context).
type Conn struct {
	opts    options
	servers []string
	log     *slog.Logger
	events  *sessionEvents
	watches *watchTable

	ctx      context.Context // ends when the Conn does
	cancel   context.CancelFunc
	loopDone chan struct{}

	xid       atomic.Int64
	lastZxid  atomic.Int64
	lastHeard atomic.Int64 // unix nanoseconds of the last message from a server

	mu         sync.Mutex
	state      State
	sessionID  int64
	password   []byte
	timeout    time.Duration // negotiated
	server     string
	stream     *stream       // nil unless connected
	ready      chan struct{} // closed while stream != nil or the Conn has ended
	endErr     error         // what calls return once the Conn has ended
	closing    bool          // Close was called
	closeAcked bool          // the server answered closeSession
	auth       []authCred
	next       int // index in servers of the next server to try
}

// Connect dials the servers (gRPC addresses, host:port) until one accepts a
// new session, and returns the Conn and its channel of session events
// (EventSession: Connecting, Connected, Disconnected, and finally Expired,
// AuthFailed or Closed, after which the channel closes). Read the channel or
// let it be: it never blocks the Conn, and a reader that falls far behind
// loses the oldest events, never the last. ctx bounds only the first
// connect; without WithMaxRetries, Connect tries until ctx ends.
func Connect(ctx context.Context, servers []string, opts ...Option) (*Conn, <-chan Event, error) {
	if len(servers) == 0 {
		return nil, nil, errors.New("coord: no servers given")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	list := slices.Clone(servers)
	if o.shuffle {
		rand.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	}
	c := &Conn{
		opts:     o,
		servers:  list,
		log:      o.logger,
		events:   newSessionEvents(),
		watches:  newWatchTable(),
		loopDone: make(chan struct{}),
		state:    StateDisconnected,
		ready:    make(chan struct{}),
		timeout:  o.sessionTimeout,
		auth:     slices.Clone(o.auth),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	s, _, err := c.establish(ctx)
	if err != nil {
		c.end(StateClosed, err)
		close(c.loopDone)
		return nil, nil, fmt.Errorf("coord: connect: %w", err)
	}
	go c.run(s)
	return c, c.events.ch, nil
}

// State reports the session's state.
func (c *Conn) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// SessionID is the session's id (the zxid of its creation).
func (c *Conn) SessionID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// SessionTimeout is the timeout the server negotiated.
func (c *Conn) SessionTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeout
}

// Server is the address of the server the session is (or was last)
// attached to.
func (c *Conn) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// LastZxid is the newest zxid the session has seen (in a response, or the
// server's when it took the session); a server that has not applied it will
// not take the session.
func (c *Conn) LastZxid() int64 { return c.lastZxid.Load() }

func (c *Conn) noteZxid(z int64) {
	for {
		old := c.lastZxid.Load()
		if z <= old || c.lastZxid.CompareAndSwap(old, z) {
			return
		}
	}
}

// setState records a new state and reports it; the caller holds c.mu.
func (c *Conn) setState(st State) { c.setStateErr(st, nil) }

// setStateErr is setState with the reason for the change (a Disconnected
// event carries why the stream ended).
func (c *Conn) setStateErr(st State, err error) {
	if c.state == st && st != StateConnected {
		return
	}
	c.state = st
	ev := Event{Type: EventSession, State: st, Err: err, Server: c.server}
	c.events.push(ev)
	if st != StateConnecting {
		c.watches.session(ev)
	}
}

// run keeps the session attached until it ends.
func (c *Conn) run(s *stream) {
	defer close(c.loopDone)
	for {
		err := s.serve()
		st, cause := c.classify(err)
		c.detach(s, st, err)
		if st.terminal() {
			c.end(st, cause)
			return
		}
		c.log.Info("coord: disconnected", "server", s.server, "err", err)
		var endState State
		s, endState, err = c.establish(c.ctx)
		if err != nil {
			c.end(endState, err)
			return
		}
	}
}

// classify turns the end of a stream into what happens next: a terminal
// state and its error, or StateDisconnected to re-attach.
func (c *Conn) classify(err error) (State, error) {
	c.mu.Lock()
	closing, acked := c.closing, c.closeAcked
	c.mu.Unlock()
	switch {
	case acked || (closing && c.ctx.Err() != nil):
		return StateClosed, ErrClosed
	case errors.Is(err, vocab.SessionExpired), status.Code(err) == codes.NotFound:
		return StateExpired, vocab.SessionExpired
	case status.Code(err) == codes.Unauthenticated:
		return StateAuthFailed, vocab.AuthFailed
	}
	return StateDisconnected, nil
}

// detach takes s out of service and fails its pending calls; why is the
// error that ended the stream.
func (c *Conn) detach(s *stream, st State, why error) {
	code := vocab.ConnectionLoss
	if st == StateExpired {
		code = vocab.SessionExpired
	}
	c.mu.Lock()
	if c.stream == s {
		c.stream = nil
		c.ready = make(chan struct{})
		if !st.terminal() {
			c.setStateErr(StateDisconnected, why)
		}
	}
	c.mu.Unlock()
	s.fail(code)
}

// end finishes the Conn: calls fail with err, watches and the event channel
// get a last event and close. Only the first call counts.
func (c *Conn) end(st State, err error) {
	c.mu.Lock()
	if c.endErr != nil {
		c.mu.Unlock()
		return
	}
	c.endErr = err
	s := c.stream
	c.stream = nil
	if s == nil {
		close(c.ready)
	}
	c.state = st
	ev := Event{Type: EventSession, State: st, Err: err, Server: c.server}
	c.mu.Unlock()
	if s != nil {
		s.fail(err)
	}
	c.cancel()
	c.watches.finish(Event{Type: EventNotWatching, State: st, Err: err})
	c.events.push(ev)
	c.events.close()
	c.log.Info("coord: session ended", "state", st, "err", err)
}

// establish finds a server that takes the session: the next servers in
// turn, with backoff after each full round. It fails with the terminal state
// to report: Expired (the server does not know the session, or no server
// answered within its timeout, or the retries ran out), AuthFailed, or
// Closed when ctx ends.
func (c *Conn) establish(ctx context.Context) (*stream, State, error) {
	backoff := c.opts.backoffMin
	failures := 0
	for {
		for range c.servers {
			c.mu.Lock()
			server := c.servers[c.next]
			c.next = (c.next + 1) % len(c.servers)
			hasSession := c.sessionID != 0
			if c.state != StateConnecting {
				c.server = server
				c.setState(StateConnecting)
			}
			c.mu.Unlock()
			left := c.opts.dialTimeout
			if hasSession {
				if left = c.untilExpiry(); left <= 0 {
					return nil, StateExpired, vocab.SessionExpired
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, StateClosed, err
			}
			s, err := c.attach(ctx, server, min(c.opts.dialTimeout, left))
			if err == nil {
				return s, StateConnected, nil
			}
			c.log.Debug("coord: connect failed", "server", server, "err", err)
			switch status.Code(err) {
			case codes.NotFound:
				return nil, StateExpired, vocab.SessionExpired
			case codes.Unauthenticated:
				return nil, StateAuthFailed, vocab.AuthFailed
			}
			if errors.Is(err, vocab.SessionExpired) {
				return nil, StateExpired, err
			}
			failures++
			// The limit is for a new session: a session the servers hold
			// is tried until its timeout passes (a server restarted with
			// kill -9 takes it back), not reported expired while alive.
			if c.opts.maxRetries > 0 && failures >= c.opts.maxRetries && !hasSession {
				c.log.Warn("coord: giving up", "attempts", failures, "err", err)
				return nil, StateClosed, fmt.Errorf("coord: no server took the session after %d attempts: %w", failures, err)
			}
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		if c.sessionIDKnown() {
			sleep = min(sleep, max(c.untilExpiry(), 0))
		}
		t := time.NewTimer(sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, StateClosed, ctx.Err()
		}
		backoff = min(backoff*2, c.opts.backoffMax)
	}
}

func (c *Conn) sessionIDKnown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID != 0
}

// untilExpiry is how long the session can still live without word from a
// server: the negotiated timeout after the last message received.
func (c *Conn) untilExpiry() time.Duration {
	c.mu.Lock()
	timeout := c.timeout
	c.mu.Unlock()
	return time.Until(time.Unix(0, c.lastHeard.Load()).Add(timeout))
}

// attach opens a stream to server and attaches the session to it, within
// timeout.
func (c *Conn) attach(ctx context.Context, server string, timeout time.Duration) (*stream, error) {
	dialOpts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, c.opts.dialOptions...)
	cc, err := grpc.NewClient(server, dialOpts...)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(c.ctx)
	stopCtx := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(timeout, cancel)
	fail := func(err error) (*stream, error) {
		cancel()
		_ = cc.Close()
		return nil, err
	}
	cs, err := api.NewCoordClient(cc).Session(sctx)
	if err != nil {
		return fail(err)
	}
	req := c.connectRequest()
	if err := cs.Send(&api.ClientMessage{Msg: &api.ClientMessage_Connect{Connect: req}}); err != nil {
		_, err = cs.Recv() // the stream's status says why
		return fail(err)
	}
	msg, err := cs.Recv()
	timerStopped, ctxStopped := timer.Stop(), stopCtx()
	if !timerStopped || !ctxStopped {
		return fail(fmt.Errorf("coord: connect to %s: %w", server, context.DeadlineExceeded))
	}
	if err != nil {
		return fail(err)
	}
	resp := msg.GetConnected()
	if resp == nil {
		return fail(fmt.Errorf("%w: expected connected, got %T", errProtocol, msg.GetMsg()))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessionID != 0 && resp.GetSessionId() != c.sessionID {
		// The server made a new session: ours is gone.
		cancel()
		_ = cc.Close()
		return nil, fmt.Errorf("%w: server answered with session %#x", vocab.SessionExpired, resp.GetSessionId())
	}
	if c.endErr != nil {
		cancel()
		_ = cc.Close()
		return nil, c.endErr
	}
	timeout = time.Duration(resp.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = c.opts.sessionTimeout
	}
	c.sessionID = resp.GetSessionId()
	c.password = resp.GetPassword()
	// The server's zxid when it took the session (at least the session's
	// creation): no server behind it may take the session later.
	c.noteZxid(resp.GetZxid())
	c.timeout = timeout
	c.server = server
	c.lastHeard.Store(time.Now().UnixNano())
	s := newStream(c, server, cc, cs, cancel, timeout)
	c.stream = s
	close(c.ready)
	c.setState(StateConnected)
	c.log.Info("coord: connected", "server", server, "session", fmt.Sprintf("%#x", c.sessionID),
		"timeout", timeout, "server_id", resp.GetServerId())
	return s, nil
}

// connectRequest builds the ConnectRequest for the next attach: a new
// session, or the current one with its password, last zxid and watches.
func (c *Conn) connectRequest() *api.ConnectRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := &api.ConnectRequest{
		SessionId: c.sessionID,
		Password:  c.password,
		TimeoutMs: int32(c.opts.sessionTimeout / time.Millisecond),
		LastZxid:  c.lastZxid.Load(),
	}
	if c.sessionID != 0 {
		req.Watches = c.watches.watchSet(req.LastZxid)
	}
	for _, a := range c.auth {
		req.Auth = append(req.Auth, &api.Id{Scheme: a.scheme, Id: string(a.auth)})
	}
	return req
}

// do sends a request on the session and waits for its response. A non-OK
// response code becomes a *vocab.Error for op and path; onResp, if set, sees
// every response before do returns (it registers watches).
func (c *Conn) do(ctx context.Context, op, path string, req *api.Request, onResp func(*api.Response)) (*api.Response, error) {
	cl := &call{req: req, onResp: onResp, done: make(chan callResult, 1)}
	for {
		if err := ctx.Err(); err != nil {
			return nil, ctxErr(op, path, err)
		}
		c.mu.Lock()
		s, ready, endErr := c.stream, c.ready, c.endErr
		c.mu.Unlock()
		if endErr != nil {
			return nil, opErr(endErr, op, path)
		}
		if s == nil {
			select {
			case <-ready:
			case <-ctx.Done():
			}
			continue
		}
		err := s.send(ctx, cl)
		if err == nil {
			break
		}
		if !errors.Is(err, errStreamGone) {
			return nil, ctxErr(op, path, err)
		}
	}
	var r callResult
	select {
	case r = <-cl.done:
	case <-ctx.Done():
		if cl.claim.CompareAndSwap(0, claimAbandoned) {
			return nil, ctxErr(op, path, ctx.Err())
		}
		r = <-cl.done // the response is being handled: as good as here
	}
	if r.err != nil {
		return nil, opErr(r.err, op, path)
	}
	return r.resp, codeErr(r.resp.GetErr(), op, path)
}

// opErr attaches op and path to an error that ended a call.
func opErr(err error, op, path string) error {
	var code vocab.Code
	if errors.As(err, &code) {
		return &vocab.Error{Code: code, Op: op, Path: path}
	}
	if path == "" {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// Close ends the session: it asks the server to close it, which deletes the
// session's ephemerals, and waits for the answer or for ctx. Whatever the
// outcome the Conn is finished afterwards: calls return ErrClosed, watch
// channels and the event channel get a last event and close. Closing an
// expired or closed Conn returns nil.
func (c *Conn) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.endErr != nil || c.closing {
		c.mu.Unlock()
		select { // ended, or another Close is under way
		case <-c.loopDone:
		case <-ctx.Done():
			c.end(StateClosed, ErrClosed)
			<-c.loopDone
		}
		return nil
	}
	c.closing = true
	c.mu.Unlock()
	req := &api.Request{Op: &api.Request_Close{Close: &api.CloseSession{}}}
	_, err := c.do(ctx, "close", "", req, func(r *api.Response) {
		if r.GetErr() == 0 {
			c.mu.Lock()
			c.closeAcked = true
			c.mu.Unlock()
		}
	})
	c.end(StateClosed, ErrClosed)
	<-c.loopDone
	if errors.Is(err, vocab.SessionExpired) {
		return nil
	}
	return err
}
