package zk

import (
	"strconv"
	"strings"
)

// The output of the four-letter words, laid out exactly as ZooKeeper 3.8
// prints it (PrintWriter, "\n" line ends). The server gathers the numbers;
// these functions only format them. Where ZooKeeper iterates a hash map the
// order is the caller's: pass sorted input for stable output.

// Fixed answers.
const (
	// NotServing is what most commands print (with a newline) while the
	// server is not serving requests; FormatRuok is the exception.
	NotServing = "This ZooKeeper instance is not currently serving requests"
	// StatsReset answers srst, ConnStatsReset crst.
	StatsReset     = "Server stats reset.\n"
	ConnStatsReset = "Connection stats reset.\n"
)

// FormatRuok answers ruok: "imok", without a newline, whether or not the
// server is serving.
func FormatRuok() string { return "imok" }

// FormatIsro answers isro: "ro" or "rw" without a newline ("null" when not
// serving, which the caller prints itself).
func FormatIsro(readOnly bool) string {
	if readOnly {
		return "ro"
	}
	return "rw"
}

// ServingOnly reports whether cmd answers NotServing (and a newline) while
// the server is not serving requests, as when it has lost its leader: srvr,
// stat, cons, mntr, conf, dump, the wch* words, srst, crst and dirs. ruok,
// envi and gtmk answer as usual; isro says "null".
func ServingOnly(cmd string) bool {
	switch cmd {
	case "srvr", "stat", "cons", "mntr", "conf", "dump", "wchs", "wchc", "wchp", "srst", "crst", "dirs":
		return true
	}
	return false
}

// NotWhitelisted is ZooKeeper's answer to a known command that is not in
// zookeeper.4lw.commands.whitelist.
func NotWhitelisted(cmd string) string {
	return cmd + " is not executed because it is not in the whitelist.\n"
}

// FormatTraceMask answers gtmk and stmk: the mask in decimal, no newline.
func FormatTraceMask(mask int64) string { return strconv.FormatInt(mask, 10) }

// FormatDirs answers dirs: the bytes used by the snapshot and log
// directories.
func FormatDirs(dataDirSize, logDirSize int64) string {
	return "datadir_size: " + strconv.FormatInt(dataDirSize, 10) + "\nlogdir_size: " +
		strconv.FormatInt(logDirSize, 10) + "\n"
}

// ServerStats is what srvr and stat print (StatCommand and ServerStats).
type ServerStats struct {
	// Version is the full version line, as ZooKeeper's
	// "3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC".
	// Tools parse the leading x.y.z.
	Version    string
	ReadOnly   bool    // adds ZooKeeper's read-only mode line
	LatencyMin int64   // ms
	LatencyAvg float64 // ms; ZooKeeper rounds it to 4 decimals and prints it as a Java double
	LatencyMax int64   // ms
	Received   int64   // packets
	Sent       int64   // packets
	// Connections is the number of client connections alive.
	Connections int
	Outstanding int64 // requests queued
	Zxid        int64 // last applied
	// Mode is the server state: "standalone", "leader", "follower",
	// "observer" or "read-only". zkServer.sh status reads this line.
	Mode      string
	NodeCount int
	// ProposalLast/Min/Max are the leader's proposal sizes in bytes (-1 when
	// there were none); printed only when Mode is "leader".
	ProposalLast, ProposalMin, ProposalMax int64
}

func (s *ServerStats) header(b *strings.Builder) {
	b.WriteString("Zookeeper version: " + s.Version + "\n")
	if s.ReadOnly {
		b.WriteString("READ-ONLY mode; serving only read-only clients\n")
	}
}

func (s *ServerStats) body(b *strings.Builder) {
	b.WriteString("Latency min/avg/max: " + itoa(s.LatencyMin) + "/" + javaDouble(s.LatencyAvg) + "/" +
		itoa(s.LatencyMax) + "\n")
	b.WriteString("Received: " + itoa(s.Received) + "\n")
	b.WriteString("Sent: " + itoa(s.Sent) + "\n")
	b.WriteString("Connections: " + strconv.Itoa(s.Connections) + "\n")
	b.WriteString("Outstanding: " + itoa(s.Outstanding) + "\n")
	b.WriteString("Zxid: 0x" + hexID(s.Zxid) + "\n")
	b.WriteString("Mode: " + s.Mode + "\n")
	b.WriteString("Node count: " + strconv.Itoa(s.NodeCount) + "\n")
	if s.Mode == "leader" {
		b.WriteString("Proposal sizes last/min/max: " + itoa(s.ProposalLast) + "/" + itoa(s.ProposalMin) +
			"/" + itoa(s.ProposalMax) + "\n")
	}
}

// FormatSrvr answers srvr.
func FormatSrvr(s *ServerStats) string {
	var b strings.Builder
	s.header(&b)
	s.body(&b)
	return b.String()
}

// FormatStat answers stat: srvr plus the connections, briefly.
func FormatStat(s *ServerStats, conns []ConnStats) string {
	var b strings.Builder
	s.header(&b)
	b.WriteString("Clients:\n")
	for i := range conns {
		conns[i].write(&b, true)
		b.WriteString("\n")
	}
	b.WriteString("\n")
	s.body(&b)
	return b.String()
}

// ConnStats is one client connection, as cons and stat print it
// (ServerCnxn.dumpConnectionInfo).
type ConnStats struct {
	// RemoteAddr is "ip:port"; it is printed after a "/" as Java prints a
	// socket address, e.g. " /127.0.0.1:52762[1](...)".
	RemoteAddr string
	// InterestOps is the NIO interest set: 1 while reading, 0 when
	// throttled, 5 with a write pending. Printed in hex.
	InterestOps int
	Queued      int64 // outstanding requests
	Received    int64 // packets
	Sent        int64 // packets
	// SessionID 0 means the handshake is not done; the fields below are
	// printed only for an established session, and only by cons.
	SessionID   int64
	LastOp      string // LastOpName of the last request, "NA" before any
	Established int64  // ms since the Unix epoch
	Timeout     int32  // negotiated session timeout, ms
	LastCxid    int64  // last request xid; below 0 (none yet) is not printed
	LastZxid    int64  // -1 before any reply
	LastResp    int64  // time of the last response, ms
	LastLatency int64  // ms
	MinLatency  int64  // ms
	AvgLatency  int64  // ms, an integer here (total/count)
	MaxLatency  int64  // ms
}

func (c *ConnStats) write(b *strings.Builder, brief bool) {
	b.WriteString(" /" + c.RemoteAddr + "[")
	if c.InterestOps == 0 {
		b.WriteString("0")
	} else {
		b.WriteString(strconv.FormatInt(int64(uint32(c.InterestOps)), 16))
	}
	b.WriteString("](queued=" + itoa(c.Queued) + ",recved=" + itoa(c.Received) + ",sent=" + itoa(c.Sent))
	if !brief && c.SessionID != 0 {
		b.WriteString(",sid=0x" + hexID(c.SessionID) + ",lop=" + c.LastOp + ",est=" + itoa(c.Established) +
			",to=" + strconv.Itoa(int(c.Timeout)))
		if c.LastCxid >= 0 {
			b.WriteString(",lcxid=0x" + hexID(c.LastCxid))
		}
		b.WriteString(",lzxid=0x" + hexID(c.LastZxid) + ",lresp=" + itoa(c.LastResp) + ",llat=" +
			itoa(c.LastLatency) + ",minlat=" + itoa(c.MinLatency) + ",avglat=" + itoa(c.AvgLatency) +
			",maxlat=" + itoa(c.MaxLatency))
	}
	b.WriteString(")")
}

// FormatCons answers cons: every connection in full, then an empty line.
func FormatCons(conns []ConnStats) string {
	var b strings.Builder
	for i := range conns {
		conns[i].write(&b, false)
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String()
}

// EnvEntry is one line of envi. ZooKeeper lists, in this order,
// zookeeper.version, host.name, java.version, java.vendor, java.home,
// java.class.path, java.library.path, java.io.tmpdir, java.compiler, os.name,
// os.arch, os.version, user.name, user.home, user.dir, os.memory.free,
// os.memory.max and os.memory.total ("<NA>" for an unknown value; memory
// as "123MB"). kazoo reads the server version from zookeeper.version.
type EnvEntry struct{ Key, Value string }

// FormatEnvi answers envi.
func FormatEnvi(env []EnvEntry) string {
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, e := range env {
		b.WriteString(e.Key + "=" + e.Value + "\n")
	}
	return b.String()
}

// ConfInfo is what conf prints (ZooKeeperServer.dumpConf and, for a quorum
// member, QuorumZooKeeperServer.dumpConf).
type ConfInfo struct {
	ClientPort              int
	SecureClientPort        int    // -1 when off
	DataDir                 string // ZooKeeper shows its version-2 directories
	DataDirSize             int64
	DataLogDir              string
	DataLogSize             int64
	TickTime                int
	MaxClientCnxns          int
	MinSessionTimeout       int
	MaxSessionTimeout       int
	ClientPortListenBacklog int // -1 for the default
	ServerID                int64
	Quorum                  *QuorumConf // nil for a standalone server
}

// QuorumConf is the quorum part of conf.
type QuorumConf struct {
	InitLimit    int
	SyncLimit    int
	ElectionAlg  int    // 3
	ElectionPort string // ports joined with "|"
	QuorumPort   string
	PeerType     int // 0 participant, 1 observer
	// Members and ConfigVersion make the membership section; a read-only
	// server prints none (Members nil).
	Members       []QuorumMember
	ConfigVersion int64
}

// QuorumMember is one server.N line of the membership.
type QuorumMember struct {
	ID           int64
	Host         string
	QuorumPort   int
	ElectionPort int
	Observer     bool
	ClientAddr   string // "host:port"; "" to leave the client address out
}

// FormatConf answers conf. The membership, when present, ends with
// "version=<hex>" and no newline, as in ZooKeeper.
func FormatConf(c *ConfInfo) string {
	var b strings.Builder
	kv := func(k string, v string) { b.WriteString(k + "=" + v + "\n") }
	kv("clientPort", strconv.Itoa(c.ClientPort))
	kv("secureClientPort", strconv.Itoa(c.SecureClientPort))
	kv("dataDir", c.DataDir)
	kv("dataDirSize", itoa(c.DataDirSize))
	kv("dataLogDir", c.DataLogDir)
	kv("dataLogSize", itoa(c.DataLogSize))
	kv("tickTime", strconv.Itoa(c.TickTime))
	kv("maxClientCnxns", strconv.Itoa(c.MaxClientCnxns))
	kv("minSessionTimeout", strconv.Itoa(c.MinSessionTimeout))
	kv("maxSessionTimeout", strconv.Itoa(c.MaxSessionTimeout))
	kv("clientPortListenBacklog", strconv.Itoa(c.ClientPortListenBacklog))
	kv("serverId", itoa(c.ServerID))
	q := c.Quorum
	if q == nil {
		return b.String()
	}
	kv("initLimit", strconv.Itoa(q.InitLimit))
	kv("syncLimit", strconv.Itoa(q.SyncLimit))
	kv("electionAlg", strconv.Itoa(q.ElectionAlg))
	kv("electionPort", q.ElectionPort)
	kv("quorumPort", q.QuorumPort)
	kv("peerType", strconv.Itoa(q.PeerType))
	if q.Members == nil {
		return b.String()
	}
	b.WriteString("membership: \n")
	for _, m := range q.Members {
		b.WriteString("server." + itoa(m.ID) + "=" + m.Host + ":" + strconv.Itoa(m.QuorumPort) + ":" +
			strconv.Itoa(m.ElectionPort))
		if m.Observer {
			b.WriteString(":observer")
		} else {
			b.WriteString(":participant")
		}
		if m.ClientAddr != "" {
			b.WriteString(";" + m.ClientAddr)
		}
		b.WriteString("\n")
	}
	b.WriteString("version=" + hexID(q.ConfigVersion))
	return b.String()
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// hexID formats v as Java's Long.toHexString: lower case, no leading zeros,
// two's complement for negative values.
func hexID(v int64) string { return strconv.FormatUint(uint64(v), 16) }

// javaDouble formats f as Java's Double.toString: at least one digit after
// the point, and scientific notation ("1.0E-4") outside [1e-3, 1e7).
func javaDouble(f float64) string {
	if f == 0 {
		return "0.0"
	}
	abs := f
	if abs < 0 {
		abs = -abs
	}
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // e.g. 1.2345E+07, 1E-04
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(n)
}
