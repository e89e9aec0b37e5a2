// Package client is coord's Go client: a ZooKeeper-style session over the
// gRPC Session stream of package api, shaped like go-zookeeper's Conn but
// with a context on every call and package vocab's error codes and types
// (Stat, ACL, CreateMode, EventType; compare errors against vocab.NoNode and
// the other codes).
//
//	c, events, err := client.Connect(ctx, []string{"10.0.0.1:2182", "10.0.0.2:2182"}, // gRPC (-grpc-addr)
//		client.WithSessionTimeout(10*time.Second), client.WithLogger(logger))
//	if err != nil {
//		return err
//	}
//	defer c.Close(context.Background())
//	go func() {
//		for ev := range events { // Connecting, Connected, Disconnected, ..., Expired
//			logger.Info("session", "state", ev.State)
//		}
//	}()
//	if _, err := c.Create(ctx, "/app", []byte("v1"), vocab.ModePersistent, vocab.OpenACLUnsafe); errors.Is(err, vocab.NodeExists) {
//		// someone else made it
//	}
//	data, stat, changed, err := c.GetW(ctx, "/app")
//	...
//	ev := <-changed // one event: NodeDataChanged or NodeDeleted
//
// # What a Conn owns
//
// One session and, at any time, at most one stream to one server. Calls from
// any number of goroutines are pipelined on that stream: each takes the next
// xid while holding the stream's send lock, so requests are written in xid
// order, and the server answers in request order, so responses are matched
// to the oldest outstanding call (a response that does not match is a
// protocol violation and drops the stream). Requests of one session take
// effect in the order they were written; a goroutine's calls are therefore
// applied in its program order. The session's last zxid (the largest
// Response.zxid seen) only grows and is carried to every server it moves to.
//
// # Watches
//
// GetW, ExistsW and ChildrenW return a one-shot channel that receives
// exactly one event and closes. AddWatch returns a persistent channel that
// stays until RemoveWatches or the end of the session. The server keeps one
// watch per session, path and kind and sends one event per change; the
// client fans it out to every channel registered for it. A watch is
// registered when its response arrives, on the goroutine that reads the
// stream, so it never misses an event that follows its response, and the
// server sends an event before any response that shows its change, so a
// watch channel already holds its event when a call that reads the change
// returns. A call abandoned through its context leaves no watch behind.
//
// # Failover and expiry
//
// When the stream breaks (or the server is silent for two thirds of the
// session timeout) the Conn reports Disconnected, fails the calls in flight
// with vocab.ConnectionLoss, and tries the next server with the session id,
// password, last zxid, identities, and every outstanding watch (relative to
// the last zxid, so the server fires at once those whose node changed in
// between). Calls made meanwhile wait for the new stream or their context.
// The session ends, for good, when a server says it expired (an Expired
// event, or codes.NotFound on re-attach), when no server takes it within
// the session timeout, on codes.Unauthenticated (AuthFailed), or on Close:
// watch channels get EventNotWatching and close, the event channel gets the
// final state and closes, and calls fail with vocab.SessionExpired,
// vocab.AuthFailed or ErrClosed. The client does not start a new session on
// its own: connect again.
//
// # Errors
//
// A non-OK response is a *vocab.Error with the code, the operation and the
// path, so errors.Is(err, vocab.NoNode) and errors.As(err, &fe) work. A call
// whose context ends returns an error wrapping ctx.Err().
//
// The client pings when the stream has been idle for a little under a
// third of the negotiated timeout.
package client
