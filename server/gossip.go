package server

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"strconv"
	"time"

	"coord/server/internal/logbridge"

	"github.com/hashicorp/memberlist"
)

// gossip runs hashicorp/memberlist: every server advertises its id, role and
// addresses and learns the others' (Members asks the servers themselves
// whether they are alive: see adminService.Members). A server that is
// not in the raft configuration asks the servers it learned of to add it
// (join; the leader adds it in reconcileMembers), so joining a cluster takes
// only the gossip address of one member.
type gossip struct {
	s  *Server
	ml *memberlist.Memberlist
}

// gossipMeta is what each server advertises (memberlist node metadata).
type gossipMeta struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft"`
	GRPCAddr string `json:"grpc"`
	ZKAddr   string `json:"zk,omitempty"`
	Observer bool   `json:"observer,omitempty"`
}

func (s *Server) startGossip() error {
	host, portStr, err := net.SplitHostPort(s.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("server: GossipAddr: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("server: GossipAddr port: %w", err)
	}
	g := &gossip{s: s}
	mc := memberlist.DefaultLANConfig()
	if s.cfg.RaftTimeout < time.Second {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = s.cfg.ID
	if len(s.cfg.GossipKey) > 0 {
		mc.SecretKey = s.cfg.GossipKey
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", 0
	mc.Delegate = g
	mc.Events = g
	mc.Logger = log.New(logbridge.Writer(s.log.With("component", "gossip")), "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("server: starting gossip: %w", err)
	}
	g.ml = ml
	s.gossip = g
	if len(s.cfg.GossipJoin) > 0 {
		s.wg.Add(1)
		go g.joinLoop()
	}
	return nil
}

// GossipAddr returns the address memberlist listens on ("" without gossip).
func (s *Server) GossipAddr() string {
	if s.gossip == nil {
		return ""
	}
	n := s.gossip.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// joinLoop contacts the configured gossip addresses until one answers.
func (g *gossip) joinLoop() {
	defer g.s.wg.Done()
	for {
		n, err := g.ml.Join(g.s.cfg.GossipJoin)
		if err == nil && n > 0 {
			g.s.log.Info("joined gossip", "contacted", n)
			return
		}
		g.s.log.Debug("gossip join", "err", err)
		select {
		case <-g.s.closing:
			return
		case <-time.After(g.s.cfg.RaftTimeout):
		}
	}
}

func (g *gossip) leave() {
	g.ml.Leave(time.Second)
	g.ml.Shutdown()
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	s := g.s
	s.mu.Lock()
	zkAddr := s.members[s.cfg.ID].ZKAddr
	s.mu.Unlock()
	b, _ := json.Marshal(gossipMeta{ID: s.cfg.ID, RaftAddr: s.RaftAddr(), GRPCAddr: s.GRPCAddr(), ZKAddr: zkAddr, Observer: s.cfg.Observer})
	if len(b) > limit {
		return nil
	}
	return b
}

func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) { g.update(n, true) }

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.update(n, true) }

// NotifyLeave implements memberlist.EventDelegate.
func (g *gossip) NotifyLeave(n *memberlist.Node) { g.update(n, false) }

func (g *gossip) update(n *memberlist.Node, alive bool) {
	var m gossipMeta
	if err := json.Unmarshal(n.Meta, &m); err != nil || m.ID == "" {
		return
	}
	if alive && m.ID != g.s.cfg.ID {
		g.s.learn(Member{ID: m.ID, RaftAddr: m.RaftAddr, GRPCAddr: m.GRPCAddr, ZKAddr: m.ZKAddr, Observer: m.Observer})
	}
}
