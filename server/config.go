package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"coord/server/replica"
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

// PeerNetwork is a network the peer plane can run on instead of TCP
// (Config.PeerNetwork).
type PeerNetwork interface {
	Listen(addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// Stores are the raft stores a server can be handed instead of its own
// (Config.Stores): all three are required.
type Stores = replica.Stores

// Config configures one coord server. DefaultConfig fills every field a
// single-node server needs; cmd/coord maps flags and the config file onto it.
type Config struct {
	ID       string // unique server id
	DataDir  string // raft log, stable store and snapshots live here
	RaftAddr string // host:port of the peer plane: raft and server-to-server gRPC (bind and advertise)
	GRPCAddr string // host:port for the gRPC client and admin services
	// RaftAdvertise is the raft address the other servers reach this one
	// at when it is not RaftAddr (a proxy in between): it is this server's
	// address in the raft configuration. "" means RaftAddr.
	RaftAdvertise string
	// PeerSourceIP, if set, is the local IP this server's connections to the
	// other servers (raft and server-to-server gRPC) are made from, so that
	// a proxy in between can tell the servers apart by source address
	// (jepsen's TCP proxy does). "" lets the kernel choose.
	PeerSourceIP string
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
	// Pprof serves Go's profiler under /debug/pprof/ on HTTPAddr (heap,
	// goroutines, CPU profiles); off, those paths are 404.
	Pprof bool
	// NoConsole turns off the console, the browser UI under /ui/ on
	// HTTPAddr (server/console; docs/console.md).
	NoConsole bool
	// ConsoleIdle ends a console sign-in that made no call for this long
	// (0: 30 minutes); a sign-in ends 12 hours after it began anyway.
	ConsoleIdle time.Duration
	// GossipAddr is host:port for memberlist gossip ("" turns gossip off).
	// GossipKey, 16, 24 or 32 bytes, encrypts gossip (memberlist's
	// SecretKey, AES-GCM); every server needs the same key.
	GossipAddr string
	GossipKey  []byte
	// TLSCert and TLSKey (PEM files) turn TLS on for every port: gRPC
	// (clients, admin, server to server), raft's traffic, HTTP, and the
	// ZooKeeper port, which then serves TLS and plaintext side by side
	// (told apart by the first byte) unless TLSOnly. TLSCA (PEM) verifies
	// the other servers' certificates and, when given, clients'
	// certificates; TLSClientAuth requires clients to present one (mutual
	// TLS). The files are read again when they change. SecureZKAddr is an
	// extra ZooKeeper port that serves TLS only (ZooKeeper's
	// secureClientPort).
	TLSCert, TLSKey, TLSCA string
	TLSClientAuth          bool
	TLSOnly                bool
	SecureZKAddr           string
	// GossipJoin lists gossip addresses of members of an existing cluster;
	// the server joins their gossip and the leader adds it to the cluster.
	GossipJoin []string
	// Join lists peer (raft) addresses of servers of an existing cluster; a
	// server that is not in the raft configuration asks them to add it.
	Join []string
	// Peer authentication (the peer plane: raft, server-to-server gRPC,
	// gossip) is always on. PeerCert, PeerKey and PeerCA (PEM files, re-read
	// when they change) make every peer connection mutual TLS under a CA of
	// the servers' own: only a certificate PeerCA signed is a member, so no
	// client certificate can act as a server. Without them, ClusterKey (or
	// ClusterKeyFile, base64 of at least 16 bytes) is a secret every member
	// holds; it authenticates and encrypts the peer connections (see
	// replica.KeyAuth) and, unless GossipKey is set, keys gossip. With
	// neither, a server uses the key in its data directory (ClusterKeyName),
	// generating one on first start; a server with Peers or Join and no key
	// of its own refuses to start.
	PeerCert, PeerKey, PeerCA string
	ClusterKey                []byte
	ClusterKeyFile            string
	// Bootstrap makes a server with no raft state start a new cluster whose
	// voters are itself and the voter Peers. Start every initial voter with
	// the same Peers and Bootstrap; a server with state ignores it.
	Bootstrap bool
	// Rebuild: this server starts again empty after its raft state was set
	// aside (SetAsideRaftState; coord -rebuild), and asks to join saying
	// so: the leader removes it if it is a voter and adds it back as a
	// non-voter, promoted once it has caught up, so nothing it voted or
	// logged before counts. Not with Bootstrap.
	Rebuild bool
	// Stores, when set, replaces the raft log, stable and snapshot stores
	// the server otherwise keeps under DataDir (raft-boltdb and raft's file
	// snapshot store): tests hand in raft's in-memory stores or stores that
	// inject faults. DataDir still holds members.json.
	Stores *Stores
	// PeerNetwork, when set, carries this server's traffic with the other
	// servers (the peer plane: raft and server-to-server gRPC) instead of
	// TCP: in-process test clusters run every server on one in-memory
	// network (internal/memnet) and cut it to partition them. RaftAddr is
	// then an address on that network (an IP and a port, not bound on the
	// host); the client ports stay TCP.
	PeerNetwork PeerNetwork

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
	// ReadOnlyMode is ZooKeeper's readonlymode.enabled: a server that has
	// not been serving (above) for max(2 s, Tick), as ZooKeeper's grace,
	// still takes clients that accept a read-only server and serves them
	// reads, refusing writes with NotReadOnly (sessions/readonly.go,
	// leaderloss.go). Off by default, as in ZooKeeper.
	ReadOnlyMode bool
	// SuperDigest is ZooKeeper's superDigest
	// (zookeeper.DigestAuthenticationProvider.superDigest): "user:hash",
	// the digest id of a user and password (as `coordctl`, ZooKeeper's
	// DigestAuthenticationProvider or ACL helpers print it). A session that
	// authenticates with that user and password also holds the id super:
	// and passes every ACL check. Empty: no superuser. It is also an admin
	// identity: an Admin gRPC call that sends that user:password (metadata
	// coord-admin-digest, coordctl's --user) may use the methods that
	// reveal data or sessions or change the cluster (admin.go).
	SuperDigest string
	// AdminX509 are the x509 identities (RFC 2253 subjects of verified
	// client certificates, as the x509 ACL scheme names them, for example
	// "CN=ops,O=example") that are admin identities on the Admin gRPC
	// service, as SuperDigest is. With neither, those Admin methods answer
	// only on the peer plane.
	AdminX509 []string
	// DisableReconfig answers ZooKeeper's reconfig with ReconfigDisabled
	// (ZooKeeper's reconfigEnabled=false). With reconfig on (the default),
	// it still needs WRITE on /zookeeper/config, whose ACL lets only the
	// superuser (SuperDigest) change it until the superuser grants more.
	DisableReconfig bool
	// SASLUsers are the users and passwords that may log in with SASL
	// DIGEST-MD5 on the ZooKeeper port (ZooKeeper's JAAS Server section
	// with DigestLoginModule; ReadSASLUsers reads that file). A session
	// that logs in holds the id sasl:<user>. None: SASL is refused.
	SASLUsers map[string]string
	// AuditLog, if set, is a file the server appends its audit log to: a
	// record per write and authentication of its clients (who, what,
	// result), as ZooKeeper's audit.enable.
	AuditLog string
	// MaxClientConns bounds the client connections (ZooKeeper protocol
	// connections and gRPC session streams) from one address, as
	// ZooKeeper's maxClientCnxns (default 60; 0 for no limit): one more is
	// closed at once. HandshakeTimeout is how long a new ZooKeeper
	// connection may take to send its connect request (or four-letter
	// word) before it is closed (ZooKeeper: 10 s).
	MaxClientConns   int
	HandshakeTimeout time.Duration
	// MaxClientTotal bounds all the client connections of the server; 0
	// takes its open-file limit less a reserve for raft, the peer plane
	// and its files (connlimit.go), -1 is no bound. One more is closed at
	// once, and its client tries another server.
	MaxClientTotal int
	// MaxOutstanding bounds what a client connection holds on the server:
	// its requests in flight plus the replies and events not yet written
	// to it; MaxQueuedBytes bounds the bytes of those unsent replies and
	// events. Past either the server stops reading the connection's
	// requests until the client reads its replies (ZooKeeper stops reading
	// too); other connections are not affected.
	MaxOutstanding int
	MaxQueuedBytes int
	// MaxWatchesPerSession bounds the watches one session may hold on
	// this server, each kind (data, child, persistent, recursive) on a
	// path counted once; 0 (the default, as ZooKeeper) for no bound. A
	// read or addWatch that would pass it fails with QuotaExceeded and
	// registers nothing; setWatches on re-attach registers those that fit
	// and answers QuotaExceeded (sessions/limits.go). It is a per-server
	// setting, like ZooKeeper's own limits: it never reaches the log.
	MaxWatchesPerSession int
	// EnforceQuota refuses, with QuotaExceeded, a create or setData that
	// would pass a hard quota limit (zkCli.sh setquota -N or -B), as
	// ZooKeeper's zookeeper.enforceQuota (off by default, as there). The
	// leader's setting decides: it stamps each write with it, so set it
	// alike on every server that may lead.
	EnforceQuota bool
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
	// SnapshotLogBytes takes a snapshot once the log entries applied since
	// the last one hold between half this many bytes and this many, drawn
	// anew for each snapshot so that the servers of a cluster do not write
	// theirs at the same moment, as ZooKeeper draws its snapCount, and at
	// least a quarter of the last snapshot's size, so a tree of large
	// values is not written again for every few megabytes of log (0: by
	// SnapshotThreshold alone). One
	// entry carries a batch of commands, so the entry count alone lets the
	// log grow without bound under load. The log kept after a snapshot is
	// then at most the entries since the previous snapshot (and at most
	// TrailingLogs entries).
	SnapshotLogBytes uint64
	// LogStore is the raft log store under DataDir: "bolt" (raft-boltdb,
	// raft.db) or "wal" (raft-wal, wal/); "" takes the one DataDir holds,
	// else replica.DefaultLogStore. A directory keeps the store it was
	// made with.
	LogStore string
	// RaftTimeout is raft's heartbeat and election timeout: how long
	// followers wait for a silent leader before electing another, so it
	// bounds failover. CommitTimeout is how soon an idle leader's raft
	// tells followers about a commit (they learn sooner from the leader's
	// commit notices; raft's AppendEntries every CommitTimeout is most of
	// an idle cluster's CPU at 2 ms). SnapshotInterval is how often raft
	// checks SnapshotThreshold.
	RaftTimeout      time.Duration
	CommitTimeout    time.Duration
	SnapshotInterval time.Duration
	// FreshFollowers: a write is answered only once every follower and
	// observer that keeps up has its commit notice, and their reads wait
	// for the commits they were told of (-fresh-followers).
	FreshFollowers bool
	// SerialAppend: the leader makes an entry durable in its own log
	// before it replicates it, hashicorp/raft's own order, instead of while
	// it does (-serial-append; replica/overlap.go).
	SerialAppend bool

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
		FourLetterWords:        DefaultFourLetterWords(),
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
		SnapshotLogBytes:       64 << 20,
		RaftTimeout:            150 * time.Millisecond,
		CommitTimeout:          50 * time.Millisecond,
		SnapshotInterval:       10 * time.Second,
		MinFreeDisk:            64 << 20,
		DiskCheckInterval:      time.Second,
	}
}

// maxSessionTimeout is the largest session timeout a ZooKeeper client can
// be given: the wire carries it as an int32 of milliseconds.
const maxSessionTimeout = time.Duration(math.MaxInt32) * time.Millisecond

// fieldError is a Validate error: it names the coord flag that sets the
// field first (what a user of the command line gave) and the field.
func fieldError(flag, field, format string, args ...any) error {
	return fmt.Errorf("server: -%s (Config.%s) "+format, append([]any{flag, field}, args...)...)
}

// Validate reports the first field that cannot work, naming it, the flag
// that sets it and its bounds.
func (c *Config) Validate() error {
	switch {
	case c.ID == "":
		return fieldError("id", "ID", "must not be empty")
	case c.DataDir == "":
		return fieldError("data-dir", "DataDir", "must not be empty")
	case c.RaftAddr == "":
		return fieldError("raft-addr", "RaftAddr", "must not be empty")
	case c.GRPCAddr == "":
		return fieldError("grpc-addr", "GRPCAddr", "must not be empty")
	case c.PeerSourceIP != "" && net.ParseIP(c.PeerSourceIP) == nil:
		return fieldError("peer-source-ip", "PeerSourceIP", "%q is not an IP address", c.PeerSourceIP)
	case c.LogStore != "" && !slices.Contains(replica.LogStoreKinds, c.LogStore):
		return fieldError("log-store", "LogStore", "= %q, want one of %v (or empty)", c.LogStore, replica.LogStoreKinds)
	case c.MaxOutstanding < 1:
		return fieldError("max-outstanding", "MaxOutstanding", "= %d, want >= 1", c.MaxOutstanding)
	case c.MaxQueuedBytes < 1:
		return fieldError("max-queued-bytes", "MaxQueuedBytes", "= %d, want >= 1", c.MaxQueuedBytes)
	case c.ZKAddr != "" && c.MaxFrameBytes < 1024:
		return fmt.Errorf("server: Config.MaxFrameBytes = %d, want >= 1024", c.MaxFrameBytes)
	case c.MaxRequestBytes < 1024:
		return fmt.Errorf("server: Config.MaxRequestBytes = %d, want >= 1024", c.MaxRequestBytes)
	case c.MaxDataBytes < 0 || c.MaxDataBytes > 1<<30:
		return fieldError("max-data-bytes", "MaxDataBytes", "= %d, want 0 (the default, %d) to %d", c.MaxDataBytes, DefaultMaxDataBytes, 1<<30)
	case !(c.LeaderLossFraction > 0 && c.LeaderLossFraction < 2.0/3):
		return fieldError("leader-loss-fraction", "LeaderLossFraction", "= %v, want above 0 and below 2/3", c.LeaderLossFraction)
	case c.MaxWatchesPerSession < 0:
		return fieldError("max-watches-per-session", "MaxWatchesPerSession", "= %d, want >= 0 (0: no limit)", c.MaxWatchesPerSession)
	case c.MaxClientTotal < -1:
		return fieldError("max-client-total", "MaxClientTotal", "= %d, want >= -1 (0: the open-file limit less a reserve, -1: no bound)", c.MaxClientTotal)
	case c.MaxClientConns < 0:
		return fieldError("max-client-conns", "MaxClientConns", "= %d, want >= 0 (0: no limit)", c.MaxClientConns)
	case c.HandshakeTimeout <= 0:
		return fieldError("handshake-timeout", "HandshakeTimeout", "= %v, want > 0", c.HandshakeTimeout)
	case c.ContainerCheckInterval <= 0:
		return fieldError("container-check-interval", "ContainerCheckInterval", "= %v, want > 0", c.ContainerCheckInterval)
	case c.DiskCheckInterval <= 0:
		return fmt.Errorf("server: Config.DiskCheckInterval = %v, want > 0", c.DiskCheckInterval)
	case c.RaftTimeout < 10*time.Millisecond:
		return fieldError("raft-timeout", "RaftTimeout", "= %v, want >= 10ms", c.RaftTimeout)
	case c.CommitTimeout < time.Millisecond || c.CommitTimeout > c.RaftTimeout:
		return fieldError("commit-timeout", "CommitTimeout", "= %v, want >= 1ms (raft's minimum) and <= -raft-timeout (%v)", c.CommitTimeout, c.RaftTimeout)
	case c.SnapshotInterval <= 0:
		return fmt.Errorf("server: Config.SnapshotInterval = %v, want > 0", c.SnapshotInterval)
	case c.Tick <= 0:
		return fieldError("tick", "Tick", "= %v, want > 0", c.Tick)
	}
	for _, t := range []struct {
		flag, field string
		d           time.Duration
	}{{"min-session-timeout", "MinSessionTimeout", c.MinSessionTimeout}, {"max-session-timeout", "MaxSessionTimeout", c.MaxSessionTimeout}} {
		if t.d < time.Millisecond || t.d > maxSessionTimeout || t.d%time.Millisecond != 0 {
			return fieldError(t.flag, t.field, "= %v, want a whole number of milliseconds from 1ms to %v", t.d, maxSessionTimeout)
		}
	}
	if c.MaxSessionTimeout < c.MinSessionTimeout {
		return fieldError("max-session-timeout", "MaxSessionTimeout", "= %v, want >= -min-session-timeout (%v)", c.MaxSessionTimeout, c.MinSessionTimeout)
	}
	// The session package's own check, should it ever ask more.
	if err := c.bounds().Validate(); err != nil {
		return err
	}
	for _, p := range c.Peers {
		if p.ID == "" || p.RaftAddr == "" || p.GRPCAddr == "" {
			return fieldError("peers", "Peers", "entry %+v needs an ID, a RaftAddr and a GRPCAddr", p)
		}
	}
	if c.Bootstrap && c.Observer {
		return fieldError("bootstrap", "Bootstrap", "is for voters; an observer (-observer) joins an existing cluster")
	}
	if d := c.SuperDigest; d != "" {
		if user, hash, ok := strings.Cut(d, ":"); !ok || user == "" || hash == "" {
			return fieldError("super-digest", "SuperDigest", "%q: want user:base64-sha1 (the digest id of the superuser's user:password)", d)
		}
	}
	for _, dn := range c.AdminX509 {
		if strings.TrimSpace(dn) == "" || !strings.Contains(dn, "=") {
			return fieldError("admin-x509", "AdminX509", "entry %q: want a certificate subject in RFC 2253 form, such as CN=ops,O=example", dn)
		}
	}
	if (c.PeerCert != "" || c.PeerKey != "" || c.PeerCA != "") && (c.PeerCert == "" || c.PeerKey == "" || c.PeerCA == "") {
		return errors.New("server: peer certificates need all three of -peer-cert, -peer-key and -peer-ca (Config.PeerCert, PeerKey, PeerCA)")
	}
	if n := len(c.ClusterKey); n != 0 && n < 16 {
		return fmt.Errorf("server: Config.ClusterKey has %d bytes, want at least 16", n)
	}
	if (c.TLSOnly || c.TLSClientAuth || c.SecureZKAddr != "" || c.TLSCA != "") && (c.TLSCert == "" || c.TLSKey == "") {
		return errors.New("server: -tls-only, -tls-client-auth, -secure-zk-addr and -tls-ca need -tls-cert and -tls-key (Config.TLSCert, TLSKey)")
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return fieldError("gossip-key", "GossipKey", "has %d bytes, want 16, 24 or 32", n)
	}
	if st := c.Stores; st != nil && (st.Log == nil || st.Stable == nil || st.Snapshots == nil) {
		return errors.New("server: Config.Stores needs a Log, a Stable and a Snapshots store")
	}
	return nil
}

// raftAdvertise is the raft address the other servers reach this one at.
func (c *Config) raftAdvertise() string {
	if c.RaftAdvertise != "" {
		return c.RaftAdvertise
	}
	return c.RaftAddr
}

func (c *Config) bounds() session.Bounds {
	return session.Bounds{Tick: c.Tick, Min: c.MinSessionTimeout, Max: c.MaxSessionTimeout}
}

// jaasUser matches a DigestLoginModule user entry: user_<name>="<password>".
var jaasUser = regexp.MustCompile(`user_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// ReadSASLUsers reads the users of SASL DIGEST-MD5 logins from a JAAS
// configuration file as ZooKeeper's (its Server section with
// org.apache.zookeeper.server.auth.DigestLoginModule and user_<name>="<password>"
// entries), so a ZooKeeper deployment's file serves coord unchanged.
func ReadSASLUsers(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: SASL users: %w", err)
	}
	users := map[string]string{}
	for _, m := range jaasUser.FindAllStringSubmatch(string(b), -1) {
		users[m[1]] = strings.ReplaceAll(strings.ReplaceAll(m[2], `\"`, `"`), `\\`, `\`)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("server: SASL users: %s has no user_<name>=\"<password>\" entry", path)
	}
	return users, nil
}
