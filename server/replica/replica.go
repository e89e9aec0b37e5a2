package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"coord/api"
	"coord/fsm"
	"coord/server/internal/logbridge"
	"coord/session"
	"coord/zxid"
)

// Observer is told of every change to the state, inside apply: Applied
// after each command (with the exclusive apply lock held, before the
// command's waiting request is completed), Restored after a snapshot
// replaced the state (also under the lock). Both must be quick and must not
// call back into the Replica's Read or Submit.
type Observer interface {
	Applied(cmd *fsm.Command, res fsm.Result, triggers []fsm.Trigger)
	Restored(v *fsm.View)
}

// Config is what a replica needs. The peer plane (PeerListener, PeerDial,
// PeerAuth, Services) and Watcher are required;
// the stores default to raft-boltdb and raft's file snapshot store under
// DataDir.
type Config struct {
	ID       string
	DataDir  string
	Observer bool // a raft non-voter
	// Bootstrap starts a new cluster of this server and BootstrapPeers
	// (voters) if there is no raft state yet.
	Bootstrap      bool
	BootstrapPeers []Member

	RaftTimeout   time.Duration
	CommitTimeout time.Duration
	// SerialAppend: the leader stores an entry in its own log before it
	// replicates it (hashicorp/raft's way) instead of while it does
	// (overlap.go).
	SerialAppend bool
	// overlapHandedIn: tests overlap the leader's append over stores
	// handed in too (normally only over the stores under DataDir).
	overlapHandedIn bool
	// FreshFollowers: the leader applies (and so answers) an entry only
	// once every follower and observer that keeps up has confirmed its
	// commit notice (at most a millisecond), and a read here waits for the
	// commits this server has been told of (notices.go).
	FreshFollowers    bool
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// SnapshotLogBytes takes a snapshot once the command entries applied
	// since the last one pass this many bytes (0: only raft's entry-count
	// SnapshotThreshold); see snapshot.go.
	SnapshotLogBytes uint64
	// EnforceQuota: while this server leads, it stamps the creates,
	// setData and multis it proposes with fsm.Command.EnforceQuota, so
	// that apply refuses those passing a hard quota limit (ZooKeeper's
	// zookeeper.enforceQuota, which its leader also applies alone). The
	// verdict travels in the log: a server's own setting never changes
	// what it replays.
	EnforceQuota bool

	// PeerListener is the peer plane's listener (the raft port), PeerDial
	// opens a TCP connection to another server's (the server gates both;
	// tests cut them), and PeerAuth authenticates both ends of every
	// connection (peerplane.go). Advertise is the address the others reach
	// this server at (nil: PeerListener's). MaxMsgBytes bounds one peer
	// gRPC message.
	PeerListener net.Listener
	PeerDial     func(ctx context.Context, addr string) (net.Conn, error)
	PeerAuth     PeerAuth
	Advertise    net.Addr
	MaxMsgBytes  int
	// Services answers the server-to-server calls the replica does not
	// (touch, join); RegisterPeer, if set, registers more gRPC services on
	// the peer plane (the Admin service, for members).
	Services     PeerServices
	RegisterPeer func(*grpc.Server)
	// LogStoreKind names the raft log store under DataDir (LogStoreBolt,
	// LogStoreWAL; "": the one DataDir holds, else DefaultLogStore).
	LogStoreKind string
	// LogStore, StableStore and Snapshots replace the stores under DataDir
	// when set (all three or none).
	LogStore    raft.LogStore
	StableStore raft.StableStore
	Snapshots   raft.SnapshotStore

	Watcher Observer
	// Stages, if set, is told how long writes spend in each stage.
	Stages StageObserver
	Clock  session.Clock
	Logger *slog.Logger
}

// Replica is one raft member of a coord cluster: the log, the proposer (on
// the leader) or the forwarder (elsewhere), the commit stream and apply. It
// knows no client connections; an Observer is told of each change.
type Replica struct {
	cfg    Config
	log    *slog.Logger
	clock  session.Clock
	origin string
	seq    atomic.Uint64

	fsm       *raftFSM
	prop      *proposer
	fwd       *forwarder
	raft      *raft.Raft
	transport *heartbeatGate
	peers     *peerPlane    // the peer plane: raft's stream and peer gRPC
	closer    io.Closer     // the bbolt store, when the replica opened it
	checked   *checkedStore // the log and stable store as raft sees them, when the replica opened them
	logs      raft.LogStore // store behind the cache of recent entries
	overlap   *overlapLog   // the leader's append overlapped with replication (nil: SerialAppend)
	storeKind string        // LogStoreBolt or LogStoreWAL ("" with stores handed in)
	snapStore raft.SnapshotStore
	// replayTo is the last index of the log this server started with: up
	// to there it replays its own log after the snapshot it restored, and
	// takes no snapshot by log size meanwhile (awaitReplay). Set before
	// Start, read only after.
	replayTo uint64
	// scanSkipped: entries raft's startup scan was answered without their
	// data (startscan.go).
	scanSkipped uint64
	diskLow     atomic.Bool
	// storeFailed is closed when the checked store fails, storeErr
	// (written before) says why (checked.go).
	storeFailed chan struct{}
	storeErr    error
	// noticesRead counts the commit notices read from leaders (notices.go).
	noticesRead atomic.Uint64
	// noticesUp: this follower reads a leader's commit notices; its
	// Commits stream, which would carry the same positions, is closed.
	noticesUp atomic.Bool
	// settle: the term this server last saw itself lead in and its last
	// log index then (Settled).
	settleMu   sync.Mutex
	settleTerm uint64
	settleFrom uint64

	changeMu sync.Mutex
	changeCh chan struct{} // closed and replaced on every change (Changed)
	roleCh   chan struct{} // closed and replaced when raft's role or leader changes

	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// Result is the outcome of a submitted command: the command's result and
// the index of its entry, or Err when it never applied here (lost
// leadership, refused before the log, the server stopping, ...).
type Result struct {
	Res   fsm.Result
	Index uint64
	Err   error
}

// Errors a submitted command can fail with.
var (
	// ErrRefused marks an error of a command refused before it reached the
	// log: nothing changed (unlike a command whose fate is unknown). It
	// crosses a forward as ForwardResponse.refused.
	ErrRefused = errors.New("refused before the log")
	// ErrDiskFull: the data directory is below the server's free-space
	// bound (SetDiskLow).
	ErrDiskFull = fmt.Errorf("server: disk nearly full, refusing writes (%w)", ErrRefused)
	// ErrClosed: the replica is stopping.
	ErrClosed = errors.New("server: closed")
	// ErrNoLeader: the cluster has no leader this server can reach.
	ErrNoLeader = errors.New("server: no leader")
	// ErrSnapshotInstalled fails the requests this server was waiting on
	// when it installed a snapshot: their entries may be folded into the
	// snapshot, where no entry completes them. Their fate is unknown to
	// this server, so the client gets ConnectionLoss, re-attaches and
	// finds out.
	ErrSnapshotInstalled = errors.New("server: state replaced by a snapshot; outcome unknown")
	// ErrProposalMismatch: see Stats.Mismatched.
	ErrProposalMismatch = errors.New("server: the log entry for this request carries another command")
)

// New opens the stores, starts raft and, if told to, bootstraps a cluster.
// Call Start once the server can serve the Internal service.
func New(cfg Config) (*Replica, error) {
	if cfg.Services == nil || cfg.Watcher == nil {
		return nil, errors.New("replica: Config needs Services and an Observer")
	}
	if given := cfg.LogStore != nil; given != (cfg.StableStore != nil) || given != (cfg.Snapshots != nil) {
		return nil, errors.New("replica: Config needs all three stores or none")
	}
	if cfg.Clock == nil {
		cfg.Clock = session.SystemClock{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	boot, err := bootNonce()
	if err != nil {
		return nil, err
	}
	if plantedReuseOrigin != nil {
		// A planted bug (jepsenplanted builds only): every boot of this
		// server proposes under the same origin.
		boot = plantedReuseOrigin()
	}
	r := &Replica{cfg: cfg, log: log, clock: cfg.Clock, origin: cfg.ID + "#" + boot,
		closing: make(chan struct{}), changeCh: make(chan struct{}), roleCh: make(chan struct{}), storeFailed: make(chan struct{})}
	r.fsm = newRaftFSM(r.origin, cfg.Watcher, log)
	r.fsm.onApplied = r.signalChange
	r.fsm.snapLimit = cfg.SnapshotLogBytes
	r.fsm.rollSnapAt()
	if cfg.Stages != nil {
		r.fsm.stages = cfg.Stages
	}
	r.prop = newProposer(r)
	peers, err := newPeerPlane(&cfg, log)
	if err != nil {
		return nil, err
	}
	r.peers = peers
	r.fsm.notices.wait = cfg.FreshFollowers
	r.fsm.notices.kick = make(chan struct{}, 1)
	if err := r.startRaft(); err != nil {
		peers.close()
		return nil, err
	}
	r.fwd = newForwarder(r)
	return r, nil
}

// Start runs the proposer, the commit follower and the applier.
func (r *Replica) Start() {
	api.RegisterInternalServer(r.peers.grpc, internalService{r: r})
	if r.cfg.RegisterPeer != nil {
		r.cfg.RegisterPeer(r.peers.grpc)
	}
	go r.peers.grpc.Serve(r.peers.grpcL)
	serve := r.serveNotices
	r.peers.onNotices.Store(&serve)
	r.wg.Add(7)
	go r.watchRaft()
	go r.runSnapshots()
	go r.prop.run()
	go r.followLeader(r.followCommitsOnce) // the Commits stream (commits.go)
	go r.followLeader(r.followNoticesOnce) // commit notices (notices.go)
	go func() { defer r.wg.Done(); r.fsm.notices.run(r.closing) }()
	go func() { defer r.wg.Done(); r.fsm.runApplier(r.logs, r.closing) }()
}

func (r *Replica) startRaft() error {
	cfg := r.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = logbridge.HCLog(r.log, "raft")
	rc.BatchApplyCh = true
	// A leader removed from the configuration (a reconfig, RemoveServer)
	// steps down and stays a follower outside the configuration, as a
	// removed ZooKeeper server keeps running: it serves no clients, starts
	// no elections, and takes replication again when it is added back
	// (raft's default shuts its raft down for good).
	rc.ShutdownOnRemove = false
	rc.MaxAppendEntries = 1024
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	scale := func(d time.Duration) time.Duration { return d * cfg.RaftTimeout / time.Second }
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
	rc.CommitTimeout = cfg.CommitTimeout
	// Look for a snapshot to take often, so the log is compacted soon after
	// SnapshotThreshold entries (raft's default looks every 2-4 minutes).
	rc.SnapshotInterval = cfg.SnapshotInterval

	logStore, stable, snaps := cfg.LogStore, cfg.StableStore, cfg.Snapshots
	if logStore == nil {
		ls, ss, closer, kind, err := openLogStore(cfg.DataDir, cfg.LogStoreKind, r.log)
		if err != nil {
			return err
		}
		checked, err := r.checkStores(ls, ss, kind)
		if err != nil {
			closer.Close()
			return err
		}
		removeEmptySnapshots(cfg.DataDir, r.log)
		fss, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, logbridge.HCLog(r.log, "snapshot"))
		if err != nil {
			closer.Close()
			return fmt.Errorf("server: snapshot store: %w", err)
		}
		// The log's and the snapshots' directories (wal/ or raft.db,
		// snapshots/) are entries of the data directory: durable only
		// once it is synced, before anything is acknowledged (a power
		// loss took the whole wal/ with every acknowledged write).
		if err := SyncDir(cfg.DataDir); err != nil {
			closer.Close()
			return err
		}
		r.log.Info("raft log store", "kind", kind, "dir", cfg.DataDir)
		logStore, stable, snaps, r.closer, r.storeKind, r.checked = checked, checked, newDurableSnapshots(fss, cfg.DataDir), closer, kind, checked
		if plantedSnapshots != nil {
			// A planted bug (jepsenplanted builds only).
			snaps = plantedSnapshots(filepath.Join(cfg.DataDir, "snapshots"), fss)
		}
	}
	closeStore := func() {
		if r.closer != nil {
			r.closer.Close()
		}
	}
	running := new(atomic.Bool) // raft installed its heartbeat fast path
	trans := &heartbeatGate{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  raftStream{chanListener: r.peers.raftL, p: r.peers, running: running},
		MaxPool: 5, Timeout: transportTimeout, Logger: logbridge.HCLog(r.log, "transport"),
	}), pipelineWait: 4 * cfg.RaftTimeout, stop: r.closing, running: running}
	if cfg.Bootstrap {
		has, err := raft.HasExistingState(logStore, stable, snaps)
		if err != nil {
			closeStore()
			trans.Close()
			return err
		}
		servers := []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: trans.LocalAddr()}}
		for _, p := range cfg.BootstrapPeers {
			if p.ID != cfg.ID {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
			}
		}
		if !has {
			if err := raft.BootstrapCluster(rc, logStore, stable, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
				closeStore()
				trans.Close()
				return fmt.Errorf("server: bootstrap: %w", err)
			}
		}
	}
	// The leader reads recent entries back to replicate them, and the
	// applier reads what was just stored; a cache of them, bounded in
	// bytes, spares both a read of the store.
	// The overlap only over the stores the replica opened: a queued write
	// that fails cannot be handed back to raft, so it must stop the server,
	// which the checked store does (stores handed in keep raft's order: a
	// failed append there makes raft step down and retry).
	if !cfg.SerialAppend && (r.checked != nil || cfg.overlapHandedIn) {
		var fail func(error)
		if r.checked != nil {
			fail = func(err error) { r.checked.fail(err) }
		}
		r.overlap = newOverlapLog(logStore, raft.ServerID(cfg.ID), r.diskLow.Load, fail)
		logStore = r.overlap
		r.fsm.awaitDurable = r.overlap.AwaitDurable
		trans.commitBound = r.overlap.CommitBound
		trans.acked = r.overlap.Acked
	}
	if last, err := logStore.LastIndex(); err == nil {
		r.replayTo = last
	}
	logs := newLogCache(logStore, logCacheEntries, logCacheBytes)
	var types *logTypes
	if r.checked != nil {
		types, r.checked.types = r.checked.types, nil
	}
	scan := armStartupScan(kickingLogStore{LogStore: logs, fsm: r.fsm}, types)
	rf, err := raft.NewRaft(rc, r.fsm, scan, stable, snaps, trans)
	scan.disarm()
	r.fsm.startPredecode(r.replayTo) // after raft's scan: only the replay's reads
	if n := scan.skipped.Load(); n > 0 {
		r.log.Info("raft's startup scan read only the configuration entries past the snapshot", "skipped", n)
	}
	r.scanSkipped = scan.skipped.Load()
	if err != nil {
		if r.checked != nil {
			// raft names no file when no snapshot loads: say which.
			if serr := snapshotsUnreadable(cfg.DataDir, snaps); serr != nil {
				err = serr
			}
		}
		if r.overlap != nil {
			r.overlap.close()
		}
		closeStore()
		trans.Close()
		return fmt.Errorf("server: starting raft: %w", err)
	}
	if r.overlap != nil {
		r.overlap.follow(rf)
	}
	trans.raft.Store(rf)
	r.raft, r.logs, r.transport, r.snapStore = rf, logs, trans, snaps
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

// plantedReuseOrigin is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it returns the boot nonce of every boot: a
// restarted server's sequence numbers start again at 1 under the origin of
// its previous boots, so replaying its log completes new requests with old
// entries' results (the bug the origin fixed). A known bug for jepsen/'s
// sessions checker to find.
var plantedReuseOrigin func() string

// plantedSnapshots is nil except in builds with the jepsenplanted tag
// (planted_jepsen.go), where it stands in for raft's file snapshot store.
var plantedSnapshots func(dir string, store *raft.FileSnapshotStore) raft.SnapshotStore

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

// Origin names this boot of this server in the log: its id and a random
// nonce drawn at start. Every command it proposes carries origin and a
// sequence number, and only an entry with this origin completes one of its
// waiting requests, so a restarted server (whose sequence numbers start
// again at 1) or another server reusing the id is never handed the result
// of a command it did not send in this boot.
func (r *Replica) Origin() string { return r.origin }

// Addr is the raft transport's address.
func (r *Replica) Addr() string { return string(r.transport.LocalAddr()) }

// IsLeader reports whether raft names this server leader now.
func (r *Replica) IsLeader() bool { return r.raft.State() == raft.Leader }

// View returns the current state (without the apply lock: use Read where
// reads must be ordered against apply).
func (r *Replica) View() *fsm.View { return r.fsm.fsm.View() }

// LastZxid is the zxid of the last command applied here.
func (r *Replica) LastZxid() zxid.Zxid { return r.fsm.fsm.LastZxid() }

// Read runs f on the current state with the apply lock held shared: f's
// view is the state after some whole command, and no apply runs until f
// returns, so a watch f registers fires for every later change and an
// event apply queues lands after anything f queues.
func (r *Replica) Read(f func(v *fsm.View)) {
	if r.cfg.FreshFollowers {
		r.fsm.awaitLearned()
	}
	r.fsm.mu.RLock()
	defer r.fsm.mu.RUnlock()
	f(r.fsm.fsm.View())
}

// ReadFresh is Read for a client's read: on a follower that reads its
// leader's commit notices it first waits, briefly, for the commits of what
// its log holds (awaitFresh), so that a read after another client's
// acknowledged write shows it.
func (r *Replica) ReadFresh(f func(v *fsm.View)) {
	if r.noticesUp.Load() {
		r.fsm.awaitFresh()
	}
	r.Read(f)
}

// Applied is the raft index up to which this server has applied the log:
// the last entry its state machine applied and, after it, the committed
// entries that carry nothing for the state machine (a new leader's no-op,
// the barrier a sync appends). raft never hands those to the state
// machine, so without them an idle cluster would look one entry behind
// its commit index after every election or sync.
func (r *Replica) Applied() uint64 {
	applied := r.fsm.applied.Load()
	if r.raft == nil {
		return applied // a replica of unit tests, with no raft
	}
	for commit := r.raft.CommitIndex(); applied < commit; applied++ {
		var l raft.Log
		if r.logs.GetLog(applied+1, &l) != nil || l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			break
		}
	}
	return applied
}

// AppliedChanged returns a channel closed when the applied index next moves.
func (r *Replica) AppliedChanged() <-chan struct{} { return r.fsm.appliedChanged() }

// SetDiskLow makes the replica refuse new writes (other than closing a
// session) with ErrDiskFull while low is true.
func (r *Replica) SetDiskLow(low bool) bool { return r.diskLow.Swap(low) }

// LeaderWait is how long a request waits for a leader to appear.
func (r *Replica) LeaderWait() time.Duration { return 4 * r.cfg.RaftTimeout }

// FirstIndex is the first index in the log (after compaction).
func (r *Replica) FirstIndex() (uint64, error) { return r.logs.FirstIndex() }

// Changed returns a channel closed at the next change of this replica's
// state as others see it: raft's role or leader changes, an entry applies
// (a membership change too), or the replica closes. A caller waiting for a
// condition takes the channel, checks, and waits on it.
func (r *Replica) Changed() <-chan struct{} {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	return r.changeCh
}

func (r *Replica) signalChange() { r.signal(false) }

// signal closes and renews Changed's channel, and roleChanged's too when
// raft's role, leader or peers changed.
func (r *Replica) signal(role bool) {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	close(r.changeCh)
	r.changeCh = make(chan struct{})
	if role {
		close(r.roleCh)
		r.roleCh = make(chan struct{})
	}
}

// roleChanged returns a channel closed when raft next observes a change of
// role, leader or peers (not at every apply, as Changed).
func (r *Replica) roleChanged() <-chan struct{} {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	return r.roleCh
}

// watchRaft signals a change for each of raft's role and leader
// observations until the replica closes.
func (r *Replica) watchRaft() {
	defer r.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	r.raft.RegisterObserver(obs)
	defer r.raft.DeregisterObserver(obs)
	for {
		select {
		case <-ch:
			r.signal(true)
		case <-r.closing:
			return
		}
	}
}

// Stats are the replica's counters.
type Stats struct {
	// Mismatched counts entries of this boot's origin whose command was not
	// the one their waiter proposed (never, unless origins repeat); such a
	// waiter fails rather than take another request's result.
	Mismatched uint64
	// SnapshotFailed counts requests failed because a snapshot was
	// installed while they waited.
	SnapshotFailed uint64
	// FastApplied counts entries applied from the leader's commit stream
	// before raft told of the commit.
	FastApplied uint64
	// NoticesRead counts commit notices this server read from a leader
	// (notices.go).
	NoticesRead uint64
	// Pending is how many proposals of this server wait for their entry.
	Pending int
	// PeerRefused counts connections to the peer port refused at the
	// handshake: strangers, other clusters' keys, client certificates.
	PeerRefused uint64
}

// Stats returns the replica's counters.
func (r *Replica) Stats() Stats {
	return Stats{Mismatched: r.fsm.mismatched.Load(), SnapshotFailed: r.fsm.skipped.Load(),
		FastApplied: r.fsm.fast.Load(), NoticesRead: r.noticesRead.Load(), Pending: r.fsm.pendingCount(), PeerRefused: r.peers.refusedN.Load()}
}

// Close stops raft, fails every request still waiting and closes the
// stores.
// shutdownRaft shuts raft down. raft's Shutdown waits for all its
// goroutines; one blocked on a peer connection can hold it (a CI run's
// server test hung in it for minutes at a cluster's teardown), so if it
// has not finished within a few seconds the transport is closed, which
// fails whatever waits on the network, and the wait goes on, bounded.
func (r *Replica) shutdownRaft() error {
	f := r.raft.Shutdown()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
	}
	r.log.Warn("raft shutdown still waiting after 5s: closing its transport to unblock it")
	r.transport.Close()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		var stacks strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		r.log.Error("raft did not shut down within 35s; closing the replica anyway", "goroutines", stacks.String())
		return errors.New("replica: raft did not shut down within 35s")
	}
}

func (r *Replica) Close() error {
	var err error
	r.closeOnce.Do(func() {
		close(r.closing)
		r.signalChange()
		r.fwd.close()
		err = r.shutdownRaft()
		r.transport.shut() // no heartbeat reaches the stores closed below
		if r.overlap != nil {
			r.overlap.close() // what raft queued is stored before the stores close
		}
		r.peers.close()
		r.fsm.notices.closeAll()
		r.fsm.failAll(ErrClosed)
		r.wg.Wait()
		if cerr := r.transport.Close(); err == nil {
			err = cerr
		}
		if r.checked != nil {
			r.checked.closed.Store(true) // a write raft still tries now is no disk fault
		}
		if r.closer != nil {
			if cerr := r.closer.Close(); err == nil {
				err = cerr
			}
		}
	})
	return err
}
