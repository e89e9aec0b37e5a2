package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"coord/session"
	"coord/zk"
)

// Peer is a server of the cluster as configuration knows it.
type Peer struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	Observer bool
}

// Config configures one coord server. DefaultConfig fills every field a
// single-node server needs; cmd/coord maps flags and the config file onto it.
type Config struct {
	ID       string // unique server id
	DataDir  string // raft log, stable store and snapshots live here
	RaftAddr string // host:port for raft traffic (bind and advertise)
	GRPCAddr string // host:port for the gRPC client, admin and internal services
	// Observer makes this server a raft non-voter: it replicates, serves
	// reads and watches, and never votes.
	Observer bool
	// Peers are the other servers this one knows of at start (gossip adds
	// more). The leader adds a known server that is not yet in the raft
	// configuration: observers as non-voters, voters first as non-voters and
	// then as voters once they have caught up.
	Peers []Peer
	// ZKAddr is host:port for the ZooKeeper wire protocol ("" turns it
	// off); MaxFrameBytes bounds one request frame there (ZooKeeper's
	// jute.maxbuffer); FourLetterWords lists the four-letter words served
	// ("*" for all, ZooKeeper's 4lw.commands.whitelist).
	ZKAddr          string
	MaxFrameBytes   int
	FourLetterWords []string
	// HTTPAddr is host:port for /metrics, /health, /status and /members
	// ("" turns HTTP off).
	HTTPAddr string
	// GossipAddr is host:port for memberlist gossip ("" turns gossip off).
	GossipAddr string
	// GossipJoin lists gossip addresses of members of an existing cluster;
	// the server joins their gossip and the leader adds it to the cluster.
	GossipJoin []string
	// Join lists gRPC addresses of servers of an existing cluster; a server
	// that is not in the raft configuration asks them to add it.
	Join []string
	// Bootstrap makes a server with no raft state start a new cluster whose
	// voters are itself and the voter Peers. Start every initial voter with
	// the same Peers and Bootstrap; a server with state ignores it.
	Bootstrap bool

	// Tick is ZooKeeper's tickTime: sessions expire in tick-sized buckets and
	// timeouts are negotiated into [MinSessionTimeout, MaxSessionTimeout].
	Tick              time.Duration
	MinSessionTimeout time.Duration // default 2 ticks
	MaxSessionTimeout time.Duration // default 20 ticks
	// ContainerCheckInterval is how often the leader looks for empty
	// containers and lapsed TTL nodes (ZooKeeper: 60 s).
	ContainerCheckInterval time.Duration
	// LeaderLossFraction: a server that has had no contact with a leader
	// for this fraction of a session's timeout closes the session's
	// connection, and one that has had none for this fraction of
	// MinSessionTimeout refuses new connections (leaderloss.go), so a
	// client of a server cut off from the quorum is told Disconnected at
	// least (2/3 - LeaderLossFraction) × its timeout before the majority
	// can expire its session. Above 0 and below 2/3; default 1/3.
	LeaderLossFraction float64
	// MaxClientConns bounds the client connections (ZooKeeper protocol
	// connections and gRPC session streams) from one address, as
	// ZooKeeper's maxClientCnxns (default 60; 0 for no limit): one more is
	// closed at once. HandshakeTimeout is how long a new ZooKeeper
	// connection may take to send its connect request (or four-letter
	// word) before it is closed (ZooKeeper: 10 s).
	MaxClientConns   int
	HandshakeTimeout time.Duration
	// MaxOutstanding bounds what a client connection holds on the server:
	// its requests in flight plus the replies and events not yet written
	// to it; MaxQueuedBytes bounds the bytes of those unsent replies and
	// events. Past either the server stops reading the connection's
	// requests until the client reads its replies (ZooKeeper stops reading
	// too); other connections are not affected.
	MaxOutstanding int
	MaxQueuedBytes int
	// MaxRequestBytes bounds one request message.
	MaxRequestBytes int
	// MaxDataBytes is the largest data a create or setData may carry
	// (ZooKeeper's jute.maxbuffer); larger data is refused with
	// BadArguments by the server the client is connected to, before the
	// log, so the setting may differ between servers without their states
	// ever diverging.
	MaxDataBytes int
	// SnapshotThreshold is how many log entries trigger a raft snapshot, and
	// TrailingLogs how many stay in the log after one (so a lagging follower
	// can catch up from the log rather than a snapshot).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// RaftTimeout is raft's heartbeat and election timeout: how long
	// followers wait for a silent leader before electing another, so it
	// bounds failover. CommitTimeout is how soon an idle leader tells
	// followers about a commit. SnapshotInterval is how often raft checks
	// SnapshotThreshold.
	RaftTimeout      time.Duration
	CommitTimeout    time.Duration
	SnapshotInterval time.Duration

	// MinFreeDisk is the free space (bytes) the data directory must keep;
	// below it the server refuses writes with an error rather than run its
	// disk full. DiskCheckInterval is how often it looks.
	MinFreeDisk       uint64
	DiskCheckInterval time.Duration

	Logger *slog.Logger
}

// DefaultMaxDataBytes is ZooKeeper's default jute.maxbuffer: the largest
// znode data a server accepts unless configured otherwise.
const DefaultMaxDataBytes = 1 << 20

// DefaultConfig returns a configuration for a single-node server on
// loopback with its data in ./coord-data.
func DefaultConfig() Config {
	tick := 2 * time.Second
	return Config{
		ID:                     "coord1",
		Bootstrap:              true,
		DataDir:                "coord-data",
		RaftAddr:               "127.0.0.1:2888",
		GRPCAddr:               "127.0.0.1:2182",
		GossipAddr:             "127.0.0.1:7946",
		HTTPAddr:               "127.0.0.1:8080",
		ZKAddr:                 "127.0.0.1:2181",
		MaxFrameBytes:          zk.DefaultMaxFrame,
		FourLetterWords:        []string{"*"},
		Tick:                   tick,
		MinSessionTimeout:      2 * tick,
		MaxSessionTimeout:      20 * tick,
		ContainerCheckInterval: time.Minute,
		LeaderLossFraction:     1.0 / 3,
		MaxClientConns:         60,
		HandshakeTimeout:       10 * time.Second,
		MaxOutstanding:         1000,
		MaxQueuedBytes:         8 << 20,
		MaxRequestBytes:        DefaultMaxDataBytes + 64<<10,
		MaxDataBytes:           DefaultMaxDataBytes,
		SnapshotThreshold:      100_000,
		TrailingLogs:           50_000,
		RaftTimeout:            150 * time.Millisecond,
		CommitTimeout:          2 * time.Millisecond,
		SnapshotInterval:       10 * time.Second,
		MinFreeDisk:            64 << 20,
		DiskCheckInterval:      time.Second,
	}
}

// Validate reports the first field that cannot work, naming it and its bounds.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("server: Config.ID must not be empty")
	case c.DataDir == "":
		return errors.New("server: Config.DataDir must not be empty")
	case c.RaftAddr == "":
		return errors.New("server: Config.RaftAddr must not be empty")
	case c.GRPCAddr == "":
		return errors.New("server: Config.GRPCAddr must not be empty")
	case c.MaxOutstanding < 1:
		return fmt.Errorf("server: Config.MaxOutstanding = %d, want >= 1", c.MaxOutstanding)
	case c.MaxQueuedBytes < 1:
		return fmt.Errorf("server: Config.MaxQueuedBytes = %d, want >= 1", c.MaxQueuedBytes)
	case c.ZKAddr != "" && c.MaxFrameBytes < 1024:
		return fmt.Errorf("server: Config.MaxFrameBytes = %d, want >= 1024", c.MaxFrameBytes)
	case c.MaxRequestBytes < 1024:
		return fmt.Errorf("server: Config.MaxRequestBytes = %d, want >= 1024", c.MaxRequestBytes)
	case c.MaxDataBytes < 0 || c.MaxDataBytes > 1<<30:
		return fmt.Errorf("server: Config.MaxDataBytes = %d, want 0 (the default, %d) to %d", c.MaxDataBytes, DefaultMaxDataBytes, 1<<30)
	case !(c.LeaderLossFraction > 0 && c.LeaderLossFraction < 2.0/3):
		return fmt.Errorf("server: Config.LeaderLossFraction = %v, want above 0 and below 2/3", c.LeaderLossFraction)
	case c.MaxClientConns < 0:
		return fmt.Errorf("server: Config.MaxClientConns = %d, want >= 0 (0: no limit)", c.MaxClientConns)
	case c.HandshakeTimeout <= 0:
		return fmt.Errorf("server: Config.HandshakeTimeout = %v, want > 0", c.HandshakeTimeout)
	case c.ContainerCheckInterval <= 0:
		return fmt.Errorf("server: Config.ContainerCheckInterval = %v, want > 0", c.ContainerCheckInterval)
	case c.DiskCheckInterval <= 0:
		return fmt.Errorf("server: Config.DiskCheckInterval = %v, want > 0", c.DiskCheckInterval)
	case c.RaftTimeout < 10*time.Millisecond:
		return fmt.Errorf("server: Config.RaftTimeout = %v, want >= 10ms", c.RaftTimeout)
	case c.CommitTimeout < time.Millisecond || c.CommitTimeout > c.RaftTimeout:
		return fmt.Errorf("server: Config.CommitTimeout = %v, want >= 1ms (raft's minimum) and <= RaftTimeout (%v)", c.CommitTimeout, c.RaftTimeout)
	case c.SnapshotInterval <= 0:
		return fmt.Errorf("server: Config.SnapshotInterval = %v, want > 0", c.SnapshotInterval)
	}
	if err := c.bounds().Validate(); err != nil {
		return err
	}
	for _, p := range c.Peers {
		if p.ID == "" || p.RaftAddr == "" || p.GRPCAddr == "" {
			return fmt.Errorf("server: Config.Peers entry %+v needs an ID, a RaftAddr and a GRPCAddr", p)
		}
	}
	if c.Bootstrap && c.Observer {
		return errors.New("server: Config.Bootstrap is for voters; an observer joins an existing cluster")
	}
	return nil
}

func (c *Config) bounds() session.Bounds {
	return session.Bounds{Tick: c.Tick, Min: c.MinSessionTimeout, Max: c.MaxSessionTimeout}
}
