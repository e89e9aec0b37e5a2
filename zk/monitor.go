package zk

import (
	"strconv"
	"strings"
)

// mntr, the watch commands (wchs, wchc, wchp), dump and hash.

// MonitorStats is what mntr prints: one "zk_<key>\t<value>" line per value.
// ZooKeeper prints version, server_state and (for a quorum member)
// peer_state first, then its metrics in hash-map order; this prints the
// gauges ZooKeeperServer registers in registration order, then the role's
// own, then Extra. Monitoring tools key on the names, not the order.
type MonitorStats struct {
	Version     string // full version, as ServerStats.Version
	ServerState string // "standalone", "leader", "follower", "observer", "read-only"
	// PeerState is QuorumPeer's detailed state, e.g. "following - broadcast"
	// or "leading - broadcast"; "" for a standalone server (not printed).
	PeerState string

	AvgLatency                float64 // ms, printed as a Java double
	MaxLatency                int64
	MinLatency                int64
	PacketsReceived           int64
	PacketsSent               int64
	NumAliveConnections       int64
	OutstandingRequests       int64
	Uptime                    int64 // ms
	ZnodeCount                int64
	WatchCount                int64
	EphemeralsCount           int64
	ApproximateDataSize       int64 // bytes: paths plus data
	GlobalSessions            int64
	LocalSessions             int64
	OpenFileDescriptorCount   int64
	MaxFileDescriptorCount    int64
	ConnectionDropProbability float64
	LastClientResponseSize    int64 // bytes, -1 before any
	MaxClientResponseSize     int64
	MinClientResponseSize     int64
	OutstandingTLSHandshake   int64
	AuthFailedCount           int64
	NonMTLSRemoteConnCount    int64
	NonMTLSLocalConnCount     int64

	// Leader holds the gauges only a leader registers; printed when
	// ServerState is "leader".
	Leader *LeaderStats
	// SyncedObservers is printed for a leader and a follower.
	SyncedObservers int64

	// Extra values are printed last, in order (ZooKeeper's counters and
	// summaries, or coord's own).
	Extra []MonitorValue
}

// LeaderStats are the leader's mntr gauges.
type LeaderStats struct {
	Learners                 int64
	SyncedFollowers          int64
	SyncedNonVotingFollowers int64
	PendingSyncs             int64
	LeaderUptime             int64 // ms
	LastProposalSize         int64 // bytes, -1 before any
	MaxProposalSize          int64
	MinProposalSize          int64
}

// MonitorValue is one extra mntr line. Value is printed as ZooKeeper prints
// a metric: integers as they are, floats as Java doubles, strings as they
// are; a nil Value prints "null".
type MonitorValue struct {
	Key   string // without the "zk_" prefix
	Value any
}

// FormatMntr answers mntr.
func FormatMntr(m *MonitorStats) string {
	var b strings.Builder
	line := func(k, v string) { b.WriteString("zk_" + k + "\t" + v + "\n") }
	i := func(k string, v int64) { line(k, itoa(v)) }
	line("version", m.Version)
	line("server_state", m.ServerState)
	if m.PeerState != "" {
		line("peer_state", m.PeerState)
	}
	line("avg_latency", javaDouble(m.AvgLatency))
	i("max_latency", m.MaxLatency)
	i("min_latency", m.MinLatency)
	i("packets_received", m.PacketsReceived)
	i("packets_sent", m.PacketsSent)
	i("num_alive_connections", m.NumAliveConnections)
	i("outstanding_requests", m.OutstandingRequests)
	i("uptime", m.Uptime)
	i("znode_count", m.ZnodeCount)
	i("watch_count", m.WatchCount)
	i("ephemerals_count", m.EphemeralsCount)
	i("approximate_data_size", m.ApproximateDataSize)
	i("global_sessions", m.GlobalSessions)
	i("local_sessions", m.LocalSessions)
	i("open_file_descriptor_count", m.OpenFileDescriptorCount)
	i("max_file_descriptor_count", m.MaxFileDescriptorCount)
	line("connection_drop_probability", javaDouble(m.ConnectionDropProbability))
	i("last_client_response_size", m.LastClientResponseSize)
	i("max_client_response_size", m.MaxClientResponseSize)
	i("min_client_response_size", m.MinClientResponseSize)
	i("outstanding_tls_handshake", m.OutstandingTLSHandshake)
	i("auth_failed_count", m.AuthFailedCount)
	i("non_mtls_remote_conn_count", m.NonMTLSRemoteConnCount)
	i("non_mtls_local_conn_count", m.NonMTLSLocalConnCount)
	if l := m.Leader; l != nil && m.ServerState == "leader" {
		i("learners", l.Learners)
		i("synced_followers", l.SyncedFollowers)
		i("synced_non_voting_followers", l.SyncedNonVotingFollowers)
		i("synced_observers", m.SyncedObservers)
		i("pending_syncs", l.PendingSyncs)
		i("leader_uptime", l.LeaderUptime)
		i("last_proposal_size", l.LastProposalSize)
		i("max_proposal_size", l.MaxProposalSize)
		i("min_proposal_size", l.MinProposalSize)
	} else if m.ServerState == "follower" {
		i("synced_observers", m.SyncedObservers)
	}
	for _, x := range m.Extra {
		line(x.Key, monitorValue(x.Value))
	}
	return b.String()
}

func monitorValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case int:
		return strconv.Itoa(x)
	case int32:
		return itoa(int64(x))
	case int64:
		return itoa(x)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return javaDouble(float64(x))
	case float64:
		return javaDouble(x)
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	}
	return "?"
}

// WatchSummary is what wchs prints. ZooKeeper's wchs, wchc and wchp cover
// only the data watches (those of getData and exists, and persistent
// ones), not the child watches: pass the same set for compatible output.
type WatchSummary struct {
	Connections int // connections with at least one watch
	Paths       int // watched paths
	Total       int // watches
}

// FormatWchs answers wchs.
func FormatWchs(s WatchSummary) string {
	return strconv.Itoa(s.Connections) + " connections watching " + strconv.Itoa(s.Paths) +
		" paths\nTotal watches:" + strconv.Itoa(s.Total) + "\n"
}

// SessionWatches is one session's watched paths, for wchc.
type SessionWatches struct {
	Session int64
	Paths   []string
}

// FormatWchc answers wchc: each session, then its paths indented by a tab.
func FormatWchc(w []SessionWatches) string {
	var b strings.Builder
	for _, s := range w {
		b.WriteString("0x" + hexID(s.Session) + "\n")
		for _, p := range s.Paths {
			b.WriteString("\t" + p + "\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// PathWatches is one path's watching sessions, for wchp.
type PathWatches struct {
	Path     string
	Sessions []int64
}

// FormatWchp answers wchp: each path, then its sessions indented by a tab.
func FormatWchp(w []PathWatches) string {
	var b strings.Builder
	for _, p := range w {
		b.WriteString(p.Path + "\n")
		for _, s := range p.Sessions {
			b.WriteString("\t0x" + hexID(s) + "\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// DumpInfo is what dump prints: sessions, ephemerals and connections.
type DumpInfo struct {
	// A leader or standalone server prints its session expiry queue
	// (SessionBuckets); a follower or observer (Learner true) prints the
	// global sessions with their timeouts instead, sorted by id.
	Learner         bool
	SessionBuckets  []SessionBucket
	LearnerSessions []SessionTimeout
	Ephemerals      []SessionEphemerals
	// ConnectionBuckets is the connection expiry queue; ZooKeeper's NIO
	// server prints it, its Netty server prints nothing (nil here).
	ConnectionBuckets []ConnectionBucket
}

// SessionBucket is the sessions expiring at one deadline.
type SessionBucket struct {
	Expire   int64 // ms since the Unix epoch
	Sessions []int64
}

// SessionTimeout is a session and its timeout in ms.
type SessionTimeout struct {
	Session int64
	Timeout int32
}

// SessionEphemerals is a session's ephemeral paths.
type SessionEphemerals struct {
	Session int64
	Paths   []string
}

// ConnectionBucket is the connections expiring at one deadline.
type ConnectionBucket struct {
	Expire int64 // ms since the Unix epoch
	Conns  []ConnRef
}

// ConnRef names a connection in dump: its "ip:port" and session.
type ConnRef struct {
	RemoteAddr string
	SessionID  int64
}

// FormatDump answers dump. Deadlines are printed as Java's Date.toString in
// UTC, e.g. "Thu Jan 01 00:00:06 UTC 1970".
func FormatDump(d *DumpInfo) string {
	var b strings.Builder
	b.WriteString("SessionTracker dump:\n")
	if d.Learner {
		b.WriteString("Global Sessions(" + strconv.Itoa(len(d.LearnerSessions)) + "):\n")
		for _, s := range d.LearnerSessions {
			b.WriteString("0x" + hexID(s.Session) + "\t" + strconv.Itoa(int(s.Timeout)) + "ms\n")
		}
	} else {
		b.WriteString("Session ")
		n := 0
		for _, s := range d.SessionBuckets {
			n += len(s.Sessions)
		}
		expiryHeader(&b, len(d.SessionBuckets), n)
		for _, s := range d.SessionBuckets {
			b.WriteString(strconv.Itoa(len(s.Sessions)) + " expire at " + javaDate(s.Expire) + ":\n")
			for _, id := range s.Sessions {
				b.WriteString("\t0x" + hexID(id) + "\n")
			}
		}
	}
	b.WriteString("ephemeral nodes dump:\n")
	b.WriteString("Sessions with Ephemerals (" + strconv.Itoa(len(d.Ephemerals)) + "):\n")
	for _, e := range d.Ephemerals {
		b.WriteString("0x" + hexID(e.Session) + ":\n")
		for _, p := range e.Paths {
			b.WriteString("\t" + p + "\n")
		}
	}
	b.WriteString("Connections dump:\n")
	if d.ConnectionBuckets != nil {
		b.WriteString("Connections ")
		n := 0
		for _, c := range d.ConnectionBuckets {
			n += len(c.Conns)
		}
		expiryHeader(&b, len(d.ConnectionBuckets), n)
		for _, c := range d.ConnectionBuckets {
			b.WriteString(strconv.Itoa(len(c.Conns)) + " expire at " + javaDate(c.Expire) + ":\n")
			for _, r := range c.Conns {
				b.WriteString("\tip: /" + r.RemoteAddr + " sessionId: 0x" + hexID(r.SessionID) + "\n")
			}
		}
	}
	return b.String()
}

func expiryHeader(b *strings.Builder, sets, elems int) {
	b.WriteString("Sets (" + strconv.Itoa(sets) + ")/(" + strconv.Itoa(elems) + "):\n")
}

// ZxidDigest is one entry of ZooKeeper's digest log, for hash.
type ZxidDigest struct {
	Zxid   int64
	Digest int64
}

// FormatHash answers hash: "<zxid hex>: <digest>" per line.
func FormatHash(ds []ZxidDigest) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(hexID(d.Zxid) + ": " + itoa(d.Digest) + "\n")
	}
	return b.String()
}

var (
	weekdays = [...]string{"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"} // 1970-01-01 was a Thursday
	months   = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// javaDate formats ms since the epoch as java.util.Date.toString in UTC
// ("EEE MMM dd HH:mm:ss zzz yyyy"), without the time package (zk takes no
// clock and needs no zone data).
func javaDate(ms int64) string {
	secs := ms / 1000
	if ms%1000 < 0 {
		secs--
	}
	days := secs / 86400
	rem := secs % 86400
	if rem < 0 {
		rem += 86400
		days--
	}
	wd := days % 7
	if wd < 0 {
		wd += 7
	}
	y, m, d := civil(days)
	two := func(v int64) string {
		if v < 10 {
			return "0" + itoa(v)
		}
		return itoa(v)
	}
	return weekdays[wd] + " " + months[m-1] + " " + two(d) + " " + two(rem/3600) + ":" + two(rem/60%60) + ":" +
		two(rem%60) + " UTC " + itoa(y)
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil, inverted).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
