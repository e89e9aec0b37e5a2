package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// workloads are the loads coordbench knows, in the order "all" runs them.
var workloads = []string{"create", "set", "get", "mixed", "watch"}

// config is everything the flags say. parseConfig fills and checks it; the
// rest of the program only reads it.
type config struct {
	protocol  string   // "grpc" (coord's Go client) or "zk" (go-zookeeper)
	servers   []string // addresses of an existing cluster, in the protocol's terms
	local     int      // start a coord cluster of this many voters instead
	zookeeper int      // start an Apache ZooKeeper ensemble of this many servers instead
	observers int      // -local, -zookeeper: this many observers besides the voters
	coordBin  string   // coord binary for -local; built when empty
	basePort  int      // server i: raft basePort+i, gRPC basePort+100+i
	keep      bool     // keep the local cluster's directory (data and logs)
	srvLog    string   // the servers' -log-level
	srvFlags  string   // more flags for every server
	stages    string   // "local", or HTTP addresses whose stage histograms to print per run
	sessionOn string   // -local, -zookeeper: "leader" or "follower" puts session 0 there ("" the list's order)

	zkJava           string        // -zookeeper: the java binary
	zkClasspath      string        // -zookeeper: ZooKeeper's jars
	zkHeap           string        // -zookeeper: -Xmx
	zkJVMFlags       string        // -zookeeper: more JVM flags
	zkSessionTimeout time.Duration // -protocol zk: requested session timeout

	workloads   []string
	sessions    []int
	inflight    []int
	runs        []runSpec // what to run, in order: -runs, or workloads × sessions × inflight
	duration    time.Duration
	warmup      time.Duration
	prewarm     time.Duration // unreported load before the first run (a JVM's JIT, caches)
	opTimeout   time.Duration // how long a run waits for stragglers after its end
	dataSize    int
	parents     int
	keys        int     // znodes prepared for set, get and mixed
	readPercent float64 // mixed: share of getData, in percent
	watchKeys   int     // watch: znodes watched (one writer each)

	failover         bool
	flood            int
	floodStall       time.Duration
	failoverRounds   int
	failoverSessions int
	failoverSettle   time.Duration // steady load before each kill
	failoverTimeout  time.Duration // give up on a round after this long
	big              int           // -big: znodes to load before the restart rounds
	bigRounds        int
	bigWipe          bool
	snapshotDuring   bool
	freshness        bool // -freshness: how soon other servers show an acknowledged write
	freshnessWrites  int  // -freshness: acknowledged writes measured
	scale            int  // -scale: sessions opened at once (scale.go)
	scaleWatches     int
	scaleTimeout     time.Duration
	scaleCPUWindow   time.Duration
	scalePhases      map[string]bool // -scale-phases: which of move, storm, expiry run
	floor            int             // -floor: samples of each part of the write floor (floor.go)

	jsonPath string // "" none, "-" stdout, else a file
	verbose  bool
}

// parseConfig reads the command line. It returns flag.ErrHelp for -h and an
// error naming the flag for anything it cannot use.
func parseConfig(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("coordbench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "usage: coordbench (-servers host:port,... | -local N | -zookeeper N) [flags]")
		fmt.Fprintln(out, "Loads a coord cluster (over gRPC or ZooKeeper's protocol) or an Apache ZooKeeper ensemble and reports throughput and latency; see the package comment.")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.protocol, "protocol", "grpc", "client protocol: grpc (coord's Go client) or zk (ZooKeeper's wire protocol, github.com/go-zookeeper/zk)")
	servers := fs.String("servers", "", "addresses of an existing cluster, comma separated: gRPC ones, or ZooKeeper-protocol ones with -protocol zk")
	fs.IntVar(&c.local, "local", 0, "start a loopback cluster of `N` real coord voters (ids s1..sN) instead of -servers")
	fs.IntVar(&c.zookeeper, "zookeeper", 0, "start a loopback Apache ZooKeeper ensemble of `N` servers (Debian's zookeeper package; implies -protocol zk) instead of -servers")
	fs.IntVar(&c.observers, "observers", 0, "-local, -zookeeper: also start `N` observers (coord: raft non-voters; ZooKeeper: peerType=observer), numbered after the voters; sessions spread over them too")
	fs.StringVar(&c.coordBin, "coord-bin", "", "coord binary for -local (default: go build ./cmd/coord into the temp dir; run from the module root)")
	fs.IntVar(&c.basePort, "base-port", 3880, "-local: server i listens for raft on base+i, gRPC on base+100+i, gossip on base+200+i, HTTP on base+300+i, ZooKeeper (if coord has -zk-addr) on base+400+i; -zookeeper: quorum on base+i, election on base+100+i, clients on base+400+i")
	fs.BoolVar(&c.keep, "keep", false, "-local, -zookeeper: keep the cluster's temp directory (data dirs and server logs)")
	fs.StringVar(&c.srvLog, "server-log-level", "warn", "-local, -zookeeper: the servers' log level (their logs go to files in the temp directory)")
	fs.StringVar(&c.srvFlags, "server-flags", "", "-local: more flags for every server, space separated (e.g. \"-raft-timeout 150ms\")")
	fs.StringVar(&c.zkJava, "zk-java", "java", "-zookeeper: the java binary")
	fs.StringVar(&c.zkClasspath, "zk-classpath", "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar", "-zookeeper: ZooKeeper's classpath (Debian's zookeeper.jar names its dependencies in its manifest; slf4j-simple logs to the server's log file)")
	fs.StringVar(&c.zkHeap, "zk-heap", "1g", "-zookeeper: each JVM's maximum heap (-Xmx)")
	fs.StringVar(&c.zkJVMFlags, "zk-jvm-flags", "", "-zookeeper: more JVM flags for every server, space separated")
	fs.DurationVar(&c.zkSessionTimeout, "zk-session-timeout", 10*time.Second, "-protocol zk: the session timeout the client asks for")
	wl := fs.String("workloads", "set", "comma separated: create, set, get, mixed, watch, or all")
	sess := fs.String("sessions", "1,16,64", "session counts to run, comma separated")
	infl := fs.String("inflight", "1", "requests outstanding per session, comma separated (each count is a run)")
	runsFlag := fs.String("runs", "", "explicit runs instead of -workloads × -sessions × -inflight, in order, comma separated: workload:SESSIONSxINFLIGHT (e.g. set:64x8; :S alone means inflight 1; watch:S)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per run")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured load before each run")
	fs.DurationVar(&c.prewarm, "prewarm", 0, "unreported load (set and get, 16 sessions × 8) once before the first run, e.g. so a JVM has compiled its hot paths")
	fs.DurationVar(&c.opTimeout, "op-timeout", 5*time.Second, "how long a request may take before it counts as failed")
	fs.IntVar(&c.dataSize, "data-size", 100, "bytes of data per create and setData")
	fs.IntVar(&c.parents, "parents", 8, "parent znodes the created and prepared znodes are spread under")
	fs.IntVar(&c.keys, "keys", 1000, "znodes prepared for set, get and mixed")
	fs.Float64Var(&c.readPercent, "read-percent", 90, "mixed: percent of requests that are getData (the rest setData)")
	fs.IntVar(&c.watchKeys, "watch-keys", 4, "watch: znodes every watcher session watches, each with its own writer session (-sessions counts the watchers; -inflight does not apply)")
	fs.IntVar(&c.flood, "flood", 0, "-local, -zookeeper, -protocol zk: one session pipelines this many getData requests without reading the replies; report server 1's memory")
	fs.DurationVar(&c.floodStall, "flood-stall", 5*time.Second, "-flood: stop when the client's writes block this long")
	fs.BoolVar(&c.failover, "failover", false, "-local, -zookeeper: measure recovery from SIGKILL of the leader under a write load")
	fs.IntVar(&c.failoverRounds, "failover-rounds", 5, "leader kills (the killed server is restarted between rounds)")
	fs.IntVar(&c.failoverSessions, "failover-sessions", 4, "sessions writing (one request in flight each) during -failover")
	fs.DurationVar(&c.failoverSettle, "failover-settle", 2*time.Second, "steady write load before each kill")
	fs.DurationVar(&c.failoverTimeout, "failover-timeout", 30*time.Second, "give up on a round when no write succeeds this long after the kill")
	fs.IntVar(&c.big, "big", 0, "-local, -zookeeper, -protocol zk: load `N` znodes (-data-size data, 20-byte names), report each server's RSS (coord: live heap, raft log, snapshots), then SIGKILL a follower -big-rounds times, start it at once, and time the kill to its first getData (coord: with the log entries it had applied past its newest snapshot, which the restart replays); -runs or -workloads given too run after that, against the big tree")
	fs.IntVar(&c.bigRounds, "big-rounds", 3, "-big: follower kills")
	fs.BoolVar(&c.snapshotDuring, "snapshot-during", false, "-local or -zookeeper: each run (-runs, -workloads) reports the snapshots every server wrote during it; with -local, every coord server is also asked for one (Admin.Snapshot), all at once, a second into the measured window, in every run but the first of several (a baseline) (ZooKeeper writes one every 50,000-100,000 transactions by itself)")
	fs.BoolVar(&c.bigWipe, "big-wipe", false, "-big: after the kills, SIGKILL a follower once more, delete its state (coord: its data directory, started with -rebuild; ZooKeeper: version-2) and time the kill to its first getData and to its catching up")
	fs.BoolVar(&c.freshness, "freshness", false, "ZooKeeper's protocol only (-protocol zk or -zookeeper): one session on the leader sets a znode, and right after each ack one session on every follower and observer reads it until it shows the write; report the share of first reads that already show it and the ack-to-visible lag (freshness.go)")
	fs.IntVar(&c.freshnessWrites, "freshness-writes", 1500, "-freshness: acknowledged writes measured (each is read on every other server)")
	fs.IntVar(&c.scale, "scale", 0, "-local or -zookeeper: open `N` ZooKeeper-protocol sessions (a light client of this program's own, ~10 KB each) and measure connect rate, memory and idle CPU per session, -scale-watches watches (bytes per watch), fan-out of one change to N watchers, a connect storm after SIGKILL of the leader and the expiry of half the sessions at once (scale.go)")
	fs.IntVar(&c.scaleWatches, "scale-watches", 0, "-scale: watches in all (default 10 per session), spread over the sessions")
	fs.DurationVar(&c.scaleTimeout, "scale-timeout", 30*time.Second, "-scale: the session timeout asked for")
	fs.IntVar(&c.floor, "floor", 0, "after the runs, take `N` samples each of a durable append (write + fdatasync, in the cluster's directory) and a loopback TCP round trip, and print what one replicated write cannot go below on this machine (floor.go)")
	fs.DurationVar(&c.scaleCPUWindow, "scale-cpu-window", 10*time.Second, "-scale: how long the servers' CPU is measured, idle")
	scalePhases := fs.String("scale-phases", "move,storm,expiry", "-scale: the phases after the watches, comma separated: move (every session's connection closed, the session taken to another server with its watches re-registered by SetWatches2, before the fan-out, which then shows they were), storm (SIGKILL of the leader) and expiry (half the sessions expiring at once)")
	fs.StringVar(&c.jsonPath, "json", "", "also write one JSON object per run to this `file` (- for stdout)")
	fs.StringVar(&c.sessionOn, "session-on", "", "-local, -zookeeper: `leader` or follower: start the list of servers (and so session 0, the one session of a 1x1 run) at the leader or at a voter after it")
	fs.StringVar(&c.stages, "stages", "", "print each run's write-path stage breakdown from the servers' /metrics (coord_write_stage_seconds): \"local\" with -local, or their HTTP addresses, comma separated")
	fs.BoolVar(&c.verbose, "v", false, "log client and cluster events to stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var err error
	c.servers = splitList(*servers)
	started := c.local + c.zookeeper // servers coordbench starts
	switch {
	case c.protocol != "grpc" && c.protocol != "zk":
		return c, fmt.Errorf("-protocol %q: want grpc or zk", c.protocol)
	case c.local < 0 || c.zookeeper < 0:
		return c, errors.New("-local and -zookeeper take a server count >= 1")
	case (len(c.servers) > 0 && started > 0) || (c.local > 0 && c.zookeeper > 0):
		return c, errors.New("-servers, -local and -zookeeper exclude each other")
	case len(c.servers) == 0 && started == 0:
		return c, errors.New("give -servers host:port,..., -local N or -zookeeper N (N >= 1)")
	case c.local > 9 || c.zookeeper > 9:
		return c, fmt.Errorf("-local/-zookeeper %d: at most 9 servers", started)
	case c.observers < 0 || (c.observers > 0 && started == 0):
		return c, errors.New("-observers N needs N >= 0 and -local or -zookeeper")
	case started+c.observers > 9:
		return c, fmt.Errorf("-local/-zookeeper %d with -observers %d: at most 9 servers", started, c.observers)
	case c.zookeeper > 0 && set["protocol"] && c.protocol != "zk":
		return c, errors.New("-zookeeper speaks only ZooKeeper's protocol: -protocol zk")
	case started == 0 && (set["coord-bin"] || set["base-port"] || set["keep"] || set["server-log-level"]):
		return c, errors.New("-coord-bin, -base-port, -keep and -server-log-level apply only with -local or -zookeeper")
	case c.local == 0 && (set["coord-bin"] || set["server-flags"]):
		return c, errors.New("-coord-bin and -server-flags apply only with -local")
	case c.zookeeper == 0 && (set["zk-java"] || set["zk-classpath"] || set["zk-heap"] || set["zk-jvm-flags"]):
		return c, errors.New("-zk-java, -zk-classpath, -zk-heap and -zk-jvm-flags apply only with -zookeeper")
	case c.basePort < 1 || c.basePort+500 > 65535:
		return c, fmt.Errorf("-base-port %d: want 1..65035", c.basePort)
	}
	if c.zookeeper > 0 {
		c.protocol = "zk"
	}
	if set["zk-session-timeout"] && c.protocol != "zk" {
		return c, errors.New("-zk-session-timeout applies only with -protocol zk")
	}
	if c.zkSessionTimeout < 100*time.Millisecond || c.zkSessionTimeout > time.Hour {
		return c, fmt.Errorf("-zk-session-timeout %v: want 100ms..1h", c.zkSessionTimeout)
	}
	if c.zkHeap == "" || strings.ContainsAny(c.zkHeap, " \t") {
		return c, fmt.Errorf("-zk-heap %q: want a JVM size such as 1g", c.zkHeap)
	}
	// -failover alone runs only the failover measurement unless
	// -workloads is given too.
	if (c.failover || c.flood > 0 || c.big > 0 || c.freshness || c.scale > 0) && !set["workloads"] {
		c.workloads = nil
	} else if c.workloads, err = parseWorkloads(*wl); err != nil {
		return c, err
	}
	if c.sessions, err = parseCounts("sessions", *sess, 10000); err != nil {
		return c, err
	}
	if c.inflight, err = parseCounts("inflight", *infl, 1000); err != nil {
		return c, err
	}
	if w := slices.Max(c.sessions) * slices.Max(c.inflight); w > 1<<16 {
		return c, fmt.Errorf("-sessions × -inflight reaches %d request streams: at most 65536", w)
	}
	if *runsFlag != "" {
		if set["workloads"] || set["sessions"] || set["inflight"] {
			return c, errors.New("-runs replaces -workloads, -sessions and -inflight: give one or the other")
		}
		if c.runs, err = parseRuns(*runsFlag); err != nil {
			return c, err
		}
		c.workloads = nil
		for _, r := range c.runs {
			if !slices.Contains(c.workloads, r.workload) {
				c.workloads = append(c.workloads, r.workload)
			}
		}
	} else {
		c.runs = crossRuns(c.workloads, c.sessions, c.inflight)
	}
	switch {
	case c.duration <= 0 || c.duration > time.Hour:
		return c, fmt.Errorf("-duration %v: want > 0 and <= 1h", c.duration)
	case c.warmup < 0 || c.warmup > time.Hour:
		return c, fmt.Errorf("-warmup %v: want 0..1h", c.warmup)
	case c.prewarm < 0 || c.prewarm > time.Hour:
		return c, fmt.Errorf("-prewarm %v: want 0..1h", c.prewarm)
	case c.opTimeout <= 0:
		return c, fmt.Errorf("-op-timeout %v: want > 0", c.opTimeout)
	case c.dataSize < 0 || c.dataSize > 1<<20:
		return c, fmt.Errorf("-data-size %d: want 0..1048576", c.dataSize)
	case c.parents < 1 || c.parents > 1000:
		return c, fmt.Errorf("-parents %d: want 1..1000", c.parents)
	case c.keys < 1 || c.keys > 10_000_000:
		return c, fmt.Errorf("-keys %d: want 1..10000000", c.keys)
	case c.readPercent < 0 || c.readPercent > 100:
		return c, fmt.Errorf("-read-percent %v: want 0..100", c.readPercent)
	case c.watchKeys < 1 || c.watchKeys > 1000 || c.watchKeys > c.keys:
		return c, fmt.Errorf("-watch-keys %d: want 1..1000 and at most -keys", c.watchKeys)
	}
	if c.flood != 0 && (c.flood < 0 || started == 0 || c.protocol != "zk" || c.floodStall <= 0) {
		return c, errors.New("-flood N needs N > 0, -local or -zookeeper, -protocol zk and -flood-stall > 0")
	}
	if c.failover {
		switch {
		case started == 0:
			return c, errors.New("-failover needs -local or -zookeeper: it kills and restarts server processes")
		case started < 3:
			return c, fmt.Errorf("-failover with %d servers: a cluster that survives losing its leader needs >= 3 voters", started)
		case c.failoverRounds < 1 || c.failoverRounds > 100:
			return c, fmt.Errorf("-failover-rounds %d: want 1..100", c.failoverRounds)
		case c.failoverSessions < 1 || c.failoverSessions > 1000:
			return c, fmt.Errorf("-failover-sessions %d: want 1..1000", c.failoverSessions)
		case c.failoverSettle < 0 || c.failoverTimeout <= 0:
			return c, errors.New("-failover-settle must be >= 0 and -failover-timeout > 0")
		}
	}
	if c.big != 0 && (c.big < 1 || c.big > 100_000_000 || started == 0 || c.protocol != "zk" || c.bigRounds < 1 || c.bigRounds > 100) {
		return c, errors.New("-big N needs 1 <= N <= 100000000, -local or -zookeeper, -protocol zk and -big-rounds 1..100")
	}
	if c.snapshotDuring && started == 0 {
		return c, errors.New("-snapshot-during needs -local or -zookeeper")
	}
	if c.bigWipe && c.big == 0 {
		return c, errors.New("-big-wipe needs -big")
	}
	if c.sessionOn != "" && (c.sessionOn != "leader" && c.sessionOn != "follower" || started == 0) {
		return c, fmt.Errorf("-session-on %q: want leader or follower, with -local or -zookeeper", c.sessionOn)
	}
	if c.floor < 0 || c.floor > 1_000_000 {
		return c, errors.New("-floor N needs 0 <= N <= 1000000")
	}
	if c.observers > 0 && (c.failover || c.big > 0) {
		return c, errors.New("-observers does not go with -failover or -big (they kill and restart followers and voters only)")
	}
	if c.freshness && c.protocol != "zk" {
		return c, errors.New("-freshness speaks only ZooKeeper's protocol (the same client for coord and ZooKeeper): -protocol zk")
	}
	if set["freshness-writes"] && !c.freshness {
		return c, errors.New("-freshness-writes applies only with -freshness")
	}
	if c.freshnessWrites < 1 || c.freshnessWrites > 1_000_000 {
		return c, fmt.Errorf("-freshness-writes %d: want 1..1000000", c.freshnessWrites)
	}
	if c.scale != 0 {
		switch {
		case c.scale < 2 || c.scale > 1_000_000 || started == 0 || c.protocol != "zk":
			return c, errors.New("-scale N needs 2 <= N <= 1000000, -local or -zookeeper and -protocol zk")
		case c.scaleWatches < 0 || c.scaleWatches > 100_000_000:
			return c, fmt.Errorf("-scale-watches %d: want 0..100000000", c.scaleWatches)
		case c.scaleTimeout < 4*time.Second || c.scaleTimeout > 40*time.Second:
			return c, fmt.Errorf("-scale-timeout %v: want 4s..40s (ZooKeeper's default bounds)", c.scaleTimeout)
		case c.scaleCPUWindow <= 0 || c.scaleCPUWindow > 10*time.Minute:
			return c, fmt.Errorf("-scale-cpu-window %v: want > 0 and <= 10m", c.scaleCPUWindow)
		}
		if c.scaleWatches == 0 {
			c.scaleWatches = 10 * c.scale
		}
		c.scalePhases = map[string]bool{}
		for _, ph := range strings.Split(*scalePhases, ",") {
			switch ph = strings.TrimSpace(ph); ph {
			case "move", "storm", "expiry":
				c.scalePhases[ph] = true
			case "":
			default:
				return c, fmt.Errorf("-scale-phases: unknown phase %q (want move, storm, expiry)", ph)
			}
		}
	} else if set["scale-watches"] || set["scale-timeout"] || set["scale-cpu-window"] || set["scale-phases"] {
		return c, errors.New("-scale-watches, -scale-timeout, -scale-cpu-window and -scale-phases apply only with -scale")
	}
	c.jsonPath = strings.TrimSpace(c.jsonPath)
	return c, nil
}

// runSpec is one run: a workload with so many sessions, each with so many
// requests in flight (watch: sessions are the watchers, inflight is 1).
type runSpec struct {
	workload string
	sessions int
	inflight int
}

// crossRuns is every workload × sessions × inflight, in that order; watch
// runs once per session count.
func crossRuns(wls []string, sessions, inflight []int) []runSpec {
	var out []runSpec
	for _, wl := range wls {
		for _, s := range sessions {
			if wl == "watch" {
				out = append(out, runSpec{wl, s, 1})
				continue
			}
			for _, k := range inflight {
				out = append(out, runSpec{wl, s, k})
			}
		}
	}
	return out
}

// parseRuns reads -runs: "create:1x1,set:64x8,get:16,watch:64".
func parseRuns(s string) ([]runSpec, error) {
	var out []runSpec
	for _, item := range splitList(s) {
		wl, counts, ok := strings.Cut(item, ":")
		if !ok || !slices.Contains(workloads, wl) {
			return nil, fmt.Errorf("-runs: %q is not workload:SESSIONSxINFLIGHT with a workload of %s", item, strings.Join(workloads, ", "))
		}
		ss, ks, hasK := strings.Cut(counts, "x")
		r := runSpec{workload: wl, inflight: 1}
		var err error
		if r.sessions, err = strconv.Atoi(ss); err != nil || r.sessions < 1 || r.sessions > 10000 {
			return nil, fmt.Errorf("-runs: %q: sessions must be a whole number in 1..10000", item)
		}
		if hasK {
			if wl == "watch" {
				return nil, fmt.Errorf("-runs: %q: watch takes only a watcher count (watch:S)", item)
			}
			if r.inflight, err = strconv.Atoi(ks); err != nil || r.inflight < 1 || r.inflight > 1000 {
				return nil, fmt.Errorf("-runs: %q: inflight must be a whole number in 1..1000", item)
			}
		}
		if r.sessions*r.inflight > 1<<16 {
			return nil, fmt.Errorf("-runs: %q: at most 65536 request streams", item)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("-runs: empty")
	}
	return out, nil
}

// parseWorkloads reads "set,get" or "all"; each name at most once.
func parseWorkloads(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, w := range splitList(s) {
		if w == "all" {
			for _, a := range workloads {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
			continue
		}
		known := false
		for _, a := range workloads {
			known = known || a == w
		}
		if !known {
			return nil, fmt.Errorf("-workloads: unknown workload %q (want %s or all)", w, strings.Join(workloads, ", "))
		}
		if seen[w] {
			return nil, fmt.Errorf("-workloads: %q given twice", w)
		}
		seen[w] = true
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("-workloads: empty")
	}
	return out, nil
}

// parseCounts reads a comma separated list of positive integers <= max.
func parseCounts(name, s string, max int) ([]int, error) {
	parts := splitList(s)
	if len(parts) == 0 {
		return nil, fmt.Errorf("-%s: empty", name)
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > max {
			return nil, fmt.Errorf("-%s: %q is not a whole number in 1..%d", name, p, max)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
