package reconfig

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"coord/fsm"
	"coord/server/replica"
)

// Config is what a Keeper knows of its server from the start.
type Config struct {
	ID              string        // this server's id
	Observer        bool          // configured as an observer (the conf word's peerType until raft's configuration says)
	DisableReconfig bool          // reconfig answers ReconfigDisabled (server.Config.DisableReconfig)
	RaftTimeout     time.Duration // a server asked for its id has twice this to answer
	GRPCAddr        string        // this server's gRPC address: its electionPort
	Logger          *slog.Logger
}

// Replica is what a Keeper needs of the raft member, in coord's types:
// *replica.Replica implements it. Membership changes go through the
// leader's Admin service (reached by Leader and PeerConn), not through
// this interface.
type Replica interface {
	Addr() string // this server's raft address
	// Settled: this server leads and has applied every entry logged
	// before it began to (its /zookeeper/config is the cluster's latest).
	Settled() bool
	Configuration() ([]replica.Member, error) // raft's configuration
	View() *fsm.View                          // the state machine now
	// Leader waits up to ctx for a leader and names it; PeerConn is the
	// peer plane's connection to a server; LeaderWait how long a write
	// waits for a leader.
	Leader(ctx context.Context) (id, addr string, err error)
	PeerConn(addr string) (*grpc.ClientConn, error)
	LeaderWait() time.Duration
	// SyncIndex is the leader's commit index; WaitApplied waits until this
	// server applied index; Propose hands a write to the log and waits
	// until it applied here.
	SyncIndex(ctx context.Context) (uint64, error)
	WaitApplied(ctx context.Context, index uint64) error
	Propose(ctx context.Context, cmd *fsm.Command) (replica.Result, error)
}

// Server is what a Keeper needs of the server around it: its table of
// known servers, and its audit log. Package server implements it with a
// small adapter.
type Server interface {
	// Members is a copy of the known servers by id (configuration,
	// gossip, join, discovery), this one among them.
	Members() map[string]Member
	// Learn records a server's addresses (a server a reconfig adds).
	Learn(Member)
	// Discover asks the other servers for the addresses they know.
	Discover(ctx context.Context)
	// Audit records a write the server made itself (user "": the server)
	// in the audit log.
	Audit(user string, cmd *fsm.Command, res fsm.Result, err error)
}

// Member is what a server knows of another: its addresses and role
// (server.Member, field for field).
type Member struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	ZKAddr   string `json:",omitempty"` // its ZooKeeper client port ("" unknown)
	Observer bool
}

// Keeper carries out reconfig requests (Reconfig), keeps /zookeeper/config
// in step with raft's configuration on the leader (Reconcile) and renders
// the quorum part of the conf word (Quorum).
type Keeper struct {
	cfg Config
	log *slog.Logger
	rep Replica
	srv Server

	mu           sync.Mutex  // one reconfig at a time (reconfig.go)
	busy         atomic.Bool // a Reconcile runs (zkconfig.go)
	lastDiscover time.Time   // Reconcile's last Discover, under busy

	rolesMu sync.Mutex
	roles   map[string]roleSet // raft address → a role an operator set here (SetRole)
}

// roleSet is a role an operator gave a server on this server (the leader)
// while /zookeeper/config had version at.
type roleSet struct {
	observer bool
	at       int64
}

// New returns the Keeper of a server.
func New(cfg Config, rep Replica, srv Server) *Keeper {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Keeper{cfg: cfg, log: log, rep: rep, srv: srv}
}

// leaderConn returns the peer plane's connection to the leader, waiting up
// to ctx for a leader to be known.
func (k *Keeper) leaderConn(ctx context.Context) (*grpc.ClientConn, error) {
	_, addr, err := k.rep.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return k.rep.PeerConn(addr)
}
