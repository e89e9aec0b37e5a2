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
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
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

// defaultGCPercent trades memory for CPU: a server's live heap is its znode
// tree, which the collector would otherwise rescan every time the heap
// doubles; at 400 a 3-node write load spends about a sixth less CPU
// (docs/benchmarks.md) for a heap up to five times the live data.
const defaultGCPercent = 400

func run(args []string) int {
	fs, build := serverFlags()
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
	opts, err := build()
	if err == nil {
		err = opts.cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coord: %v\n", err)
		return 2
	}
	var stopping atomic.Bool
	log := slog.New(stopHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: opts.logLevel}), &stopping})
	cfg := opts.cfg
	cfg.Logger = log
	if opts.gcPercent >= 0 {
		debug.SetGCPercent(opts.gcPercent)
	}

	if cfg.Rebuild {
		if err := setAside(cfg.DataDir, log); err != nil {
			log.Error("cannot rebuild", "err", err)
			return 1
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case <-srv.Failed():
		return stopFailed(srv, log, &stopping)
	}
	stopping.Store(true)
	log.Info("shutting down")
	if err := srv.Close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// setAside is -rebuild's first step: the data directory's raft state, if
// it does not verify, goes into corrupt-<time>/ in it (kept for a
// post-mortem). A directory whose state verifies is refused: -rebuild
// would throw a good copy away (and left in a service's flags, it would on
// every restart).
func setAside(dataDir string, log *slog.Logger) error {
	held, err := server.VerifyDataDir(dataDir, log)
	if held && err == nil {
		return fmt.Errorf("-rebuild: the raft state in %s verifies; -rebuild is only for a data directory that does not (start without it)", dataDir)
	}
	if err != nil {
		log.Warn("the raft state does not verify", "err", err)
	}
	aside, err := server.SetAsideRaftState(dataDir, time.Now())
	if err != nil {
		return err
	}
	log.Warn("raft state set aside; starting empty, taking the state from the other servers", "dir", aside)
	return nil
}

// stopFailed stops a server whose data directory failed (Server.Failed):
// it must not go on, as if what it acknowledged were safe. Exit code 1, as
// a server that cannot start.
func stopFailed(srv failedServer, log *slog.Logger, stopping *atomic.Bool) int {
	stopping.Store(true)
	msg := "stopping: the data directory cannot be written safely"
	if errors.Is(srv.Err(), server.ErrDataCorrupt) {
		msg = "stopping: the data directory is corrupt"
	}
	log.Error(msg, "err", srv.Err())
	closed := make(chan error, 1)
	go func() { closed <- srv.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			log.Error("shutdown", "err", err)
		}
	case <-time.After(failedStopWait):
		// Nothing on disk needs a clean close any more (the store takes no
		// writes), and a server that must stop must not linger: exit, as a
		// kill -9 would, and say what held the close.
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		log.Error("the shutdown did not finish; exiting without it", "after", failedStopWait, "goroutines", stacks.String())
	}
	return 1
}

// failedServer is what stopFailed needs of a *server.Server.
type failedServer interface {
	Err() error
	Close() error
}

// failedStopWait bounds the close of a server whose data directory failed.
var failedStopWait = 5 * time.Second

// options are what the flags and the config file decide.
type options struct {
	cfg       server.Config // without a Logger
	logLevel  slog.Level
	gcPercent int // the collector's target; -1: leave GOGC alone
}

// serverFlags defines the flags of a server on a new FlagSet. After Parse,
// build reads the -config file into the flags the command line left unset
// (configfile.go) and turns them into options.
func serverFlags() (fs *flag.FlagSet, build func() (options, error)) {
	fs = flag.NewFlagSet("coord", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: coord [flags]          run a server (alone, with no flags: data in ./coord-data)
       coord local [flags] [-- server flags]  run a loopback cluster of real processes (coord local -help)
       coord health [flags]   ask a server's /health, for container health checks
       coord keygen [-o FILE] write a new cluster key
       coord digest USER:PASSWORD  print a -super-digest value
       coord version          print the version

Flags of a server (each may also be set in the -config file, under its name without the dash):
`)
		fs.PrintDefaults()
	}
	def := server.DefaultConfig()
	fs.String("config", "", "JSON `file` of settings: its keys are the flag names (without the dash) and flags given override it")
	id := fs.String("id", def.ID, "server id, unique in the cluster")
	dataDir := fs.String("data-dir", def.DataDir, "directory for the raft log, stable store and snapshots")
	raftAddr := fs.String("raft-addr", def.RaftAddr, "host:port for raft traffic")
	grpcAddr := fs.String("grpc-addr", def.GRPCAddr, "host:port for the gRPC client, admin and internal services")
	raftAdvertise := fs.String("raft-advertise", "", `raft address the other servers reach this one at, if not -raft-addr (a proxy in between)`)
	peerSource := fs.String("peer-source-ip", "", `local IP of this server's connections to the other servers ("": the kernel chooses)`)
	gossipAddr := fs.String("gossip-addr", def.GossipAddr, `host:port for memberlist gossip ("" turns it off)`)
	zkAddr := fs.String("zk-addr", def.ZKAddr, `host:port for the ZooKeeper wire protocol ("" turns it off)`)
	fourLW := fs.String("4lw-whitelist", strings.Join(def.FourLetterWords, ","), `four-letter words served on the ZooKeeper port, comma separated ("*" for all), as ZooKeeper's 4lw.commands.whitelist: srvr is always served, and isro with -read-only-mode; the others answer "<word> is not executed because it is not in the whitelist." (cons, dump, wchc, wchp, envi, stat, mntr, ... show sessions, client addresses, paths or the host to anyone who reaches the port)`)
	httpAddr := fs.String("http-addr", def.HTTPAddr, `host:port for /metrics, /health, /status, /members ("" turns it off)`)
	consoleOn := fs.Bool("console", true, "serve the browser console under /ui/ on -http-addr (docs/console.md): sign-in with the same identities and ACL checks as any client")
	consoleIdle := fs.Duration("console-idle", 30*time.Minute, "end a console sign-in after this long without a call")
	pprofOn := fs.Bool("pprof", false, "serve Go's profiler under /debug/pprof/ on -http-addr (heap, goroutines, CPU profiles, to anyone who reaches that port); without it those paths are 404")
	observer := fs.Bool("observer", false, "run as an observer (raft non-voter)")
	bootstrap := fs.Bool("bootstrap", true, "start a new cluster if this server has no state (voters only)")
	rebuild := fs.Bool("rebuild", false, "once, for a data directory that does not verify (docs/deploy.md, \"A corrupt data directory\"): set its raft state aside into corrupt-<time>/ in it and start empty, taking the state from the other servers (the leader removes this server and adds it back); refused if the raft state verifies")
	peers := fs.String("peers", "", "known servers: id=raftAddr,grpcAddr[,observer];...")
	join := fs.String("join", "", "gossip addresses of servers of an existing cluster to join, comma separated")
	tick := fs.Duration("tick", def.Tick, "ZooKeeper tickTime: session timeout granularity")
	minTimeout := fs.Duration("min-session-timeout", 0, "smallest session timeout (default 2 ticks)")
	maxTimeout := fs.Duration("max-session-timeout", 0, "largest session timeout (default 20 ticks)")
	raftTimeout := fs.Duration("raft-timeout", def.RaftTimeout, "raft heartbeat and election timeout (bounds failover)")
	commitTimeout := fs.Duration("commit-timeout", def.CommitTimeout, "how soon an idle leader tells followers about a commit (on the latency of writes through followers)")
	freshFollowers := fs.Bool("fresh-followers", false, "answer a write only once every follower and observer that keeps up has its commit notice, and make their reads wait for it: a read on another server after an acknowledged write shows it (about a round trip between servers more per write)")
	serialAppend := fs.Bool("serial-append", false, "the leader makes an entry durable in its own log before it sends it to the followers (hashicorp/raft's order; one local fsync more per write) instead of while it does")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	tlsCert := fs.String("tls-cert", "", "PEM certificate: turns TLS on for gRPC, raft, HTTP and the ZooKeeper port (re-read when it changes)")
	tlsKey := fs.String("tls-key", "", "PEM private key of -tls-cert")
	tlsCA := fs.String("tls-ca", "", "PEM CA certificates that sign the other servers' (and, with -tls-client-auth, clients') certificates")
	tlsClientAuth := fs.Bool("tls-client-auth", false, "require clients to present a certificate signed by -tls-ca (mutual TLS)")
	tlsOnly := fs.Bool("tls-only", false, "refuse plaintext on the ZooKeeper port (by default it serves TLS and plaintext side by side)")
	secureZK := fs.String("secure-zk-addr", "", "an extra ZooKeeper port that serves TLS only (ZooKeeper's secureClientPort)")
	clusterKeyFile := fs.String("cluster-key-file", "", "`file` with the cluster key (base64, from 'coord keygen'): the secret every member proves on the peer plane (raft, server-to-server gRPC, gossip). Default: <data-dir>/"+server.ClusterKeyName+", generated on a lone server's first start")
	peerCert := fs.String("peer-cert", "", "PEM certificate this server proves membership with on the peer plane instead of a cluster key (with -peer-key and -peer-ca; re-read when it changes)")
	peerKey := fs.String("peer-key", "", "PEM private key of -peer-cert")
	peerCA := fs.String("peer-ca", "", "PEM CA that signs the servers' peer certificates, and only theirs (never clients')")
	gossipKey := fs.String("gossip-key", "", "base64 key of 16, 24 or 32 bytes that encrypts gossip (the same on every server)")
	auditLog := fs.String("audit-log", "", "append an audit record per client write and authentication (who, what, result) to this file")
	saslUsers := fs.String("sasl-users", "", "a JAAS file (ZooKeeper's, with user_<name>=\"<password>\" entries) whose users may log in with SASL DIGEST-MD5")
	reconfigEnabled := fs.Bool("reconfig-enabled", true, "serve ZooKeeper's reconfig (false: ReconfigDisabled, as ZooKeeper's reconfigEnabled=false); it needs WRITE on /zookeeper/config, by default the superuser's alone")
	superDigest := fs.String("super-digest", "", "the superuser's digest id, user:base64-sha1 (ZooKeeper's zookeeper.DigestAuthenticationProvider.superDigest); a session authenticated as it passes every ACL")
	superDigestFile := fs.String("super-digest-file", "", "a `file` holding the -super-digest value (user:base64-sha1; 'coord digest user:password' prints one), for deployments that keep it out of the command line")
	adminX509 := fs.String("admin-x509", "", "client certificate subjects (RFC 2253, e.g. CN=ops,O=example; several separated by ';') that are admin identities on the Admin gRPC service, as the -super-digest user is")
	maxClientConns := fs.Int("max-client-conns", def.MaxClientConns, "client connections allowed from one address (ZooKeeper's maxClientCnxns; 0: no limit)")
	maxClientTotal := fs.Int("max-client-total", def.MaxClientTotal, "client connections allowed in all (0: the open-file limit less a sixteenth, at least 256, kept for raft, peers and files; -1: no bound)")
	containerCheck := fs.Duration("container-check-interval", def.ContainerCheckInterval, "how often the leader deletes empty container nodes and expired TTL nodes (ZooKeeper's znode.container.checkIntervalMs)")
	handshakeTimeout := fs.Duration("handshake-timeout", def.HandshakeTimeout, "how long a new ZooKeeper connection may take to send its connect request")
	maxOutstanding := fs.Int("max-outstanding", def.MaxOutstanding, "requests in flight plus unsent replies a client connection may hold before the server stops reading it")
	maxQueuedBytes := fs.Int("max-queued-bytes", def.MaxQueuedBytes, "bytes of unsent replies and events a client connection may hold before the server stops reading it")
	leaderLoss := fraction(def.LeaderLossFraction)
	fs.Var(&leaderLoss, "leader-loss-fraction", "a server with no contact with a leader for this `fraction` of a session's timeout closes the session's connection (above 0, below 2/3)")
	readOnly := fs.Bool("read-only-mode", false, "a server cut off from the quorum serves reads to clients that accept a read-only server and refuses their writes with NotReadOnly (ZooKeeper's readonlymode.enabled)")
	maxWatches := fs.Int("max-watches-per-session", def.MaxWatchesPerSession, "watches one session may hold on this server, each kind on a path once (0: no limit, as ZooKeeper); one more is refused with QuotaExceeded")
	enforceQuota := fs.Bool("enforce-quota", false, "refuse with QuotaExceeded a create or setData that would pass a hard quota limit (zkCli.sh setquota -N/-B), as ZooKeeper's zookeeper.enforceQuota; the leader's setting decides, so set it on every voter")
	maxData := fs.Int("max-data-bytes", def.MaxDataBytes, "largest znode data this server accepts (ZooKeeper's jute.maxbuffer); checked before the log, so servers may differ")
	snapLogBytes := fs.Uint64("snapshot-log-bytes", def.SnapshotLogBytes, "take a snapshot once the log entries applied since the last one hold between half this many bytes and this many, drawn for each snapshot so servers do not snapshot together (0: only every 100,000 entries); the log kept is at most about this much")
	logStore := fs.String("log-store", def.LogStore, "raft log store of a new data directory: bolt (raft-boltdb, raft.db) or wal (raft-wal segment files, wal/); empty: what the directory holds, else wal; a directory keeps its store")
	gcPercent := fs.Int("gc-percent", defaultGCPercent, "Go garbage collector target (GOGC): heap growth, in percent, between collections; the environment's GOGC wins unless this flag is given")
	build = func() (options, error) {
		if err := applyConfigFile(fs); err != nil {
			return options{}, err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		cfg := def
		cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.GRPCAddr = *id, *dataDir, *raftAddr, *grpcAddr
		cfg.RaftAdvertise, cfg.PeerSourceIP = *raftAdvertise, *peerSource
		cfg.GossipAddr, cfg.HTTPAddr, cfg.ZKAddr = *gossipAddr, *httpAddr, *zkAddr
		cfg.Pprof = *pprofOn
		cfg.NoConsole, cfg.ConsoleIdle = !*consoleOn, *consoleIdle
		cfg.FourLetterWords = splitList(*fourLW, ",")
		cfg.Observer = *observer
		cfg.Bootstrap = *bootstrap && !cfg.Observer
		for _, spec := range splitList(*peers, ";") {
			p, err := parsePeer(spec)
			if err != nil {
				return options{}, fmt.Errorf("-peers: %w", err)
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
		cfg.ContainerCheckInterval = *containerCheck
		cfg.Rebuild = *rebuild
		if cfg.Rebuild {
			cfg.Bootstrap = false // it takes the cluster's state, never starts one
		}
		cfg.GossipJoin = splitList(*join, ",")
		if len(cfg.GossipJoin) > 0 && !set["bootstrap"] {
			cfg.Bootstrap = false // a joining server never starts its own cluster
		}
		// The session timeouts default to 2 and 20 ticks of the tick given.
		cfg.Tick = *tick
		cfg.MinSessionTimeout, cfg.MaxSessionTimeout = 2*cfg.Tick, 20*cfg.Tick
		if set["min-session-timeout"] {
			cfg.MinSessionTimeout = *minTimeout
		}
		if set["max-session-timeout"] {
			cfg.MaxSessionTimeout = *maxTimeout
		}
		cfg.MaxClientConns, cfg.HandshakeTimeout = *maxClientConns, *handshakeTimeout
		cfg.MaxClientTotal = *maxClientTotal
		cfg.MaxOutstanding, cfg.MaxQueuedBytes = *maxOutstanding, *maxQueuedBytes
		cfg.MaxWatchesPerSession = *maxWatches
		cfg.EnforceQuota = *enforceQuota
		cfg.LeaderLossFraction = float64(leaderLoss)
		cfg.ReadOnlyMode = *readOnly
		cfg.SuperDigest = *superDigest
		if *superDigestFile != "" {
			b, err := os.ReadFile(*superDigestFile)
			if err != nil {
				return options{}, fmt.Errorf("-super-digest-file: %w", err)
			}
			cfg.SuperDigest = strings.TrimSpace(string(b))
		}
		cfg.AdminX509 = server.SplitAdminX509(*adminX509)
		cfg.DisableReconfig = !*reconfigEnabled
		cfg.AuditLog = *auditLog
		if *saslUsers != "" {
			users, err := server.ReadSASLUsers(*saslUsers)
			if err != nil {
				return options{}, fmt.Errorf("-sasl-users: %w", err)
			}
			cfg.SASLUsers = users
		}
		cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = *tlsCert, *tlsKey, *tlsCA
		cfg.ClusterKeyFile, cfg.PeerCert, cfg.PeerKey, cfg.PeerCA = *clusterKeyFile, *peerCert, *peerKey, *peerCA
		cfg.TLSClientAuth, cfg.TLSOnly, cfg.SecureZKAddr = *tlsClientAuth, *tlsOnly, *secureZK
		if *gossipKey != "" {
			key, err := base64.StdEncoding.DecodeString(*gossipKey)
			if err != nil {
				return options{}, fmt.Errorf("-gossip-key: %w", err)
			}
			cfg.GossipKey = key
		}
		cfg.RaftTimeout = *raftTimeout
		cfg.CommitTimeout = *commitTimeout
		if !set["commit-timeout"] {
			// The default follows a shorter -raft-timeout down.
			cfg.CommitTimeout = min(cfg.CommitTimeout, cfg.RaftTimeout)
		}
		cfg.FreshFollowers = *freshFollowers
		cfg.SerialAppend = *serialAppend
		opts := options{cfg: cfg, gcPercent: -1}
		if err := opts.logLevel.UnmarshalText([]byte(*logLevel)); err != nil {
			return options{}, fmt.Errorf("-log-level: %w", err)
		}
		if set["gc-percent"] || os.Getenv("GOGC") == "" {
			opts.gcPercent = *gcPercent
		}
		return opts, nil
	}
	return fs, build
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

// fraction is a float64 flag whose value prints short: -help shows the
// default 1/3 as 0.333 rather than 0.3333333333333333.
type fraction float64

func (f *fraction) String() string {
	if f == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*f), 'g', 3, 64)
}

func (f *fraction) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("parse error")
	}
	*f = fraction(v)
	return nil
}

func (f *fraction) Get() any { return float64(*f) }
