package zk

import (
	"strings"
	"testing"
)

// Expected texts are written out from ZooKeeper 3.8's command classes
// (StatCommand, ServerStats.toString, ServerCnxn.dumpConnectionInfo,
// MonitorCommand, dumpConf, WatchManager, ExpiryQueue.dump, ...).

const testVersion = "3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC"

func checkText(t *testing.T, name, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n--- got ---\n%s\n--- want ---\n%s\n(got %q)", name, got, want, got)
	}
}

func testConns() []ConnStats {
	return []ConnStats{
		{RemoteAddr: "127.0.0.1:52762", InterestOps: 1, Queued: 0, Received: 5, Sent: 5, SessionID: 0x100000001,
			LastOp: "GETD", Established: 1700000000123, Timeout: 30000, LastCxid: 4, LastZxid: 0x100000015,
			LastResp: 1700000001000, LastLatency: 0, MinLatency: 0, AvgLatency: 1, MaxLatency: 3},
		{RemoteAddr: "10.0.0.2:40000", InterestOps: 0, Received: 1},
		{RemoteAddr: "10.0.0.3:40001", InterestOps: 5, Queued: 2, Received: 1, Sent: 1, SessionID: 0x200000001,
			LastOp: "NA", Established: 1700000000000, Timeout: 4000, LastCxid: -1, LastZxid: -1},
	}
}

func TestFormatSrvrAndStat(t *testing.T) {
	s := ServerStats{Version: testVersion, LatencyMin: 0, LatencyAvg: 0.5, LatencyMax: 12, Received: 120, Sent: 119,
		Connections: 2, Outstanding: 0, Zxid: 0x100000015, Mode: "follower", NodeCount: 7}
	body := `Latency min/avg/max: 0/0.5/12
Received: 120
Sent: 119
Connections: 2
Outstanding: 0
Zxid: 0x100000015
Mode: follower
Node count: 7
`
	checkText(t, "srvr follower", FormatSrvr(&s), "Zookeeper version: "+testVersion+"\n"+body)

	leader := s
	leader.Mode, leader.ProposalLast, leader.ProposalMin, leader.ProposalMax = "leader", 36, 32, 120
	checkText(t, "srvr leader", FormatSrvr(&leader), "Zookeeper version: "+testVersion+"\n"+
		strings.Replace(body, "follower", "leader", 1)+"Proposal sizes last/min/max: 36/32/120\n")

	ro := s
	ro.ReadOnly, ro.Mode = true, "read-only"
	checkText(t, "srvr read-only", FormatSrvr(&ro), "Zookeeper version: "+testVersion+
		"\nREAD-ONLY mode; serving only read-only clients\n"+strings.Replace(body, "follower", "read-only", 1))

	checkText(t, "stat", FormatStat(&s, testConns()[:2]), "Zookeeper version: "+testVersion+`
Clients:
 /127.0.0.1:52762[1](queued=0,recved=5,sent=5)
 /10.0.0.2:40000[0](queued=0,recved=1,sent=0)

`+body)
}

func TestFormatCons(t *testing.T) {
	want := ` /127.0.0.1:52762[1](queued=0,recved=5,sent=5,sid=0x100000001,lop=GETD,est=1700000000123,to=30000,lcxid=0x4,lzxid=0x100000015,lresp=1700000001000,llat=0,minlat=0,avglat=1,maxlat=3)
 /10.0.0.2:40000[0](queued=0,recved=1,sent=0)
 /10.0.0.3:40001[5](queued=2,recved=1,sent=1,sid=0x200000001,lop=NA,est=1700000000000,to=4000,lzxid=0xffffffffffffffff,lresp=0,llat=0,minlat=0,avglat=0,maxlat=0)

`
	checkText(t, "cons", FormatCons(testConns()), want)
	checkText(t, "cons empty", FormatCons(nil), "\n")
}

func TestFormatMntr(t *testing.T) {
	m := MonitorStats{Version: testVersion, ServerState: "leader", PeerState: "leading - broadcast",
		AvgLatency: 0.1235, MaxLatency: 9, MinLatency: 0, PacketsReceived: 100, PacketsSent: 99,
		NumAliveConnections: 3, OutstandingRequests: 1, Uptime: 123456, ZnodeCount: 8, WatchCount: 2,
		EphemeralsCount: 1, ApproximateDataSize: 512, GlobalSessions: 3, LocalSessions: 0,
		OpenFileDescriptorCount: 120, MaxFileDescriptorCount: 1048576, ConnectionDropProbability: 0,
		LastClientResponseSize: 16, MaxClientResponseSize: 400, MinClientResponseSize: -1,
		Leader: &LeaderStats{Learners: 2, SyncedFollowers: 2, SyncedNonVotingFollowers: 0, PendingSyncs: 0,
			LeaderUptime: 100000, LastProposalSize: 36, MaxProposalSize: 120, MinProposalSize: 32},
		SyncedObservers: 1,
		Extra: []MonitorValue{{"fsync_threshold_exceed_count", int64(0)}, {"avg_commit_propagation_latency", 0.0001},
			{"coord_role", "voter"}, {"nothing", nil}},
	}
	want := "zk_version\t" + testVersion + `
zk_server_state	leader
zk_peer_state	leading - broadcast
zk_avg_latency	0.1235
zk_max_latency	9
zk_min_latency	0
zk_packets_received	100
zk_packets_sent	99
zk_num_alive_connections	3
zk_outstanding_requests	1
zk_uptime	123456
zk_znode_count	8
zk_watch_count	2
zk_ephemerals_count	1
zk_approximate_data_size	512
zk_global_sessions	3
zk_local_sessions	0
zk_open_file_descriptor_count	120
zk_max_file_descriptor_count	1048576
zk_connection_drop_probability	0.0
zk_last_client_response_size	16
zk_max_client_response_size	400
zk_min_client_response_size	-1
zk_outstanding_tls_handshake	0
zk_auth_failed_count	0
zk_non_mtls_remote_conn_count	0
zk_non_mtls_local_conn_count	0
zk_learners	2
zk_synced_followers	2
zk_synced_non_voting_followers	0
zk_synced_observers	1
zk_pending_syncs	0
zk_leader_uptime	100000
zk_last_proposal_size	36
zk_max_proposal_size	120
zk_min_proposal_size	32
zk_fsync_threshold_exceed_count	0
zk_avg_commit_propagation_latency	1.0E-4
zk_coord_role	voter
zk_nothing	null
`
	checkText(t, "mntr leader", FormatMntr(&m), want)

	// A standalone server: no peer_state, no leader or follower gauges.
	m.ServerState, m.PeerState, m.Extra = "standalone", "", nil
	got := FormatMntr(&m)
	for _, absent := range []string{"zk_peer_state", "zk_learners", "zk_synced_observers"} {
		if strings.Contains(got, absent) {
			t.Errorf("standalone mntr has %s", absent)
		}
	}
	if !strings.HasPrefix(got, "zk_version\t"+testVersion+"\nzk_server_state\tstandalone\nzk_avg_latency\t0.1235\n") {
		t.Errorf("standalone mntr starts %q", got[:120])
	}
	m.ServerState = "follower"
	if got := FormatMntr(&m); !strings.HasSuffix(got, "zk_non_mtls_local_conn_count\t0\nzk_synced_observers\t1\n") {
		t.Errorf("follower mntr ends %q", got[len(got)-80:])
	}
}

func TestFormatConf(t *testing.T) {
	c := ConfInfo{ClientPort: 2181, SecureClientPort: -1, DataDir: "/data/version-2", DataDirSize: 1024,
		DataLogDir: "/datalog/version-2", DataLogSize: 2048, TickTime: 2000, MaxClientCnxns: 60,
		MinSessionTimeout: 4000, MaxSessionTimeout: 40000, ClientPortListenBacklog: -1, ServerID: 0}
	standalone := `clientPort=2181
secureClientPort=-1
dataDir=/data/version-2
dataDirSize=1024
dataLogDir=/datalog/version-2
dataLogSize=2048
tickTime=2000
maxClientCnxns=60
minSessionTimeout=4000
maxSessionTimeout=40000
clientPortListenBacklog=-1
serverId=0
`
	checkText(t, "conf standalone", FormatConf(&c), standalone)

	c.ServerID = 1
	c.Quorum = &QuorumConf{InitLimit: 5, SyncLimit: 2, ElectionAlg: 3, ElectionPort: "3888", QuorumPort: "2888",
		PeerType: 0, ConfigVersion: 0x100000000, Members: []QuorumMember{
			{ID: 1, Host: "zk1", QuorumPort: 2888, ElectionPort: 3888, ClientAddr: "0.0.0.0:2181"},
			{ID: 2, Host: "zk2", QuorumPort: 2888, ElectionPort: 3888, ClientAddr: "0.0.0.0:2181"},
			{ID: 3, Host: "zk3", QuorumPort: 2888, ElectionPort: 3888, Observer: true},
		}}
	quorum := strings.Replace(standalone, "serverId=0", "serverId=1", 1) + `initLimit=5
syncLimit=2
electionAlg=3
electionPort=3888
quorumPort=2888
peerType=0
membership: 
server.1=zk1:2888:3888:participant;0.0.0.0:2181
server.2=zk2:2888:3888:participant;0.0.0.0:2181
server.3=zk3:2888:3888:observer
version=100000000`
	checkText(t, "conf quorum", FormatConf(&c), quorum)
}

func TestFormatSmallCommands(t *testing.T) {
	checkText(t, "ruok", FormatRuok(), "imok")
	checkText(t, "isro rw", FormatIsro(false), "rw")
	checkText(t, "isro ro", FormatIsro(true), "ro")
	checkText(t, "whitelist", NotWhitelisted("stat"), "stat is not executed because it is not in the whitelist.\n")
	checkText(t, "dirs", FormatDirs(4096, 67108880), "datadir_size: 4096\nlogdir_size: 67108880\n")
	checkText(t, "gtmk", FormatTraceMask(1330), "1330")
	checkText(t, "envi", FormatEnvi([]EnvEntry{{"zookeeper.version", testVersion}, {"host.name", "zk1"},
		{"java.compiler", "<NA>"}, {"os.memory.free", "118MB"}}),
		"Environment:\nzookeeper.version="+testVersion+"\nhost.name=zk1\njava.compiler=<NA>\nos.memory.free=118MB\n")
	checkText(t, "wchs", FormatWchs(WatchSummary{Connections: 2, Paths: 3, Total: 4}),
		"2 connections watching 3 paths\nTotal watches:4\n")
	checkText(t, "wchc", FormatWchc([]SessionWatches{{0x100000001, []string{"/a", "/b"}}, {0x100000002, []string{"/a"}}}),
		"0x100000001\n\t/a\n\t/b\n0x100000002\n\t/a\n\n")
	checkText(t, "wchp", FormatWchp([]PathWatches{{"/a", []int64{0x100000001, 0x100000002}}, {"/b", []int64{0x100000001}}}),
		"/a\n\t0x100000001\n\t0x100000002\n/b\n\t0x100000001\n\n")
	checkText(t, "wchc empty", FormatWchc(nil), "\n")
	checkText(t, "hash", FormatHash([]ZxidDigest{{0x100000003, 1234567890123}, {0x100000004, -5}}),
		"100000003: 1234567890123\n100000004: -5\n")
	if !strings.HasSuffix(StatsReset, "\n") || !strings.HasSuffix(ConnStatsReset, "\n") {
		t.Error("srst/crst answers end with a newline")
	}
}

func TestFormatDump(t *testing.T) {
	d := DumpInfo{
		SessionBuckets: []SessionBucket{{Expire: 1700000004000, Sessions: []int64{0x100000001}},
			{Expire: 1700000010000, Sessions: []int64{0x100000002, 0x100000003}}},
		Ephemerals: []SessionEphemerals{{Session: 0x100000001, Paths: []string{"/lock/n0000000001"}}},
		ConnectionBuckets: []ConnectionBucket{{Expire: 1700000004000,
			Conns: []ConnRef{{RemoteAddr: "127.0.0.1:52762", SessionID: 0x100000001}}}},
	}
	checkText(t, "dump leader", FormatDump(&d), `SessionTracker dump:
Session Sets (2)/(3):
1 expire at Tue Nov 14 22:13:24 UTC 2023:
	0x100000001
2 expire at Tue Nov 14 22:13:30 UTC 2023:
	0x100000002
	0x100000003
ephemeral nodes dump:
Sessions with Ephemerals (1):
0x100000001:
	/lock/n0000000001
Connections dump:
Connections Sets (1)/(1):
1 expire at Tue Nov 14 22:13:24 UTC 2023:
	ip: /127.0.0.1:52762 sessionId: 0x100000001
`)
	learner := DumpInfo{Learner: true, LearnerSessions: []SessionTimeout{{0x100000001, 30000}, {0x100000002, 4000}}}
	checkText(t, "dump follower", FormatDump(&learner), `SessionTracker dump:
Global Sessions(2):
0x100000001	30000ms
0x100000002	4000ms
ephemeral nodes dump:
Sessions with Ephemerals (0):
Connections dump:
`)
}

func TestJavaDouble(t *testing.T) {
	cases := map[float64]string{0: "0.0", 1: "1.0", 0.5: "0.5", 0.1235: "0.1235", 1234.5678: "1234.5678",
		1e-4: "1.0E-4", 5e-4: "5.0E-4", 0.001: "0.001", 1.2345e7: "1.2345E7", 1e7: "1.0E7",
		9999999: "9999999.0", -0.5: "-0.5", 12.0: "12.0", 2.5e-5: "2.5E-5"}
	for f, want := range cases {
		if got := javaDouble(f); got != want {
			t.Errorf("javaDouble(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestJavaDate(t *testing.T) {
	// Checked against date -u '+%a %b %d %H:%M:%S UTC %Y'.
	cases := map[int64]string{
		0:             "Thu Jan 01 00:00:00 UTC 1970",
		951782400000:  "Tue Feb 29 00:00:00 UTC 2000",
		-1000:         "Wed Dec 31 23:59:59 UTC 1969",
		-1:            "Wed Dec 31 23:59:59 UTC 1969",
		4102444800000: "Fri Jan 01 00:00:00 UTC 2100",
		1709251199999: "Thu Feb 29 23:59:59 UTC 2024",
	}
	for ms, want := range cases {
		if got := javaDate(ms); got != want {
			t.Errorf("javaDate(%d) = %q, want %q", ms, got, want)
		}
	}
}
