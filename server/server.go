package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"coord/api"
	"coord/fsm"
	"coord/session"
	"coord/watch"
)

// Server is one coord server: a raft member (voter or observer) with the
// state machine, the watch registry, the sessions connected to it, and the
// gRPC services.
type Server struct {
	cfg   Config
	log   *slog.Logger
	clock session.Clock

	fsm       *raftFSM
	prop      *proposer
	raft      *raft.Raft
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore
	logs      raft.LogStore // store behind the cache of recent entries
	watches   *watch.Registry
	tracker   *session.Tracker

	gate        *netGate     // all traffic with the other servers (netgate.go)
	clientConns *addrLimiter // client connections per address (connlimit.go)
	grpcLis     net.Listener
	grpc        *grpc.Server
	fwd         *forwarder
	peers       peerConns
	gossip      *gossip // nil when gossip is off
	metrics     *metrics
	zkLis       net.Listener
	zkConns     atomic.Int64 // ZooKeeper protocol connections open
	started     time.Time
	httpLis     net.Listener
	http        *http.Server

	// origin names this boot of this server in the log: its id and a
	// random nonce drawn at start. Every command it proposes carries origin
	// and a sequence number, and only an entry with this origin completes
	// one of its waiting requests, so a restarted server (whose sequence
	// numbers start again at 1) or another server reusing the id is never
	// handed the result of a command it did not send in this boot.
	origin  string
	seq     atomic.Uint64 // proposal sequence numbers of this boot
	connSeq atomic.Uint64 // numbers the client connections of this boot
	diskLow atomic.Bool   // the data directory is below MinFreeDisk
	ledAt   atomic.Int64  // when this server last saw itself lead (unix ns; leaderloss.go)

	mu       sync.Mutex
	conns    map[int64]*conn    // sessions connected here
	touched  map[int64]struct{} // sessions heard from since the last report
	members  map[string]Member  // known servers by id
	zkByConn map[*conn]*zkConn  // ZooKeeper protocol connections by session connection

	memberFile memberFile // members remembered in the data directory (members.go)

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Member is what a server knows of another: its addresses and role.
type Member struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	Observer bool
}

// New starts a server: it opens (or creates) its data directory, starts
// raft, bootstraps a new cluster if told to, and serves gRPC.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxDataBytes == 0 {
		cfg.MaxDataBytes = DefaultMaxDataBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("server", cfg.ID)
	boot, err := bootNonce()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: log, clock: session.SystemClock{}, origin: cfg.ID + "#" + boot, gate: newNetGate(),
		watches: watch.New(),
		conns:   map[int64]*conn{}, touched: map[int64]struct{}{},
		members: map[string]Member{}, closing: make(chan struct{}), zkByConn: map[*conn]*zkConn{}, started: time.Now(),
	}
	tracker, err := session.NewTracker(cfg.Tick, s.clock)
	if err != nil {
		return nil, err
	}
	s.tracker = tracker
	s.fsm = newRaftFSM(s)
	s.prop = newProposer(s)
	s.peers.opts = s.gate.peerDialOptions()
	s.clientConns = newAddrLimiter(cfg.MaxClientConns)
	s.metrics = newMetrics(s)
	for _, p := range cfg.Peers {
		s.members[p.ID] = Member{ID: p.ID, RaftAddr: p.RaftAddr, GRPCAddr: p.GRPCAddr, Observer: p.Observer}
	}
	s.members[cfg.ID] = Member{ID: cfg.ID, RaftAddr: cfg.RaftAddr, GRPCAddr: cfg.GRPCAddr, Observer: cfg.Observer}
	s.loadMembers()

	if err := s.startGRPC(); err != nil {
		return nil, err
	}
	if err := s.startRaft(); err != nil {
		s.grpc.Stop()
		return nil, err
	}
	s.fwd = newForwarder(s)
	// Serve only now: every service needs raft and the forwarder.
	go s.grpc.Serve(s.grpcLis)
	if s.cfg.GossipAddr != "" {
		if err := s.startGossip(); err != nil {
			s.grpc.Stop()
			s.raft.Shutdown()
			s.transport.Close()
			s.store.Close()
			return nil, err
		}
	}
	if s.cfg.ZKAddr != "" {
		if err := s.startZK(); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.cfg.HTTPAddr != "" {
		if err := s.startHTTP(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.checkDisk()
	s.wg.Add(7)
	go s.leaderLossLoop()
	go s.prop.run()
	go s.followCommits()
	go func() { defer s.wg.Done(); s.fsm.runApplier(s.logs, s.closing) }()
	go s.leaderLoop()
	go s.touchLoop()
	go s.diskLoop()
	log.Info("coord server started", "raft", s.RaftAddr(), "grpc", s.GRPCAddr(), "gossip", s.GossipAddr(), "observer", cfg.Observer)
	return s, nil
}

func (s *Server) startRaft() error {
	dir := s.cfg.DataDir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("server: data dir: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.cfg.ID)
	rc.Logger = hclogger(s.log, "raft")
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 1024
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.TrailingLogs = s.cfg.TrailingLogs
	scale := func(d time.Duration) time.Duration { return d * s.cfg.RaftTimeout / time.Second }
	rc.HeartbeatTimeout = scale(rc.HeartbeatTimeout)
	rc.ElectionTimeout = scale(rc.ElectionTimeout)
	// A lease as long as the heartbeat timeout: a leader on a busy machine
	// does not step down over one slow round.
	rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	// Followers learn that an entry committed from the leader's next
	// AppendEntries; with nothing else to send, the leader sends one after
	// CommitTimeout. A follower answers a write only once it has applied
	// it, so this is directly on the latency of every write through a
	// follower (raft's default 50 ms would add 50-100 ms).
	rc.CommitTimeout = s.cfg.CommitTimeout
	// Look for a snapshot to take often, so the log is compacted soon after
	// SnapshotThreshold entries (raft's default looks every 2-4 minutes).
	rc.SnapshotInterval = s.cfg.SnapshotInterval

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db"), BoltOptions: boltOptions()})
	if err != nil {
		return fmt.Errorf("server: opening raft store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogger(s.log, "snapshot"))
	if err != nil {
		store.Close()
		return fmt.Errorf("server: snapshot store: %w", err)
	}
	addr, err := net.ResolveTCPAddr("tcp", s.cfg.RaftAddr)
	if err != nil {
		store.Close()
		return fmt.Errorf("server: RaftAddr: %w", err)
	}
	var advertise net.Addr = addr
	if addr.Port == 0 {
		advertise = nil // the listener's address, once the kernel picked the port
	}
	lis, err := net.Listen("tcp", s.cfg.RaftAddr)
	if err != nil {
		store.Close()
		return fmt.Errorf("server: raft transport: %w", err)
	}
	stream := &gatedStream{Listener: lis, advertise: advertise, gate: s.gate}
	if a, ok := stream.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		lis.Close()
		store.Close()
		return fmt.Errorf("server: RaftAddr %s is not an address the other servers can reach this one at", s.cfg.RaftAddr)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 5, Timeout: 10 * time.Second, Logger: hclogger(s.log, "transport"),
	})
	if s.cfg.Bootstrap {
		has, err := raft.HasExistingState(store, store, snaps)
		if err != nil {
			store.Close()
			trans.Close()
			return err
		}
		servers := []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.ID), Address: trans.LocalAddr()}}
		for _, p := range s.cfg.Peers {
			if !p.Observer && p.ID != s.cfg.ID {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
			}
		}
		if !has {
			if err := raft.BootstrapCluster(rc, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
				store.Close()
				trans.Close()
				return fmt.Errorf("server: bootstrap: %w", err)
			}
		}
	}
	// The leader reads recent entries back to replicate them; a cache of
	// them spares it decoding them from bbolt for every follower.
	logs, err := raft.NewLogCache(4096, store)
	if err != nil {
		store.Close()
		trans.Close()
		return err
	}
	r, err := raft.NewRaft(rc, s.fsm, kickingLogStore{LogStore: logs, fsm: s.fsm}, store, snaps, trans)
	if err != nil {
		store.Close()
		trans.Close()
		return fmt.Errorf("server: starting raft: %w", err)
	}
	s.raft, s.store, s.logs, s.transport = r, store, logs, trans
	return nil
}

// bootNonce returns 16 hex digits from the system's random source: with 64
// random bits, two boots of servers with one id share an origin with
// negligible odds.
func bootNonce() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("server: drawing the boot nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// boltOptions tunes the raft log's bbolt file for a write path that commits
// one small transaction per batch of entries: the freelist is not written
// at each commit (bbolt rebuilds it when it opens the file), which saves a
// page write per commit, and the map is large from the start so it is
// rarely remapped under a running write load.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{
		Timeout:         time.Second,
		NoFreelistSync:  true,
		FreelistType:    bbolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	}
}

func (s *Server) startGRPC() error {
	lis, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("server: gRPC listener: %w", err)
	}
	s.grpcLis = lis
	s.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(s.cfg.MaxRequestBytes), grpc.MaxSendMsgSize(s.cfg.MaxRequestBytes+1<<20),
		grpc.ChainUnaryInterceptor(s.gate.unaryInterceptor), grpc.ChainStreamInterceptor(s.gate.streamInterceptor))
	api.RegisterCoordServer(s.grpc, &coordService{s: s})
	api.RegisterAdminServer(s.grpc, &adminService{s: s})
	api.RegisterInternalServer(s.grpc, &internalService{s: s})
	s.mu.Lock()
	m := s.members[s.cfg.ID]
	m.GRPCAddr = lis.Addr().String()
	s.members[s.cfg.ID] = m
	s.mu.Unlock()
	return nil
}

// ID returns the server's id.
func (s *Server) ID() string { return s.cfg.ID }

// GRPCAddr returns the address the gRPC services listen on.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// RaftAddr returns the raft transport's address.
func (s *Server) RaftAddr() string { return string(s.transport.LocalAddr()) }

// IsLeader reports whether this server leads the cluster now.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// Role is "leader", "follower", "observer" or "candidate".
func (s *Server) Role() string {
	switch s.raft.State() {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	}
	if s.cfg.Observer {
		return "observer"
	}
	return "follower"
}

// View returns the current state of this server's state machine.
func (s *Server) View() *fsm.View { return s.fsm.fsm.View() }

// AppliedIndex is the raft index of the last entry this server applied.
func (s *Server) AppliedIndex() uint64 { return s.fsm.applied.Load() }

var errClosed = errors.New("server: closed")

// Close stops the server: clients are disconnected (their sessions live on
// in the cluster), raft shuts down and the stores are closed.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mu.Lock()
		conns := make([]*conn, 0, len(s.conns))
		for _, c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.shut(nil)
		}
		if s.gossip != nil {
			s.gossip.leave()
		}
		if s.http != nil {
			s.http.Close()
		}
		if s.zkLis != nil {
			s.zkLis.Close()
		}
		s.grpc.Stop()
		s.fwd.close()
		s.peers.close()
		err = s.raft.Shutdown().Error()
		s.fsm.failAll(errClosed)
		s.wg.Wait()
		if cerr := s.transport.Close(); err == nil {
			err = cerr
		}
		if cerr := s.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// afterApply runs inside apply, under the FSM's exclusive lock, after each
// command: it keeps the session tracker in step with the log and delivers
// watch events to the sessions connected here.
func (s *Server) afterApply(cmd *fsm.Command, res fsm.Result, triggers []fsm.Trigger) {
	switch {
	case cmd.Type == fsm.CmdCreateSession && res.Err == nil:
		timeout := time.Duration(cmd.Timeout) * time.Millisecond
		s.tracker.Add(res.SessionID, timeout)
	case cmd.Type == fsm.CmdAttachSession && res.Err == nil:
		// The session moved to another connection: the one here, if any,
		// is stale and goes, as ZooKeeper closes it.
		s.mu.Lock()
		c := s.conns[cmd.Session]
		s.mu.Unlock()
		if c != nil && c.owner != cmd.Owner {
			go c.shut(fmt.Errorf("session 0x%x moved", cmd.Session))
		}
	case cmd.Type == fsm.CmdCloseSession && res.Err == nil:
		s.mu.Lock()
		delete(s.touched, cmd.Session)
		c := s.conns[cmd.Session]
		s.mu.Unlock()
		s.tracker.Remove(cmd.Session)
		s.watches.RemoveSession(cmd.Session)
		if c != nil {
			c.sessionClosed()
		}
	}
	if len(triggers) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range triggers {
		for _, ev := range s.watches.Trigger(t) {
			if c := s.conns[ev.Session]; c != nil {
				c.event(&api.WatchEvent{Type: int32(ev.Type), State: stateSyncConnected, Path: ev.Path, Zxid: ev.Zxid})
			}
		}
	}
}

// afterRestore rebuilds what derives from the state after a snapshot was
// installed, and disconnects local clients so they re-attach and re-register
// their watches against the new state.
func (s *Server) afterRestore() {
	v := s.fsm.fsm.View()
	fresh := map[int64]time.Duration{}
	for _, info := range v.Sessions() {
		fresh[info.ID] = time.Duration(info.Timeout) * time.Millisecond
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, id := range s.tracker.IDs() {
		if _, ok := fresh[id]; !ok {
			s.tracker.Remove(id)
		}
	}
	for id, t := range fresh {
		s.tracker.Add(id, t)
	}
	s.tracker.ResetAll(s.clock.Now())
	for _, c := range conns {
		go c.shut(errors.New("server state replaced by a snapshot"))
	}
}
