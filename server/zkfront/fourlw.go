package zkfront

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"coord/zk"
)

// Version is what coord reports where ZooKeeper reports its version (srvr,
// stat, mntr, envi), in ZooKeeper's form "3.8.0-<revision>, built on
// <date>": tools parse the leading x.y.z, and coord speaks ZooKeeper 3.8's
// protocol. The revision and date are the git commit's that go build
// stamps into the binary; a binary built outside a checkout says unknown.
var Version = buildVersion()

func buildVersion() string {
	rev, when, dirty := "", "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = "-" + st.Value
			case "vcs.time":
				if t, err := time.Parse(time.RFC3339, st.Value); err == nil {
					when = t.UTC().Format("2006-01-02 15:04 UTC")
				}
			case "vcs.modified":
				if st.Value == "true" {
					dirty = "-modified"
				}
			}
		}
	}
	return "3.8.4-coord" + rev + dirty + ", built on " + when
}

// fourLetterWord answers one of ZooKeeper's four-letter words on a fresh
// connection and closes it, as ZooKeeper does.
func (f *Frontend) fourLetterWord(nc net.Conn, cmd string) {
	if !fourLetterAllowed(f.cfg.FourLetterWords, f.cfg.ReadOnlyMode, cmd) {
		nc.Write([]byte(zk.NotWhitelisted(cmd)))
		return
	}
	serving := f.srv.Serving()
	readOnly := !serving && f.srv.ReadOnly()
	if !serving && !readOnly && zk.ServingOnly(cmd) {
		nc.Write([]byte(zk.NotServing + "\n"))
		return
	}
	var out string
	switch cmd {
	case "ruok":
		out = zk.FormatRuok()
	case "isro":
		// ZooKeeper: "ro" from its read-only server, "null" while it
		// serves nothing.
		out = zk.FormatIsro(readOnly)
		if !serving && !readOnly {
			out = "null"
		}
	case "srvr":
		out = zk.FormatSrvr(f.serverStats())
	case "stat":
		out = zk.FormatStat(f.serverStats(), f.consList(nc))
	case "cons":
		out = zk.FormatCons(f.consList(nc))
	case "mntr":
		out = zk.FormatMntr(f.monitorStats())
	case "conf":
		out = zk.FormatConf(f.confInfo())
	case "envi":
		out = zk.FormatEnvi(envInfo())
	case "wchs":
		conns, paths, total := f.sess.Watches().Stats()
		out = zk.FormatWchs(zk.WatchSummary{Connections: conns, Paths: paths, Total: total})
	case "wchc":
		var w []zk.SessionWatches
		for id, paths := range f.sess.Watches().BySession() {
			w = append(w, zk.SessionWatches{Session: id, Paths: paths})
		}
		slices.SortFunc(w, func(a, b zk.SessionWatches) int { return cmpInt64(a.Session, b.Session) })
		out = zk.FormatWchc(w)
	case "wchp":
		var w []zk.PathWatches
		for p, ids := range f.sess.Watches().ByPath() {
			w = append(w, zk.PathWatches{Path: p, Sessions: ids})
		}
		slices.SortFunc(w, func(a, b zk.PathWatches) int { return strings.Compare(a.Path, b.Path) })
		out = zk.FormatWchp(w)
	case "dump":
		out = zk.FormatDump(f.dumpInfo())
	case "srst":
		f.stats.reset()
		out = zk.StatsReset
	case "crst":
		for _, zc := range f.connList() {
			zc.stats.reset()
		}
		out = zk.ConnStatsReset
	case "dirs":
		// One directory holds coord's snapshots and its log, as a
		// ZooKeeper dataDir without a dataLogDir of its own: both sizes
		// are its size.
		size := dirSize(f.cfg.DataDir)
		out = zk.FormatDirs(size, size)
	case "gtmk":
		out = zk.FormatTraceMask(0)
	default:
		out = zk.NotWhitelisted(cmd)
	}
	nc.Write([]byte(out))
}

// DefaultFourLetterWords is the whitelist of a server not told otherwise
// (Config.FourLetterWords, coord -4lw-whitelist): as small as ZooKeeper
// 3.8's default, which serves srvr alone, plus the one word health probes
// send. Neither word names a client, a session, a path or the host:
//   - srvr: ZooKeeper's default whitelist, which always holds it: tools
//     read a server's mode and zxid from it (zkServer.sh status).
//   - ruok: the health probe of ZooKeeper's operators (echo ruok | nc,
//     Kubernetes liveness probes, monitoring checks); it answers "imok"
//     and nothing else.
//
// coord's own health checks (coord health, the Dockerfile's and
// docker-compose's) ask HTTP /health and need no word. Every other word
// (cons, dump, wchc, wchp, envi, stat, mntr, conf, ...) reveals sessions,
// client addresses, paths or the host, or resets counters (srst, crst): it
// answers ZooKeeper's "<word> is not executed because it is not in the
// whitelist." until it is listed, or "*" lists them all.
func DefaultFourLetterWords() []string { return []string{"srvr", "ruok"} }

// fourLetterAllowed is ZooKeeper 3.8's FourLetterCommands.isEnabled: the
// words the whitelist lists ("*": every word), and always srvr and, with
// read-only mode on, isro (ZooKeeper adds both whatever its whitelist says:
// zkServer.sh reads srvr, and a client connected to a read-only server asks
// isro to find a read-write one).
func fourLetterAllowed(whitelist []string, readOnlyMode bool, cmd string) bool {
	if cmd == "srvr" || cmd == "isro" && readOnlyMode {
		return true
	}
	for _, w := range whitelist {
		if w = strings.TrimSpace(w); w == "*" || w == cmd {
			return true
		}
	}
	return false
}

// mode is the server state as ZooKeeper names it.
func (f *Frontend) mode() string {
	switch f.srv.Role() {
	case "leader":
		if f.srv.Members() <= 1 {
			return "standalone"
		}
		return "leader"
	case "observer":
		return "observer"
	}
	return "follower"
}

func (f *Frontend) serverStats() *zk.ServerStats {
	v := f.srv.View()
	zs := f.stats
	lat := zs.latency()
	var outstanding int64
	for _, zc := range f.connList() {
		outstanding += int64(zc.c.Outstanding())
	}
	st := &zk.ServerStats{
		Version: Version, LatencyMin: lat.minimum(), LatencyAvg: lat.average(), LatencyMax: lat.max,
		Received: zs.received.Load(), Sent: zs.sent.Load(), Connections: int(f.conns.Load()), Outstanding: outstanding,
		Zxid: int64(v.LastZxid()), Mode: f.mode(), NodeCount: v.NodeCount(),
		ProposalLast: -1, ProposalMin: -1, ProposalMax: -1,
	}
	if f.srv.ReadOnly() {
		st.ReadOnly, st.Mode = true, "read-only"
	}
	return st
}

// consList lists the ZooKeeper port's sessions, then self, the connection
// that asked (as ZooKeeper lists it: a four-letter word's connection has
// sent nothing yet and reads nothing more).
func (f *Frontend) consList(self net.Conn) []zk.ConnStats {
	var out []zk.ConnStats
	for _, zc := range f.connList() {
		out = append(out, zc.stats.cons(zc.nc.RemoteAddr(), zc.c.ID(), zc.c.Timeout(), zc.c.Outstanding(), f.cfg.Started))
	}
	return append(out, zk.ConnStats{RemoteAddr: self.RemoteAddr().String(), Received: 1})
}

func (f *Frontend) monitorStats() *zk.MonitorStats {
	st := f.serverStats()
	v := f.srv.View()
	_, _, total := f.sess.Watches().Stats()
	var eph int64
	for _, info := range v.Sessions() {
		eph += int64(info.Ephemerals)
	}
	return &zk.MonitorStats{
		Version: Version, ServerState: st.Mode, AvgLatency: st.LatencyAvg, MaxLatency: st.LatencyMax, MinLatency: st.LatencyMin,
		PacketsReceived: st.Received, PacketsSent: st.Sent, NumAliveConnections: f.conns.Load(), OutstandingRequests: st.Outstanding,
		Uptime:     time.Since(f.cfg.Started).Milliseconds(),
		ZnodeCount: int64(v.NodeCount()), WatchCount: int64(total), EphemeralsCount: eph,
		GlobalSessions: int64(len(v.Sessions())), OpenFileDescriptorCount: -1, MaxFileDescriptorCount: -1,
		LastClientResponseSize: -1, MaxClientResponseSize: -1, MinClientResponseSize: -1,
	}
}

// confInfo is conf: coord's own settings under ZooKeeper's names. The
// data and log directory are both coord's data directory (see dirs).
// For a server of a cluster (not standalone) the quorum part follows
// /zookeeper/config (Server.Quorum), as does serverId, this server's
// number there.
func (f *Frontend) confInfo() *zk.ConfInfo {
	size := dirSize(f.cfg.DataDir)
	c := &zk.ConfInfo{
		ClientPort: listenerPort(f.lis), SecureClientPort: -1, DataDir: f.cfg.DataDir, DataDirSize: size,
		DataLogDir: f.cfg.DataDir, DataLogSize: size, TickTime: int(f.cfg.Tick.Milliseconds()),
		MaxClientCnxns: f.cfg.MaxClientConns, MinSessionTimeout: int(f.cfg.MinSessionTimeout.Milliseconds()),
		MaxSessionTimeout: int(f.cfg.MaxSessionTimeout.Milliseconds()), ClientPortListenBacklog: -1,
	}
	if f.secureLis != nil {
		c.SecureClientPort = listenerPort(f.secureLis)
	}
	var q *zk.QuorumConf
	c.ServerID, q = f.srv.Quorum()
	if f.mode() != "standalone" {
		c.Quorum = q
	}
	return c
}

// listenerPort is the port lis listens on (0 without one).
func listenerPort(lis net.Listener) int {
	if lis == nil {
		return 0
	}
	if a, ok := lis.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

func envInfo() []zk.EnvEntry {
	host, _ := os.Hostname()
	wd, _ := os.Getwd()
	return []zk.EnvEntry{
		{Key: "zookeeper.version", Value: Version},
		{Key: "host.name", Value: host},
		{Key: "go.version", Value: runtime.Version()},
		{Key: "os.name", Value: runtime.GOOS},
		{Key: "os.arch", Value: runtime.GOARCH},
		{Key: "user.dir", Value: wd},
	}
}

func (f *Frontend) dumpInfo() *zk.DumpInfo {
	v := f.srv.View()
	d := &zk.DumpInfo{Learner: f.srv.Role() != "leader"}
	for _, info := range v.Sessions() {
		d.LearnerSessions = append(d.LearnerSessions, zk.SessionTimeout{Session: info.ID, Timeout: info.Timeout})
		if paths := v.GetEphemerals(info.ID, "/"); len(paths) > 0 {
			d.Ephemerals = append(d.Ephemerals, zk.SessionEphemerals{Session: info.ID, Paths: paths})
		}
	}
	return d
}

// dirSize sums the sizes of the files under dir, in every subdirectory (the
// wal's segments, the snapshots), as ZooKeeper sums its files' lengths: a
// preallocated file counts whole.
func dirSize(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
