package server

import (
	"context"

	"coord/fsm"
	"coord/server/reconfig"
	"coord/server/sessions"
	"coord/vocab"
)

// ZooKeeper's dynamic reconfiguration (the reconfig request, the leader's
// upkeep of /zookeeper/config, the conf word's quorum) is package
// server/reconfig. This file is the server it sees (reconfig.Server).

// reconfig is the session layer's reconfig hook (sessions.Config.Reconfig).
func (s *Server) reconfig(ctx context.Context, ids []vocab.Id, a *sessions.ReconfigArgs) *sessions.Reply {
	return s.reconf.Reconfig(ctx, ids, a)
}

// reconfigServer is the server as package reconfig sees it.
type reconfigServer struct{ s *Server }

func (r reconfigServer) Members() map[string]reconfig.Member {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	out := make(map[string]reconfig.Member, len(r.s.members))
	for id, m := range r.s.members {
		out[id] = reconfig.Member(m)
	}
	return out
}

func (r reconfigServer) Learn(m reconfig.Member)      { r.s.learn(Member(m)) }
func (r reconfigServer) Discover(ctx context.Context) { r.s.discover(ctx) }

func (r reconfigServer) Audit(user string, cmd *fsm.Command, res fsm.Result, err error) {
	r.s.sess.AuditServerWrite(user, cmd, res, err)
}
