package server

import (
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"coord/api"
	"coord/fsm"
	"coord/server/console"
	"coord/server/reconfig"
	"coord/server/replica"
	"coord/server/sessions"
	"coord/server/zkfront"
	"coord/session"
)

// Server is one coord server: a raft member (voter or observer) with the
// state machine, the watch registry, the sessions connected to it, and the
// gRPC services.
type Server struct {
	cfg   Config
	log   *slog.Logger
	clock session.Clock

	rep  *replica.Replica // the raft member: log, proposer, forwarder, apply
	sess *sessions.Layer  // the sessions connected here and their request path

	// touchDelayForTest, set by a test, holds this server's answers to
	// followers' touch reports that long (a leader slow to answer).
	touchDelayForTest atomic.Pointer[time.Duration]

	// removed: this server was in the raft configuration and is no longer
	// (an operator removed it); Members then refuses to answer as a member.
	removed atomic.Bool
	// joinRefused: the leader refused this server's Join because an
	// operator removed it; the duties loop takes it as its removal.
	joinRefused atomic.Bool
	// rebuildAsked: a Join with rebuild set was answered (Config.Rebuild).
	rebuildAsked atomic.Bool
	// minFreeDisk is Config.MinFreeDisk, which tests change while the
	// disk check runs (disk.go).
	minFreeDisk atomic.Uint64

	gate        *netGate          // all traffic with the other servers (netgate.go)
	tls         *tlsFiles         // nil without TLS (tls.go)
	auditFile   *os.File          // the audit log, if any
	clientConns *addrLimiter      // client connections per address, both front ends (connlimit.go)
	zk          *zkfront.Frontend // the ZooKeeper port (nil when off; zk.go)
	grpcLis     net.Listener
	grpc        *grpc.Server
	gossip      *gossip // nil when gossip is off
	metrics     *metrics
	samples     *sampler // this server's recent metrics (samples.go)
	started     time.Time
	httpLis     net.Listener
	http        *http.Server
	console     *console.Console // the browser console under /ui/ (nil: off)

	ledAt atomic.Int64 // when this server last saw itself lead (unix ns; leaderloss.go)
	// membersDiscovered is when Members last asked the others for the
	// addresses of a member it lacked (unix ns; admin.go).
	membersDiscovered atomic.Int64

	reconf *reconfig.Keeper // ZooKeeper's reconfig and /zookeeper/config (reconfig.go)

	mu      sync.Mutex        // guards members and removedAt (the ZooKeeper front end locks its connections itself)
	members map[string]Member // known servers by id
	// removedAt is, for each server an operator removed while this server
	// led, the index of the configuration entry that removed it; its Joins
	// are refused (refuseRemoved) until an operator adds it back.
	removedAt map[string]uint64

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
	ZKAddr   string `json:",omitempty"` // its ZooKeeper client port ("" unknown)
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
	s := &Server{
		cfg: cfg, log: log, clock: session.SystemClock{}, gate: newNetGate(cfg.PeerSourceIP, cfg.PeerNetwork),
		members: map[string]Member{}, removedAt: map[string]uint64{}, closing: make(chan struct{}), started: time.Now(),
	}
	if cfg.TLSCert != "" {
		tf, err := newTLSFiles(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA, cfg.TLSClientAuth)
		if err != nil {
			return nil, err
		}
		s.tls = tf
	}
	total := cfg.MaxClientTotal
	switch total {
	case 0:
		total = clientConnsTotal()
	case -1:
		total = 0
	}
	s.clientConns = newAddrLimiter(cfg.MaxClientConns, total)
	s.metrics = newMetrics(s)
	s.samples = newServerSampler(s)
	var audit *slog.Logger
	if cfg.AuditLog != "" {
		f, err := os.OpenFile(cfg.AuditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("server: audit log: %w", err)
		}
		s.auditFile = f
		audit = slog.New(slog.NewTextHandler(f, nil)).With("server", cfg.ID)
	}
	sess, err := sessions.New(sessions.Config{
		ServerID: cfg.ID, Bounds: cfg.bounds(), MaxDataBytes: cfg.MaxDataBytes, MaxWatchesPerSession: cfg.MaxWatchesPerSession, SuperDigest: cfg.SuperDigest, SASLUsers: cfg.SASLUsers, Audit: audit,
		MaxOutstanding: cfg.MaxOutstanding, MaxQueuedBytes: cfg.MaxQueuedBytes,
		Clock: s.clock, Logger: log, Metrics: s.metrics, WaitServing: s.waitServing, ReadOnly: s.ReadOnly, Reconfig: s.reconfig,
	}, cfg.Tick)
	if err != nil {
		return nil, err
	}
	s.sess = sess
	_, statErr := os.Stat(cfg.DataDir)
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	// A data directory made just now is an entry of its parent: durable
	// once the parent is synced. A parent this server may not read (it
	// can still create in it) is only warned about.
	if errors.Is(statErr, os.ErrNotExist) {
		if err := replica.SyncDir(filepath.Dir(filepath.Clean(cfg.DataDir))); err != nil {
			log.Warn("the new data directory's name may not survive a power loss", "err", err)
		}
	}
	peerAuth, err := s.peerAuth()
	if err != nil {
		return nil, err
	}
	for _, p := range cfg.Peers {
		s.members[p.ID] = Member{ID: p.ID, RaftAddr: p.RaftAddr, GRPCAddr: p.GRPCAddr, Observer: p.Observer}
	}
	s.members[cfg.ID] = Member{ID: cfg.ID, RaftAddr: cfg.raftAdvertise(), GRPCAddr: cfg.GRPCAddr, Observer: cfg.Observer}
	s.loadMembers()

	if err := s.startGRPC(); err != nil {
		return nil, err
	}
	if err := s.startReplica(peerAuth); err != nil {
		s.grpc.Stop()
		return nil, err
	}
	// Serve only now: every service needs the replica.
	go s.grpc.Serve(s.grpcLis)
	s.rep.Start()
	if s.cfg.GossipAddr != "" {
		if err := s.startGossip(); err != nil {
			s.grpc.Stop()
			s.rep.Close()
			return nil, err
		}
	}
	if s.cfg.ZKAddr != "" {
		if err := s.startZK(); err != nil {
			s.Close()
			return nil, err
		}
		s.mu.Lock()
		m := s.members[s.cfg.ID]
		m.ZKAddr = s.ZKAddr()
		s.members[s.cfg.ID] = m
		s.mu.Unlock()
		if s.gossip != nil {
			s.gossip.ml.UpdateNode(time.Second) // advertise the client port
		}
	}
	if s.cfg.HTTPAddr != "" {
		if err := s.startHTTP(); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.checkDisk()
	s.wg.Add(5)
	go s.leaderLossLoop()
	go s.leaderLoop()
	go s.touchLoop()
	s.minFreeDisk.Store(s.cfg.MinFreeDisk)
	go s.diskLoop()
	go s.sampleLoop()
	s.logStarted()
	return s, nil
}

// logStarted logs the one line that says where this server listens and
// how each plane is secured: "off" for a listener that is not on; TLS on
// the client plane (ZooKeeper port, gRPC sessions) and the admin plane
// (Admin gRPC, HTTP) with -tls-cert, and the peer plane always (a cluster
// key or peer certificates).
func (s *Server) logStarted() {
	orOff := func(addr string) string {
		if addr == "" {
			return "off"
		}
		return addr
	}
	clientTLS, adminTLS := "off", "off"
	if s.tls != nil {
		clientTLS, adminTLS = "on", "on"
		if s.cfg.TLSOnly {
			clientTLS = "only"
		}
		if s.cfg.TLSClientAuth {
			clientTLS += ", client certificates required"
		}
	}
	peerTLS := "on, cluster key"
	if s.cfg.PeerCert != "" {
		peerTLS = "on, peer certificates"
	}
	attrs := []any{"raft", s.RaftAddr(), "grpc", s.GRPCAddr(), "zk", orOff(s.ZKAddr())}
	if a := s.SecureZKAddr(); a != "" {
		attrs = append(attrs, "secure_zk", a)
	}
	attrs = append(attrs, "http", orOff(s.HTTPAddr()), "gossip", orOff(s.GossipAddr()), "observer", s.cfg.Observer,
		"tls_client", clientTLS, "tls_admin", adminTLS, "tls_peer", peerTLS)
	s.log.Info("coord server started", attrs...)
}

// startReplica opens the peer plane's listener (through the gate) and
// starts the replica on it.
func (s *Server) startReplica(auth replica.PeerAuth) error {
	addr, err := net.ResolveTCPAddr("tcp", s.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("server: RaftAddr: %w", err)
	}
	var advertise net.Addr = addr
	if addr.Port == 0 {
		advertise = nil // the listener's address, once the kernel picked the port
	}
	if s.cfg.RaftAdvertise != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", s.cfg.RaftAdvertise); err != nil {
			return fmt.Errorf("server: RaftAdvertise: %w", err)
		}
	}
	lis, err := s.gate.listen(s.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("server: raft transport: %w", err)
	}
	if advertise == nil {
		advertise = lis.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		lis.Close()
		return fmt.Errorf("server: RaftAddr %s is not an address the other servers can reach this one at", s.cfg.RaftAddr)
	}
	var voters []replica.Member
	for _, p := range s.cfg.Peers {
		if !p.Observer {
			voters = append(voters, replica.Member{ID: p.ID, Addr: p.RaftAddr, Voter: true})
		}
	}
	rc := replica.Config{
		ID: s.cfg.ID, DataDir: s.cfg.DataDir, Observer: s.cfg.Observer,
		Bootstrap: s.cfg.Bootstrap, BootstrapPeers: voters,
		RaftTimeout: s.cfg.RaftTimeout, CommitTimeout: s.cfg.CommitTimeout, FreshFollowers: s.cfg.FreshFollowers,
		SerialAppend:      s.cfg.SerialAppend,
		SnapshotThreshold: s.cfg.SnapshotThreshold, TrailingLogs: s.cfg.TrailingLogs, SnapshotInterval: s.cfg.SnapshotInterval,
		SnapshotLogBytes: s.cfg.SnapshotLogBytes, LogStoreKind: s.cfg.LogStore,
		EnforceQuota: s.cfg.EnforceQuota,
		PeerListener: &gatedListener{Listener: lis, gate: s.gate}, PeerDial: s.gate.dial, PeerAuth: auth, Advertise: advertise,
		MaxMsgBytes: s.cfg.MaxRequestBytes + 1<<20, Services: peerServices{s}, RegisterPeer: func(g *grpc.Server) {
			api.RegisterAdminServer(g, &adminService{s: s, peer: true})
		},
		Watcher: s.sess, Clock: s.clock, Logger: s.log,
		Stages: s.metrics,
	}
	if st := s.cfg.Stores; st != nil {
		rc.LogStore, rc.StableStore, rc.Snapshots = st.Log, st.Stable, st.Snapshots
	}
	rep, err := replica.New(rc)
	if err != nil {
		lis.Close()
		return err
	}
	s.rep = rep
	s.sess.Attach(rep)
	s.reconf = reconfig.New(reconfig.Config{ID: s.cfg.ID, Observer: s.cfg.Observer, DisableReconfig: s.cfg.DisableReconfig,
		RaftTimeout: s.cfg.RaftTimeout, GRPCAddr: s.GRPCAddr(), Logger: s.log}, rep, reconfigServer{s})
	return nil
}

func (s *Server) startGRPC() error {
	lis, err := net.Listen("tcp", s.cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("server: gRPC listener: %w", err)
	}
	s.grpcLis = lis
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(s.cfg.MaxRequestBytes), grpc.MaxSendMsgSize(s.cfg.MaxRequestBytes + 1<<20)}
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls.serverConfig())))
	}
	s.grpc = grpc.NewServer(opts...)
	api.RegisterCoordServer(s.grpc, &coordService{s: s})
	// The client plane: sessions and the admin service (which asks who is
	// calling). The server-to-server services are on the peer plane only.
	api.RegisterAdminServer(s.grpc, &adminService{s: s})
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
func (s *Server) RaftAddr() string { return s.rep.Addr() }

// IsLeader reports whether this server leads the cluster now.
func (s *Server) IsLeader() bool { return s.rep.IsLeader() }

// Role is "leader", "follower", "observer" or "candidate".
func (s *Server) Role() string {
	switch s.rep.Role() {
	case replica.Leader:
		return "leader"
	case replica.Candidate:
		return "candidate"
	}
	if s.cfg.Observer {
		return "observer"
	}
	return "follower"
}

// View returns the current state of this server's state machine.
func (s *Server) View() *fsm.View { return s.rep.View() }

// AppliedIndex is the raft index of the last entry this server applied.
func (s *Server) AppliedIndex() uint64 { return s.rep.Applied() }

// Changed returns a channel closed at this server's next change as others
// see it: raft's role or leader changes, an entry applies (a membership
// change too), or the server closes. Take the channel, check, then wait.
func (s *Server) Changed() <-chan struct{} { return s.rep.Changed() }

// Closed reports whether Close was called.
func (s *Server) Closed() bool { return s.isClosed() }

func (s *Server) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// RaftConfiguration is the latest raft configuration this server knows:
// the ids of its voters and of its non-voters (observers, and voters
// still catching up).
func (s *Server) RaftConfiguration() (voters, nonVoters []string, err error) {
	members, err := s.rep.Configuration()
	for _, m := range members {
		if m.Voter {
			voters = append(voters, m.ID)
		} else {
			nonVoters = append(nonVoters, m.ID)
		}
	}
	return voters, nonVoters, err
}

var errClosed = replica.ErrClosed

// Close stops the server: clients are disconnected (their sessions live on
// in the cluster), raft shuts down and the stores are closed.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		for _, c := range s.sess.Conns() {
			c.Shut(nil)
		}
		if s.gossip != nil {
			s.gossip.leave()
		}
		if s.console != nil {
			s.console.Close()
		}
		if s.http != nil {
			s.http.Close()
		}
		if s.zk != nil {
			s.zk.Close()
		}
		s.grpc.Stop()
		err = s.rep.Close()
		s.wg.Wait()
		s.sess.Close()
		if s.auditFile != nil {
			s.auditFile.Close()
		}
	})
	return err
}
