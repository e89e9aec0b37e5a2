package sessions

import (
	"errors"

	"coord/vocab"
	"coord/watch"
)

// The bound on watches per session (Config.MaxWatchesPerSession, the
// -max-watches-per-session flag) has no counterpart in ZooKeeper, so it is
// off by default. A read that would register a watch past it fails with
// QuotaExceeded and registers nothing: the read is not served without its
// watch, since a client that got the data would wait for an event that
// never comes. QuotaExceeded, because it is ZooKeeper's code for "a
// configured limit on what you may use was reached": clients report it as an
// error of the call (Java QuotaExceededException, go-zookeeper "unknown
// error: -125", kazoo ZookeeperError) without retrying it (Curator and
// kazoo retry only connection-level codes), and none of them registers its
// watcher on it (the Java client and go-zookeeper register only on OK, or
// NoNode for exists). BadArguments would blame the request, and Throttled
// tells the client to retry, which cannot help.

// watchRefused counts and logs n watches of op refused by the bound, of
// total the request asked for; the first refusal of a connection is
// logged at warning level, later ones at debug level.
func (c *Conn) watchRefused(op, path string, n, total int) {
	l := c.l
	l.cfg.Metrics.WatchesRefused(op, n)
	c.mu.Lock()
	first := !c.watchLimitLogged
	c.watchLimitLogged = true
	c.mu.Unlock()
	log := l.log.Debug
	if first {
		log = l.log.Warn
	}
	log("watch refused: the session holds -max-watches-per-session watches; answered QuotaExceeded",
		"session", sessionHex(c.id), "op", op, "path", path, "refused", n, "of", total,
		"max_watches_per_session", l.cfg.MaxWatchesPerSession)
}

// watchReply is the reply to a read whose watch registration returned err
// (nil: registered), or nil to answer the read as usual.
func (c *Conn) watchReply(op, path string, err error) *Reply {
	if err == nil {
		return nil
	}
	if errors.Is(err, watch.ErrTooManyWatches) {
		c.watchRefused(op, path, 1, 1)
		return &Reply{Err: vocab.QuotaExceeded, ErrPath: path}
	}
	return &Reply{Err: vocab.BadArguments, ErrPath: path}
}
