// Command coord runs a coord server.
//
// With no flags it runs a single-node cluster on loopback with its data in
// ./coord-data: `go run ./cmd/coord`. `coord local` runs a 3-voter +
// 1-observer cluster of real processes on loopback. `coord health` asks a
// server's /health (for container health checks). `coord keygen` writes a
// cluster key, `coord digest user:password` a -super-digest value. See
// docs/running.md.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"coord/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "local" {
		os.Exit(runLocal(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "health" {
		os.Exit(runHealth(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "keygen" {
		os.Exit(runKeygen(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "digest" {
		os.Exit(runDigest(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "version" {
		os.Exit(runVersion())
	}
	os.Exit(run(os.Args[1:]))
}

// fileConfig is the optional JSON config file; flags given on the command
// line override it.
type fileConfig struct {
	ID                string   `json:"id"`
	DataDir           string   `json:"data_dir"`
	RaftAddr          string   `json:"raft_addr"`
	GRPCAddr          string   `json:"grpc_addr"`
	GossipAddr        string   `json:"gossip_addr"`
	HTTPAddr          string   `json:"http_addr"`
	ZKAddr            string   `json:"zk_addr"`
	FourLetterWords   string   `json:"4lw_whitelist"`
	Observer          bool     `json:"observer"`
	Bootstrap         *bool    `json:"bootstrap"`
	Peers             []string `json:"peers"` // id=raftAddr,grpcAddr[,observer]
	Join              []string `json:"join"`
	Tick              string   `json:"tick"`
	MinSessionTimeout string   `json:"min_session_timeout"`
	MaxSessionTimeout string   `json:"max_session_timeout"`
	LogLevel          string   `json:"log_level"`
}

// defaultGCPercent trades memory for CPU: a server's live heap is its znode
// tree, which the collector would otherwise rescan every time the heap
// doubles; at 400 a 3-node write load spends about a sixth less CPU
// (docs/benchmarks.md) for a heap up to five times the live data.
const defaultGCPercent = 400

func run(args []string) int {
	fs := flag.NewFlagSet("coord", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: coord [flags]          run a server (alone, with no flags: data in ./coord-data)
       coord local [flags]    run a loopback cluster of real processes (coord local -help)
       coord health [flags]   ask a server's /health, for container health checks
       coord keygen [-o FILE] write a new cluster key
       coord digest USER:PASSWORD  print a -super-digest value
       coord version          print the version

Flags of a server:
`)
		fs.PrintDefaults()
	}
	cfg := server.DefaultConfig()
	configFile := fs.String("config", "", "JSON config file (flags override it)")
	id := fs.String("id", cfg.ID, "server id, unique in the cluster")
	dataDir := fs.String("data-dir", cfg.DataDir, "directory for the raft log, stable store and snapshots")
	raftAddr := fs.String("raft-addr", cfg.RaftAddr, "host:port for raft traffic")
	grpcAddr := fs.String("grpc-addr", cfg.GRPCAddr, "host:port for the gRPC client, admin and internal services")
	raftAdvertise := fs.String("raft-advertise", "", `raft address the other servers reach this one at, if not -raft-addr (a proxy in between)`)
	peerSource := fs.String("peer-source-ip", "", `local IP of this server's connections to the other servers ("": the kernel chooses)`)
	gossipAddr := fs.String("gossip-addr", cfg.GossipAddr, `host:port for memberlist gossip ("" turns it off)`)
	zkAddr := fs.String("zk-addr", cfg.ZKAddr, `host:port for the ZooKeeper wire protocol ("" turns it off)`)
	fourLW := fs.String("4lw-whitelist", strings.Join(cfg.FourLetterWords, ","), `four-letter words served on the ZooKeeper port, comma separated ("*" for all), as ZooKeeper's 4lw.commands.whitelist: srvr is always served, and isro with -read-only-mode; the others answer "<word> is not executed because it is not in the whitelist." (cons, dump, wchc, wchp, envi, stat, mntr, ... show sessions, client addresses, paths or the host to anyone who reaches the port)`)
	httpAddr := fs.String("http-addr", cfg.HTTPAddr, `host:port for /metrics, /health, /status, /members ("" turns it off)`)
	pprofOn := fs.Bool("pprof", false, "serve Go's profiler under /debug/pprof/ on -http-addr (heap, goroutines, CPU profiles, to anyone who reaches that port); without it those paths are 404")
	observer := fs.Bool("observer", false, "run as an observer (raft non-voter)")
	bootstrap := fs.Bool("bootstrap", true, "start a new cluster if this server has no state (voters only)")
	peers := fs.String("peers", "", "known servers: id=raftAddr,grpcAddr[,observer];...")
	join := fs.String("join", "", "gossip addresses of servers of an existing cluster to join, comma separated")
	tick := fs.Duration("tick", cfg.Tick, "ZooKeeper tickTime: session timeout granularity")
	minTimeout := fs.Duration("min-session-timeout", 0, "smallest session timeout (default 2 ticks)")
	maxTimeout := fs.Duration("max-session-timeout", 0, "largest session timeout (default 20 ticks)")
	raftTimeout := fs.Duration("raft-timeout", cfg.RaftTimeout, "raft heartbeat and election timeout (bounds failover)")
	commitTimeout := fs.Duration("commit-timeout", cfg.CommitTimeout, "how soon an idle leader tells followers about a commit (on the latency of writes through followers)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	tlsCert := fs.String("tls-cert", "", "PEM certificate: turns TLS on for gRPC, raft, HTTP and the ZooKeeper port (re-read when it changes)")
	tlsKey := fs.String("tls-key", "", "PEM private key of -tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA certificates that sign the other servers' (and, with -tls-client-auth, clients') certificates")
	tlsClientAuth := fs.Bool("tls-client-auth", false, "require clients to present a certificate signed by -tls-ca (mutual TLS)")
	tlsOnly := fs.Bool("tls-only", false, "refuse plaintext on the ZooKeeper port (by default it serves TLS and plaintext side by side)")
	secureZK := fs.String("secure-zk-addr", "", "an extra ZooKeeper port that serves TLS only (ZooKeeper's secureClientPort)")
	clusterKeyFile := fs.String("cluster-key-file", "", "file with the cluster key (base64, from `coord keygen`): the secret every member proves on the peer plane (raft, server-to-server gRPC, gossip). Default: <data-dir>/"+server.ClusterKeyName+", generated on a lone server's first start")
	peerCert := fs.String("peer-cert", "", "PEM certificate this server proves membership with on the peer plane instead of a cluster key (with -peer-key and -peer-ca; re-read when it changes)")
	peerKey := fs.String("peer-key", "", "PEM private key of -peer-cert")
	peerCA := fs.String("peer-ca", "", "PEM CA that signs the servers' peer certificates, and only theirs (never clients')")
	gossipKey := fs.String("gossip-key", "", "base64 key of 16, 24 or 32 bytes that encrypts gossip (the same on every server)")
	auditLog := fs.String("audit-log", "", "append an audit record per client write and authentication (who, what, result) to this file")
	saslUsers := fs.String("sasl-users", "", "a JAAS file (ZooKeeper's, with user_<name>=\"<password>\" entries) whose users may log in with SASL DIGEST-MD5")
	reconfigEnabled := fs.Bool("reconfig-enabled", true, "serve ZooKeeper's reconfig (false: ReconfigDisabled, as ZooKeeper's reconfigEnabled=false); it needs WRITE on /zookeeper/config, by default the superuser's alone")
	superDigest := fs.String("super-digest", "", "the superuser's digest id, user:base64-sha1 (ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest); a session authenticated as it passes every ACL")
	superDigestFile := fs.String("super-digest-file", "", "a file holding the -super-digest value (user:base64-sha1; `coord digest user:password` prints one), for deployments that keep it out of the command line")
	adminX509 := fs.String("admin-x509", "", "client certificate subjects (RFC 2253, e.g. CN=ops,O=example; several separated by ';') that are admin identities on the Admin gRPC service, as the -super-digest user is")
	maxClientConns := fs.Int("max-client-conns", cfg.MaxClientConns, "client connections allowed from one address (ZooKeeper's maxClientCnxns; 0: no limit)")
	containerCheck := fs.Duration("container-check-interval", cfg.ContainerCheckInterval, "how often the leader deletes empty container nodes and expired TTL nodes (ZooKeeper's znode.container.checkIntervalMs)")
	handshakeTimeout := fs.Duration("handshake-timeout", cfg.HandshakeTimeout, "how long a new ZooKeeper connection may take to send its connect request")
	maxOutstanding := fs.Int("max-outstanding", cfg.MaxOutstanding, "requests in flight plus unsent replies a client connection may hold before the server stops reading it")
	maxQueuedBytes := fs.Int("max-queued-bytes", cfg.MaxQueuedBytes, "bytes of unsent replies and events a client connection may hold before the server stops reading it")
	leaderLoss := fs.Float64("leader-loss-fraction", cfg.LeaderLossFraction, "a server with no contact with a leader for this fraction of a session's timeout closes the session's connection (above 0, below 2/3)")
	readOnly := fs.Bool("read-only-mode", false, "a server cut off from the quorum serves reads to clients that accept a read-only server and refuses their writes with NotReadOnly (ZooKeeper's readonlymode.enabled)")
	maxWatches := fs.Int("max-watches-per-session", cfg.MaxWatchesPerSession, "watches one session may hold on this server, each kind on a path once (0: no limit, as ZooKeeper); one more is refused with QuotaExceeded")
	enforceQuota := fs.Bool("enforce-quota", false, "refuse with QuotaExceeded a create or setData that would pass a hard quota limit (zkCli.sh setquota -N/-B), as ZooKeeper's zookeeper.enforceQuota; the leader's setting decides, so set it on every voter")
	maxData := fs.Int("max-data-bytes", cfg.MaxDataBytes, "largest znode data this server accepts (ZooKeeper's jute.maxbuffer); checked before the log, so servers may differ")
	snapLogBytes := fs.Uint64("snapshot-log-bytes", cfg.SnapshotLogBytes, "take a snapshot once the log entries applied since the last one hold between half this many bytes and this many, drawn for each snapshot so servers do not snapshot together (0: only every 100,000 entries); the log kept is at most about this much")
	logStore := fs.String("log-store", cfg.LogStore, "raft log store of a new data directory: bolt (raft-boltdb, raft.db) or wal (raft-wal segment files, wal/); empty: what the directory holds, else wal; a directory keeps its store")
	gcPercent := fs.Int("gc-percent", defaultGCPercent, "Go garbage collector target (GOGC): heap growth, in percent, between collections; the environment's GOGC wins unless this flag is given")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		// A misspelt command must not start a server and bootstrap
		// ./coord-data.
		fmt.Fprintf(os.Stderr, "coord: unknown command %q (commands: local, health, keygen, digest, version; coord -help)\n", fs.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var fc fileConfig
	if *configFile != "" {
		b, err := os.ReadFile(*configFile)
		if err == nil {
			err = json.Unmarshal(b, &fc)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "coord: config file %s: %v\n", *configFile, err)
			return 2
		}
	}
	pick := func(name, flagVal, fileVal string) string {
		if set[name] || fileVal == "" {
			return flagVal
		}
		return fileVal
	}
	cfg.ID = pick("id", *id, fc.ID)
	cfg.DataDir = pick("data-dir", *dataDir, fc.DataDir)
	cfg.RaftAddr = pick("raft-addr", *raftAddr, fc.RaftAddr)
	cfg.GRPCAddr = pick("grpc-addr", *grpcAddr, fc.GRPCAddr)
	cfg.RaftAdvertise, cfg.PeerSourceIP = *raftAdvertise, *peerSource
	cfg.GossipAddr = pick("gossip-addr", *gossipAddr, fc.GossipAddr)
	cfg.HTTPAddr = pick("http-addr", *httpAddr, fc.HTTPAddr)
	cfg.Pprof = *pprofOn
	cfg.ZKAddr = pick("zk-addr", *zkAddr, fc.ZKAddr)
	cfg.FourLetterWords = splitList(pick("4lw-whitelist", *fourLW, fc.FourLetterWords), ",")
	cfg.Observer = *observer || (!set["observer"] && fc.Observer)
	cfg.Bootstrap = *bootstrap && !cfg.Observer
	if !set["bootstrap"] && fc.Bootstrap != nil {
		cfg.Bootstrap = *fc.Bootstrap
	}
	peerSpecs := splitList(*peers, ";")
	if !set["peers"] && len(fc.Peers) > 0 {
		peerSpecs = fc.Peers
	}
	for _, spec := range peerSpecs {
		p, err := parsePeer(spec)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coord: -peers: %v\n", err)
			return 2
		}
		cfg.Peers = append(cfg.Peers, p)
	}
	if set["max-data-bytes"] {
		// Room for the request around the data, on both front ends.
		cfg.MaxDataBytes = *maxData
		cfg.MaxRequestBytes = max(cfg.MaxRequestBytes, *maxData+64<<10)
		cfg.MaxFrameBytes = max(cfg.MaxFrameBytes, *maxData+64<<10)
	}
	cfg.SnapshotLogBytes = *snapLogBytes
	cfg.LogStore = *logStore
	if *containerCheck <= 0 {
		fmt.Fprintf(os.Stderr, "coord: -container-check-interval %v: want > 0\n", *containerCheck)
		return 2
	}
	cfg.ContainerCheckInterval = *containerCheck
	cfg.GossipJoin = splitList(*join, ",")
	if !set["join"] && len(fc.Join) > 0 {
		cfg.GossipJoin = fc.Join
	}
	if len(cfg.GossipJoin) > 0 && !set["bootstrap"] {
		cfg.Bootstrap = false // a joining server never starts its own cluster
	}
	durations := []struct {
		name string
		flag time.Duration
		file string
		dst  *time.Duration
	}{
		{"tick", *tick, fc.Tick, &cfg.Tick},
		{"min-session-timeout", *minTimeout, fc.MinSessionTimeout, &cfg.MinSessionTimeout},
		{"max-session-timeout", *maxTimeout, fc.MaxSessionTimeout, &cfg.MaxSessionTimeout},
	}
	for _, d := range durations {
		v := d.flag
		if !set[d.name] && d.file != "" {
			parsed, err := time.ParseDuration(d.file)
			if err != nil {
				fmt.Fprintf(os.Stderr, "coord: config %s: %v\n", d.name, err)
				return 2
			}
			v = parsed
		}
		if set[d.name] && v <= 0 {
			fmt.Fprintf(os.Stderr, "coord: -%s %v: want > 0\n", d.name, v)
			return 2
		}
		if v != 0 {
			*d.dst = v
		}
	}
	if !set["min-session-timeout"] && fc.MinSessionTimeout == "" {
		cfg.MinSessionTimeout = 2 * cfg.Tick
	}
	if !set["max-session-timeout"] && fc.MaxSessionTimeout == "" {
		cfg.MaxSessionTimeout = 20 * cfg.Tick
	}
	cfg.MaxClientConns, cfg.HandshakeTimeout = *maxClientConns, *handshakeTimeout
	cfg.MaxOutstanding, cfg.MaxQueuedBytes = *maxOutstanding, *maxQueuedBytes
	cfg.MaxWatchesPerSession = *maxWatches
	cfg.EnforceQuota = *enforceQuota
	cfg.LeaderLossFraction = *leaderLoss
	cfg.ReadOnlyMode = *readOnly
	cfg.SuperDigest = *superDigest
	if *superDigestFile != "" {
		b, err := os.ReadFile(*superDigestFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coord: -super-digest-file: %v\n", err)
			return 2
		}
		cfg.SuperDigest = strings.TrimSpace(string(b))
	}
	cfg.AdminX509 = server.SplitAdminX509(*adminX509)
	cfg.DisableReconfig = !*reconfigEnabled
	cfg.AuditLog = *auditLog
	if *saslUsers != "" {
		users, err := server.ReadSASLUsers(*saslUsers)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coord: -sasl-users: %v\n", err)
			return 2
		}
		cfg.SASLUsers = users
	}
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = *tlsCert, *tlsKey, *tlsCA
	cfg.ClusterKeyFile, cfg.PeerCert, cfg.PeerKey, cfg.PeerCA = *clusterKeyFile, *peerCert, *peerKey, *peerCA
	cfg.TLSClientAuth, cfg.TLSOnly, cfg.SecureZKAddr = *tlsClientAuth, *tlsOnly, *secureZK
	if *gossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(*gossipKey)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coord: -gossip-key: %v\n", err)
			return 2
		}
		cfg.GossipKey = key
	}
	cfg.RaftTimeout = *raftTimeout
	cfg.CommitTimeout = *commitTimeout
	var level slog.Level
	if err := level.UnmarshalText([]byte(pick("log-level", *logLevel, fc.LogLevel))); err != nil {
		fmt.Fprintf(os.Stderr, "coord: -log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	if set["gc-percent"] || os.Getenv("GOGC") == "" {
		debug.SetGCPercent(*gcPercent)
	}

	srv, err := server.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	log.Info("shutting down")
	if err := srv.Close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// parsePeer reads "id=raftAddr,grpcAddr[,observer]".
func parsePeer(spec string) (server.Peer, error) {
	id, rest, ok := strings.Cut(spec, "=")
	parts := strings.Split(rest, ",")
	if !ok || id == "" || len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "observer") {
		return server.Peer{}, fmt.Errorf("%q: want id=raftAddr,grpcAddr[,observer]", spec)
	}
	return server.Peer{ID: id, RaftAddr: parts[0], GRPCAddr: parts[1], Observer: len(parts) == 3}, nil
}

func splitList(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
