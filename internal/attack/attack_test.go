package attack_test

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/client"
	"coord/internal/fourletter"
	"coord/internal/testpki"
	"coord/server"
	"coord/server/replica"
	"coord/vocab"
)

// The binaries under attack, built once per test binary.
var bins struct {
	dir     string
	coord   string
	planted string // built on demand: -tags peerplanted
	once    sync.Once
	err     error
}

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "coord-attack-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bins.dir, bins.coord = dir, filepath.Join(dir, "coord")
		if b, err := exec.Command("go", "build", "-o", bins.coord, "coord/cmd/coord").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build coord: %v\n%s", err, b)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

const (
	superUser, superPassword   = "super", "super-secret"
	victimUser, victimPassword = "victim", "victim-secret"
)

// digestID is ZooKeeper's digest id of user:password.
func digestID(user, password string) string {
	h := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(h[:])
}

// node is one coord process.
type node struct {
	id                               string
	raft, grpc, gossip, zk, httpAddr string
	dir, logFile                     string
	args                             []string
	cmd                              *exec.Cmd
	done                             chan struct{}
}

// cluster is three voters of one mode: "plain" (the defaults: a cluster key,
// plaintext client ports) or "tls" (TLS on every client port, -tls-only,
// -tls-client-auth, peer certificates from a peer CA of their own, gossip
// keyed by the cluster key).
type cluster struct {
	t       *testing.T
	mode    string
	bin     string
	nodes   []*node
	keyFile string
	clients *testpki.PKI // -tls-ca: signs the servers' client-port certificate and applications' client certificates
	peers   *testpki.PKI // -peer-ca: signs the servers' peer certificates only
}

// handedOut are the ports freePorts gave this test binary.
var handedOut sync.Map

// freePorts returns n loopback addresses whose ports are free now for TCP
// and UDP (gossip uses both), below Linux's ephemeral range (32768 up), so
// an outgoing connection of another test running meanwhile does not take
// one before its server binds it; a port that is taken anyway makes
// startCluster try again.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for tries := 0; len(addrs) < n; tries++ {
		if tries > 10000 {
			t.Fatal("no free ports")
		}
		port := 20000 + mrand.IntN(12000)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		addrs = append(addrs, addr)
	}
	return addrs
}

func writeKey(t *testing.T, path string) {
	t.Helper()
	key, err := server.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func startCluster(t *testing.T, mode, bin string) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, mode: mode, bin: bin, keyFile: filepath.Join(dir, "cluster.key")}
	writeKey(t, c.keyFile)
	if mode == "tls" {
		c.clients, c.peers = testpki.New(t), testpki.New(t)
	}
	t.Cleanup(c.stop)
	for attempt := 1; ; attempt++ {
		c.launch(dir)
		if c.settled(5 * time.Second) {
			break
		}
		if attempt == 3 {
			t.Fatal("the cluster's servers did not stay up in 3 attempts")
		}
		t.Logf("attempt %d: a server exited at start (a port taken meanwhile?); again on other ports", attempt)
		c.stop()
		c.nodes = nil
	}
	c.waitLeader(30 * time.Second)
	return c
}

// settled reports whether every server is still running after d (one that
// could not bind its ports exits at once).
func (c *cluster) settled(d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, n := range c.nodes {
			select {
			case <-n.done:
				return false
			default:
			}
		}
	}
	return true
}

// launch starts the three voters on fresh ports.
func (c *cluster) launch(dir string) {
	t := c.t
	mode := c.mode
	dir = filepath.Join(dir, fmt.Sprint(time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var peerSpec []string
	for i := range 3 {
		a := freePorts(t, 5)
		n := &node{id: fmt.Sprintf("s%d", i+1), raft: a[0], grpc: a[1], gossip: a[2], zk: a[3], httpAddr: a[4],
			dir: filepath.Join(dir, fmt.Sprintf("s%d", i+1)), done: make(chan struct{})}
		n.logFile = n.dir + ".log"
		c.nodes = append(c.nodes, n)
		peerSpec = append(peerSpec, fmt.Sprintf("%s=%s,%s", n.id, n.raft, n.grpc))
	}
	for i, n := range c.nodes {
		var join []string
		for j, o := range c.nodes {
			if j != i {
				join = append(join, o.gossip)
			}
		}
		args := []string{"-id", n.id, "-data-dir", n.dir, "-raft-addr", n.raft, "-grpc-addr", n.grpc,
			"-gossip-addr", n.gossip, "-zk-addr", n.zk, "-http-addr", n.httpAddr, "-peers", strings.Join(peerSpec, ";"),
			"-bootstrap=true", "-join", strings.Join(join, ","), "-cluster-key-file", c.keyFile,
			"-super-digest", digestID(superUser, superPassword), "-tick", "200ms"}
		if mode == "tls" {
			args = append(args, "-tls-cert", c.clients.CertFile, "-tls-key", c.clients.KeyFile, "-tls-ca", c.clients.CAFile,
				"-tls-client-auth", "-tls-only",
				"-peer-cert", c.peers.CertFile, "-peer-key", c.peers.KeyFile, "-peer-ca", c.peers.CAFile)
		}
		c.start(n, args)
	}
}

func (c *cluster) start(n *node, args []string) {
	c.t.Helper()
	logf, err := os.Create(n.logFile)
	if err != nil {
		c.t.Fatal(err)
	}
	n.args = args
	n.cmd = exec.Command(c.bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { n.cmd.Wait(); logf.Close(); close(n.done) }()
}

// kill9Restart kills n with SIGKILL and starts it again at once with the
// same flags (its key from the same file, its data from its directory).
func (c *cluster) kill9Restart(n *node) {
	c.t.Helper()
	n.cmd.Process.Kill()
	<-n.done
	n.done = make(chan struct{})
	c.start(n, n.args)
}

func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			n.cmd.Process.Kill()
			<-n.done
		}
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			b, _ := os.ReadFile(n.logFile)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			c.t.Logf("--- %s log tail:\n%s", n.id, b)
		}
	}
}

// clientTLS is an application's TLS: it trusts the client CA and presents
// the application's certificate (CN=coord test client), signed by the CA the
// server accepts client certificates from.
func (c *cluster) clientTLS() *tls.Config {
	if c.mode != "tls" {
		return nil
	}
	return c.clients.ClientTLS(true)
}

// dialGRPC connects to a client gRPC port as an application would.
func (c *cluster) dialGRPC(addr string) *grpc.ClientConn {
	c.t.Helper()
	creds := insecure.NewCredentials()
	if cfg := c.clientTLS(); cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// superCtx carries the superuser's admin credentials.
func superCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, api.AdminDigestMetadata, superUser+":"+superPassword)
}

func (c *cluster) waitLeader(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range c.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := api.NewAdminClient(c.dialGRPC(n.grpc)).Status(ctx, &api.StatusRequest{})
			cancel()
			if err != nil || st.LeaderId == "" {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %v", timeout)
}

// session opens a session on any of the servers, or on those of only.
func (c *cluster) session(user, password string, only ...*node) *client.Conn {
	c.t.Helper()
	opts := []client.Option{client.WithSessionTimeout(4 * time.Second), client.WithDigestAuth(user, password)}
	if cfg := c.clientTLS(); cfg != nil {
		opts = append(opts, client.WithTLS(cfg))
	}
	if len(only) == 0 {
		only = c.nodes
	}
	var addrs []string
	for _, n := range only {
		addrs = append(addrs, n.grpc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := client.Connect(ctx, addrs, opts...)
	if err != nil {
		c.t.Fatalf("session as %s: %v", user, err)
	}
	c.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// state is what no attack may change: the victim's protected znode (data,
// version, ACL), its lock (an ephemeral of its session), the victim's
// session, the membership, and no server's raft term taken by a forged
// higher term.
type state struct {
	secret     string
	version    int32
	acl        string
	lockOwner  int64
	members    string
	maxTerm    uint64
	victimSess int64
}

const forgedTerm = 1 << 40

func (c *cluster) observe(super *client.Conn, victim *client.Conn) state {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := super.Sync(ctx, "/secret"); err != nil {
		c.t.Fatalf("sync: %v", err)
	}
	data, st, err := super.Get(ctx, "/secret")
	if err != nil {
		c.t.Fatalf("get /secret as the superuser: %v", err)
	}
	acl, _, err := super.GetACL(ctx, "/secret")
	if err != nil {
		c.t.Fatalf("getACL /secret: %v", err)
	}
	ok, lock, err := super.Exists(ctx, "/locks/victim")
	if err != nil || !ok {
		c.t.Fatalf("the victim's lock /locks/victim is gone (exists %v, %v)", ok, err)
	}
	if victim.State() != client.StateConnected {
		c.t.Fatalf("the victim's session is %v", victim.State())
	}
	s := state{secret: string(data), version: st.Version, acl: fmt.Sprint(acl), lockOwner: lock.EphemeralOwner, victimSess: victim.SessionID()}
	resp, err := api.NewAdminClient(c.dialGRPC(c.nodes[0].grpc)).Members(ctx, &api.MembersRequest{})
	if err != nil {
		c.t.Fatalf("members: %v", err)
	}
	var ms []string
	for _, m := range resp.Members {
		ms = append(ms, m.Id+"="+m.RaftAddr+"/"+m.Role)
	}
	slices.Sort(ms)
	s.members = strings.Join(ms, " ")
	for _, n := range c.nodes {
		st, err := api.NewAdminClient(c.dialGRPC(n.grpc)).Status(ctx, &api.StatusRequest{})
		if err != nil {
			c.t.Fatalf("status of %s: %v", n.id, err)
		}
		s.maxTerm = max(s.maxTerm, st.Term)
	}
	return s
}

// load writes through a session until stopped, counting acknowledged
// writes: the members must go on working while they are attacked.
type load struct {
	ok, failed atomic.Int64
	acked      atomic.Int64 // the last value a write of which was acknowledged
	stop       chan struct{}
	done       chan struct{}
}

func startLoad(conn *client.Conn) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := conn.Set(ctx, "/load", []byte(fmt.Sprint(i)), -1)
			cancel()
			if err != nil {
				l.failed.Add(1)
				time.Sleep(20 * time.Millisecond)
			} else {
				l.ok.Add(1)
				l.acked.Store(int64(i))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return l
}

// attacker is who knocks: a stranger with nothing, an application with its
// CA-signed client certificate (TLS mode), or a process holding another
// cluster's key.
type attacker struct {
	name string
	tls  *tls.Config // the TLS it speaks on the peer port (nil: plaintext)
}

func (c *cluster) attackers(t *testing.T) []attacker {
	wrong := make([]byte, 32)
	rand.Read(wrong)
	auth, err := replica.KeyAuth(wrong)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker does not care who the server is: it checks nothing, so
	// what refuses it is the server's check.
	wrongKey := auth.Client.Clone()
	wrongKey.VerifyPeerCertificate = nil
	as := []attacker{{name: "stranger"}, {name: "wrong cluster key", tls: wrongKey}}
	if c.mode == "tls" {
		cfg := c.clients.ClientTLS(true)
		cfg.InsecureSkipVerify = true // it only wants in
		as = append(as, attacker{name: "client certificate", tls: cfg})
	}
	return as
}

// peerDial opens a connection to a peer port as the attacker, speaking the
// peer plane's framing (a channel byte after the handshake) as a member
// would: the attacker knows the protocol, not the secret.
func (a attacker) peerDial(ctx context.Context, addr string, channel byte) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if a.tls == nil {
		// A stranger without TLS speaks raft's own framing, or gRPC's
		// preface, at once: what reached the open ports before.
		return c, nil
	}
	tc := tls.Client(c, a.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := tc.Write([]byte{channel}); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// attackerStream is raft's stream layer as the attacker.
type attackerStream struct {
	a attacker
	net.Listener
}

func (s attackerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.a.peerDial(ctx, string(addr), 'R')
}

// forgeAppend sends raft AppendEntries with a far higher term and one
// entry, as a would-be leader; nil means the server answered (the attack
// got in).
func forgeAppend(a attacker, target string) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	trans := raft.NewNetworkTransport(attackerStream{a: a, Listener: lis}, 1, 3*time.Second, io.Discard)
	defer trans.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("ghost"), Addr: []byte(lis.Addr().String())},
		Term:      forgedTerm, PrevLogEntry: 0, PrevLogTerm: 0, LeaderCommitIndex: 0,
		Entries: []*raft.Log{{Index: 1, Term: forgedTerm, Type: raft.LogCommand, Data: []byte("forged")}},
	}
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries("s1", raft.ServerAddress(target), req, &resp)
}

// readNotice opens the peer plane's commit-notice channel as the attacker
// and waits for one notice (16 bytes; the leader sends one per batch of the
// load); nil means one arrived (the attack got in).
func readNotice(a attacker, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := a.peerDial(ctx, addr, 'C')
	if err != nil {
		return err
	}
	defer c.Close()
	if a.tls == nil { // a stranger without TLS names the channel in clear
		if _, err := c.Write([]byte{'C'}); err != nil {
			return err
		}
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var buf [16]byte
	_, err = io.ReadFull(c, buf[:])
	return err
}

// peerGRPC calls the Internal and Admin services on a peer port as the
// attacker.
func peerGRPC(a attacker, addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return a.peerDial(ctx, addr, 'G') }))
}

// forward is a forged server-to-server write: a setData of the victim's
// znode as the superuser. nil means the call was answered.
func forward(ctx context.Context, cc *grpc.ClientConn) error {
	stream, err := api.NewInternalClient(cc).Forward(ctx)
	if err != nil {
		return err
	}
	if _, err := stream.Header(); err != nil {
		_, rerr := stream.Recv() // the call's status
		return cmpErr(rerr, err)
	}
	if err := stream.Send(&api.ForwardRequest{}); err != nil {
		_, rerr := stream.Recv() // io.EOF from Send: the status is Recv's
		return cmpErr(rerr, err)
	}
	_, err = stream.Recv()
	return err
}

func cmpErr(first, second error) error {
	if first != nil {
		return first
	}
	return second
}

// outcome is one row of what an attacker got.
type outcome struct{ door, who, got string }

type report struct {
	mu   sync.Mutex
	rows []outcome
}

func (r *report) add(door, who string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := "answered (ATTACK GOT IN)"
	if err != nil {
		got = err.Error()
		if len(got) > 160 {
			got = got[:160] + "..."
		}
	}
	r.rows = append(r.rows, outcome{door, who, got})
}

// refused fails the test unless err is a refusal.
func refused(t *testing.T, r *report, door, who string, err error) {
	t.Helper()
	r.add(door, who, err)
	if err == nil {
		t.Errorf("%s as %s: the call was answered; want it refused", door, who)
	}
}

// wantCode fails the test unless err carries one of codes.
func wantCode(t *testing.T, r *report, door, who string, err error, want ...codes.Code) {
	t.Helper()
	r.add(door, who, err)
	if err == nil {
		t.Errorf("%s as %s: answered; want %v", door, who, want)
		return
	}
	if got := status.Code(err); !slices.Contains(want, got) {
		t.Errorf("%s as %s: %v (code %v); want one of %v", door, who, err, got, want)
	}
}

func TestAttackPlain(t *testing.T) { runSuite(t, "plain") }
func TestAttackTLS(t *testing.T)   { runSuite(t, "tls") }

func runSuite(t *testing.T, mode string) {
	if testing.Short() {
		t.Skip("starts real coord processes")
	}
	c := startCluster(t, mode, bins.coord)
	super := c.session(superUser, superPassword)
	victim := c.session(victimUser, victimPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	victimOnly := []vocab.ACL{{Perms: vocab.PermAll, ID: vocab.Id{Scheme: "digest", ID: digestID(victimUser, victimPassword)}}}
	if _, err := victim.Create(ctx, "/secret", []byte("the victim's secret"), vocab.ModePersistent, victimOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Create(ctx, "/locks", nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Create(ctx, "/locks/victim", []byte("held"), vocab.ModeEphemeral, victimOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Create(ctx, "/load", nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		t.Fatal(err)
	}
	before := c.observe(super, victim)
	l := startLoad(super)
	rep := &report{}

	for _, a := range c.attackers(t) {
		for _, n := range c.nodes {
			// Row 2: raft AppendEntries with a higher term on the raft port.
			refused(t, rep, "raft AppendEntries (raft port)", a.name, forgeAppend(a, n.raft))
			// The commit notices (channel C), while the load writes.
			refused(t, rep, "commit notices (peer port)", a.name, readNotice(a, n.raft))
			// Rows 1, 4, 5: the server-to-server services on the peer port.
			cc, err := peerGRPC(a, n.raft)
			if err != nil {
				t.Fatal(err)
			}
			cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
			refused(t, rep, "Forward (peer port)", a.name, forward(cctx, cc))
			_, err = api.NewInternalClient(cc).Touch(cctx, &api.TouchRequest{Sessions: []int64{victim.SessionID()}})
			refused(t, rep, "Touch (peer port)", a.name, err)
			_, err = api.NewInternalClient(cc).Join(cctx, &api.JoinRequest{Member: &api.Member{Id: "ghost", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:1", Role: "voter"}})
			refused(t, rep, "Join (peer port)", a.name, err)
			// A rebuild request would have the leader remove a voter.
			_, err = api.NewInternalClient(cc).Join(cctx, &api.JoinRequest{Member: &api.Member{Id: "s3", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:1", Role: "voter"}, Rebuild: true})
			refused(t, rep, "Join rebuild (peer port)", a.name, err)
			_, err = api.NewAdminClient(cc).KillSession(cctx, &api.KillSessionRequest{Id: victim.SessionID()})
			refused(t, rep, "Admin KillSession (peer port)", a.name, err)
			ccancel()
			cc.Close()
		}
	}

	// The client gRPC port: no server-to-server method is there, and the
	// admin methods that reveal or change anything want an admin identity.
	who := "stranger"
	if mode == "tls" {
		who = "client certificate"
	}
	for _, n := range c.nodes {
		cc := c.dialGRPC(n.grpc)
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		wantCode(t, rep, "Forward (client port)", who, forward(cctx, cc), codes.Unimplemented)
		_, err := api.NewInternalClient(cc).Touch(cctx, &api.TouchRequest{Sessions: []int64{victim.SessionID()}})
		wantCode(t, rep, "Touch (client port)", who, err, codes.Unimplemented)
		_, err = api.NewInternalClient(cc).Join(cctx, &api.JoinRequest{Member: &api.Member{Id: "ghost", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:1", Role: "voter"}})
		wantCode(t, rep, "Join (client port)", who, err, codes.Unimplemented)
		adm := api.NewAdminClient(cc)
		denied := []codes.Code{codes.Unauthenticated, codes.PermissionDenied}
		snap, err := adm.SaveSnapshot(cctx, &api.SaveSnapshotRequest{})
		if err == nil {
			_, err = snap.Recv()
		}
		wantCode(t, rep, "Admin SaveSnapshot (coordctl snapshot save)", who, err, denied...)
		_, err = adm.Sessions(cctx, &api.SessionsRequest{})
		wantCode(t, rep, "Admin Sessions (coordctl sessions)", who, err, denied...)
		_, err = adm.KillSession(cctx, &api.KillSessionRequest{Id: victim.SessionID()})
		wantCode(t, rep, "Admin KillSession (coordctl sessions kill)", who, err, denied...)
		_, err = adm.AddServer(cctx, &api.AddServerRequest{Id: "ghost", RaftAddr: "127.0.0.1:1"})
		wantCode(t, rep, "Admin AddServer (coordctl add-voter)", who, err, denied...)
		_, err = adm.RemoveServer(cctx, &api.RemoveServerRequest{Id: "s3"})
		wantCode(t, rep, "Admin RemoveServer (coordctl remove)", who, err, denied...)
		_, err = adm.TransferLeadership(cctx, &api.TransferLeadershipRequest{})
		wantCode(t, rep, "Admin TransferLeadership (coordctl move-leader)", who, err, denied...)
		_, err = adm.Snapshot(cctx, &api.SnapshotRequest{})
		wantCode(t, rep, "Admin Snapshot (coordctl snapshot)", who, err, denied...)
		_, err = adm.HashKV(cctx, &api.HashKVRequest{})
		wantCode(t, rep, "Admin HashKV", who, err, denied...)
		// A wrong superuser password is refused too.
		_, err = adm.Sessions(metadata.AppendToOutgoingContext(cctx, api.AdminDigestMetadata, superUser+":wrong"), &api.SessionsRequest{})
		wantCode(t, rep, "Admin Sessions with a wrong password", who, err, codes.PermissionDenied, codes.Unauthenticated)
		ccancel()
	}

	// Row 4, gossip: another cluster's key cannot join the gossip.
	for _, n := range c.nodes {
		refused(t, rep, "gossip join (gossip port)", "wrong cluster key", gossipJoin(t, n.gossip))
	}
	// Row 4, a server process: without a key it refuses to start; with
	// another cluster's key it never becomes a member.
	c.ghostServers(t, rep)

	// Rows 7, 8, 9: four-letter words, pprof, reconfig.
	c.clientPlane(t, rep, who)
	// The console on the HTTP port (docs/console.md).
	c.consoleDoors(t, rep, who, victim.SessionID())

	// Each refusal was counted where an operator sees it.
	for _, n := range c.nodes {
		if v := c.refusedCount(t, n); v == "0" {
			t.Errorf("%s counted no refused peer connection", n.id)
		} else {
			t.Logf("%s: coord_peer_connections_refused_total %s", n.id, v)
		}
	}

	// A member killed with SIGKILL and restarted at once comes back with
	// its key, the clients reconnect, and it refuses strangers as before.
	victimNode := c.nodes[0]
	for _, n := range c.nodes {
		if n.grpc == victim.Server() {
			victimNode = n
		}
	}
	ackedBefore := l.acked.Load()
	c.kill9Restart(victimNode)
	c.waitLeader(30 * time.Second)
	// No acknowledged write is lost: the restarted server, asked directly,
	// holds a value at least as new as the last one acknowledged before
	// the kill.
	direct := c.session(superUser, superPassword, victimNode)
	if _, err := direct.Sync(ctx, "/load"); err != nil {
		t.Fatalf("sync on the restarted %s: %v", victimNode.id, err)
	}
	if data, _, err := direct.Get(ctx, "/load"); err != nil {
		t.Fatalf("get /load on the restarted %s: %v", victimNode.id, err)
	} else if v, _ := strconv.ParseInt(string(data), 10, 64); v < ackedBefore {
		t.Errorf("the restarted %s holds /load=%d, older than the %d acknowledged before the kill", victimNode.id, v, ackedBefore)
	}
	refused(t, rep, "raft AppendEntries after kill -9 and restart", "wrong cluster key", forgeAppend(c.attackers(t)[1], victimNode.raft))

	// The members went on working, and nothing changed.
	okBefore := l.ok.Load()
	time.Sleep(500 * time.Millisecond)
	close(l.stop)
	<-l.done
	if l.ok.Load() == 0 || l.ok.Load() == okBefore {
		t.Errorf("the write load stalled: %d acknowledged, %d failed", l.ok.Load(), l.failed.Load())
	}
	after := c.observe(super, victim)
	if after.maxTerm >= forgedTerm {
		t.Errorf("a server took the forged term: %d", after.maxTerm)
	}
	after.maxTerm, before.maxTerm = 0, 0
	if after != before {
		t.Errorf("the attacks changed the cluster:\nbefore %+v\nafter  %+v", before, after)
	}
	// Every server holds the same state at one index (the superuser may
	// ask: the admin identity works).
	c.sameDigest(t)
	t.Logf("write load during the attacks: %d writes acknowledged, %d failed", l.ok.Load(), l.failed.Load())
	t.Logf("what each attacker got (%s mode):", mode)
	for _, r := range rep.rows {
		t.Logf("  %-50s %-20s %s", r.door, r.who, r.got)
	}
}

// gossipJoin tries to join a server's gossip with another cluster's key.
func gossipJoin(t *testing.T, addr string) error {
	key := make([]byte, 32)
	rand.Read(key)
	mc := memberlist.DefaultLocalConfig()
	mc.Name = "ghost"
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.SecretKey = key
	mc.LogOutput = io.Discard
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Shutdown()
	n, err := ml.Join([]string{addr})
	if err == nil && n > 0 {
		return nil
	}
	if err == nil {
		err = errors.New("no node joined")
	}
	return err
}

// ghostServers starts coord processes that want in: one with -join and no
// key (it must refuse to start, naming the flags) and one with another
// cluster's key (it must never become a member).
func (c *cluster) ghostServers(t *testing.T, rep *report) {
	a := freePorts(t, 5)
	dir := t.TempDir()
	base := []string{"-id", "ghost", "-raft-addr", a[0], "-grpc-addr", a[1], "-gossip-addr", a[2], "-zk-addr", a[3], "-http-addr", a[4],
		"-join", c.nodes[0].gossip}
	out, err := exec.Command(c.bin, append(base, "-data-dir", filepath.Join(dir, "nokey"))...).CombinedOutput()
	if err == nil {
		t.Errorf("a server with -join and no key started")
	} else if !strings.Contains(string(out), "-cluster-key-file") || !strings.Contains(string(out), "-peer-cert") {
		t.Errorf("a server with -join and no key: the error does not name the flags:\n%s", out)
	}
	rep.add("coord -join without a key", "stranger", fmt.Errorf("exit: %v: %s", err, lastLine(out)))

	wrong := filepath.Join(dir, "wrong.key")
	writeKey(t, wrong)
	ghost := &node{id: "ghost", dir: filepath.Join(dir, "wrongkey"), logFile: filepath.Join(dir, "ghost.log"), done: make(chan struct{})}
	c.start(ghost, append(base, "-data-dir", ghost.dir, "-cluster-key-file", wrong))
	defer func() { ghost.cmd.Process.Kill(); <-ghost.done }()
	time.Sleep(4 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := api.NewAdminClient(c.dialGRPC(c.nodes[0].grpc)).Members(ctx, &api.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var joined error = errors.New("not a member after 4 s: its gossip and its join were refused")
	for _, m := range resp.Members {
		if m.Id == "ghost" {
			joined = nil
		}
	}
	refused(t, rep, "coord -join with another cluster's key", "wrong cluster key", joined)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// clientPlane tries the four-letter words that reveal sessions, watches and
// the host, pprof, and an anonymous reconfig naming an address.
func (c *cluster) clientPlane(t *testing.T, rep *report, who string) {
	n := c.nodes[0]
	for _, w := range []string{"cons", "dump", "wchc", "wchp", "envi", "srst", "conf", "mntr", "stat"} {
		out, err := c.fourLetter(n.zk, w)
		if err != nil {
			t.Errorf("4lw %s: %v", w, err)
			continue
		}
		var got error
		if !strings.Contains(out, "is not executed because it is not in the whitelist") {
			got = nil
			t.Errorf("4lw %s answered by default: %q", w, out)
		} else {
			got = errors.New(strings.TrimSpace(out))
		}
		rep.add("4lw "+w+" (ZooKeeper port)", who, got)
	}
	if out, err := c.fourLetter(n.zk, "srvr"); err != nil || !strings.Contains(out, "Mode:") {
		t.Errorf("4lw srvr (open, as ZooKeeper's default): %q, %v", out, err)
	}

	httpc, scheme := c.httpClient()
	resp, err := httpc.Get(scheme + "://" + n.httpAddr + "/debug/pprof/")
	if err != nil {
		t.Errorf("GET /debug/pprof/: %v", err)
	} else {
		resp.Body.Close()
		var got error
		if resp.StatusCode == http.StatusOK {
			t.Errorf("/debug/pprof/ answered 200 without -pprof")
		} else {
			got = errors.New(resp.Status)
		}
		rep.add("GET /debug/pprof/ (HTTP port)", who, got)
	}

	// An anonymous reconfig naming addresses: NoAuth, and nothing dialled.
	var dialled atomic.Int32
	var ports []int
	for range 3 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		ports = append(ports, lis.Addr().(*net.TCPAddr).Port)
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				dialled.Add(1)
				conn.Close()
			}
		}()
	}
	zc := c.zkConn(t, n.zk)
	spec := fmt.Sprintf("server.9=127.0.0.1:%d:%d:observer;127.0.0.1:%d", ports[0], ports[1], ports[2])
	_, err = zc.IncrementalReconfig([]string{spec}, nil, -1)
	rep.add("reconfig adding a server (ZooKeeper port)", "anonymous", err)
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous reconfig: %v, want NoAuth", err)
	}
	time.Sleep(300 * time.Millisecond)
	if dialled.Load() != 0 {
		t.Errorf("an anonymous reconfig made the server dial the address it named (%d connections)", dialled.Load())
	}
}

func (c *cluster) httpClient() (*http.Client, string) {
	httpc := &http.Client{Timeout: 5 * time.Second}
	if c.mode == "tls" {
		httpc.Transport = &http.Transport{TLSClientConfig: c.clientTLS()}
		return httpc, "https"
	}
	return httpc, "http"
}

// refusedCount is a server's coord_peer_connections_refused_total.
func (c *cluster) refusedCount(t *testing.T, n *node) string {
	httpc, scheme := c.httpClient()
	resp, err := httpc.Get(scheme + "://" + n.httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", n.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "coord_peer_connections_refused_total "); ok {
			return v
		}
	}
	t.Fatalf("%s has no coord_peer_connections_refused_total", n.id)
	return ""
}

func (c *cluster) dialZK(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil || c.mode != "tls" {
		return conn, err
	}
	cfg := c.clientTLS()
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

func (c *cluster) fourLetter(addr, word string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var conf *tls.Config
	if c.mode == "tls" {
		conf = c.clientTLS()
		conf.ServerName = "127.0.0.1"
	}
	out, err := fourletter.Ask(ctx, addr, word, fourletter.Options{TLS: conf})
	if out != "" {
		err = nil
	}
	return out, err
}

func (c *cluster) zkConn(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return c.dialZK(ctx, address)
	}
	zc, ev, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithDialer(dialer), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	deadline := time.After(10 * time.Second)
	for zc.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("no ZooKeeper session at %s", addr)
		}
	}
	return zc
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// sameDigest: every server's digest at one applied index is the same.
func (c *cluster) sameDigest(t *testing.T) {
	t.Helper()
	for try := 0; try < 20; try++ {
		var digests []string
		var idx []uint64
		for _, n := range c.nodes {
			ctx, cancel := context.WithTimeout(superCtx(context.Background()), 5*time.Second)
			r, err := api.NewAdminClient(c.dialGRPC(n.grpc)).HashKV(ctx, &api.HashKVRequest{})
			cancel()
			if err != nil {
				t.Fatalf("HashKV as the superuser on %s: %v", n.id, err)
			}
			digests = append(digests, fmt.Sprintf("%x", r.Digest))
			idx = append(idx, r.AppliedIndex)
		}
		if idx[0] == idx[1] && idx[1] == idx[2] {
			if digests[0] != digests[1] || digests[1] != digests[2] {
				t.Fatalf("servers differ at index %d: %v", idx[0], digests)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the servers never answered at one index; digests not compared")
}

// TestPlantedPeerCheckRemoved: with the peer check removed (a binary built
// with -tags peerplanted), the suite's raft and forward attacks get in as a
// wrong cluster key's holder: the checks above would fail.
func TestPlantedPeerCheckRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real coord processes")
	}
	bins.once.Do(func() {
		bins.planted = filepath.Join(bins.dir, "coord-planted")
		if b, err := exec.Command("go", "build", "-tags", "peerplanted", "-o", bins.planted, "coord/cmd/coord").CombinedOutput(); err != nil {
			bins.err = fmt.Errorf("go build -tags peerplanted: %v\n%s", err, b)
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	c := startCluster(t, "plain", bins.planted)
	a := c.attackers(t)[1] // a wrong cluster key
	if err := forgeAppend(a, c.nodes[0].raft); err != nil {
		t.Errorf("planted: raft AppendEntries with a wrong key was refused (%v); the planted bug should let it in", err)
	}
	// ... and the suite's "nothing changed" check sees the forged term.
	st, err := api.NewAdminClient(c.dialGRPC(c.nodes[0].grpc)).Status(context.Background(), &api.StatusRequest{})
	if err != nil || st.Term < forgedTerm {
		t.Errorf("planted: after the forged AppendEntries s1's term is %d (%v); want the forged %d", st.GetTerm(), err, uint64(forgedTerm))
	}
	cc, err := peerGRPC(a, c.nodes[1].raft)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := api.NewInternalClient(cc).Touch(ctx, &api.TouchRequest{}); err != nil {
		t.Errorf("planted: Touch with a wrong key was refused (%v); the planted bug should let it in", err)
	}
}

// TestDefaultServerKey: a server started with no key and no peer
// certificates generates a cluster key in its data directory (mode 0600)
// and says where; a stranger or another key gets nothing on its raft port;
// a second server joins it only with that key.
func TestDefaultServerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real coord processes")
	}
	c := &cluster{t: t, mode: "plain", bin: bins.coord}
	t.Cleanup(c.stop)
	dir := t.TempDir()
	mk := func(id string) *node {
		a := freePorts(t, 5)
		n := &node{id: id, raft: a[0], grpc: a[1], gossip: a[2], zk: a[3], httpAddr: a[4], dir: filepath.Join(dir, id),
			logFile: filepath.Join(dir, id+".log"), done: make(chan struct{})}
		c.nodes = append(c.nodes, n)
		return n
	}
	flags := func(n *node) []string {
		return []string{"-id", n.id, "-data-dir", n.dir, "-raft-addr", n.raft, "-grpc-addr", n.grpc, "-gossip-addr", n.gossip,
			"-zk-addr", n.zk, "-http-addr", n.httpAddr}
	}
	s1 := mk("s1")
	c.start(s1, flags(s1))
	c.waitLeader(30 * time.Second)
	keyFile := filepath.Join(s1.dir, server.ClusterKeyName)
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("no generated key: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("the generated key's mode is %v, want 0600", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(s1.logFile); !strings.Contains(string(b), keyFile) {
		t.Errorf("the log does not say where the generated key is:\n%s", b)
	}
	for _, a := range c.attackers(t) {
		if err := forgeAppend(a, s1.raft); err == nil {
			t.Errorf("a default server's raft port answered %s", a.name)
		}
	}

	// A second server without the key: refuses to start; with it: joins.
	s2 := mk("s2")
	join := append(flags(s2), "-join", s1.gossip)
	if out, err := exec.Command(c.bin, join...).CombinedOutput(); err == nil || !strings.Contains(string(out), "-cluster-key-file") {
		t.Fatalf("a joining server without the key: %v\n%s", err, out)
	}
	c.start(s2, append(join, "-cluster-key-file", keyFile))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := api.NewAdminClient(c.dialGRPC(s1.grpc)).Members(ctx, &api.MembersRequest{})
		cancel()
		if err == nil && len(resp.Members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("s2 with s1's key did not join: %v %v", resp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// consoleDoors tries the console's calls (/ui/api/ on the HTTP port) as a
// stranger: with no sign-in, a forged cookie, an anonymous sign-in and a
// wrong superuser password, none reads the victim's data, sees or closes
// sessions, or changes the membership; a change without the sign-in's
// CSRF token, or from another origin, is refused.
func (c *cluster) consoleDoors(t *testing.T, rep *report, who string, victimSession int64) {
	n := c.nodes[0]
	httpc, scheme := c.httpClient()
	base := scheme + "://" + n.httpAddr + "/ui/api/"
	secret := "the victim's secret"
	secret64 := base64.StdEncoding.EncodeToString([]byte(secret))
	// call sends one request with jar's cookies; it is an error (a
	// refusal) unless the answer is 2xx.
	call := func(jar http.CookieJar, method, path, csrf, body string, hdr ...string) (int, string, error) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-Coord-CSRF", csrf)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		cl := *httpc
		cl.Jar = jar
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), secret64) {
			t.Errorf("console %s %s as %s answered the victim's data: %s", method, path, who, b)
		}
		if resp.StatusCode/100 == 2 {
			return resp.StatusCode, string(b), nil
		}
		return resp.StatusCode, string(b), fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	want := func(door, as string, wantStatus int, status int, err error) {
		t.Helper()
		rep.add("console "+door, as, err)
		if status != wantStatus {
			t.Errorf("console %s as %s: %d (%v), want %d", door, as, status, err, wantStatus)
		}
	}
	victimHex := fmt.Sprintf(`{"id":"0x%x"}`, uint64(victimSession))
	noJar, _ := cookiejar.New(nil)
	st, _, err := call(noJar, "GET", "node?path=/secret", "", "")
	want("GET /ui/api/node (no sign-in)", who, 401, st, err)
	st, _, err = call(noJar, "GET", "sessions", "", "")
	want("GET /ui/api/sessions (no sign-in)", who, 401, st, err)
	st, _, err = call(noJar, "POST", "cluster/remove", "x", `{"id":"s3"}`)
	want("POST /ui/api/cluster/remove (no sign-in)", who, 401, st, err)
	forged, _ := cookiejar.New(nil)
	u, _ := url.Parse(base)
	forged.SetCookies(u, []*http.Cookie{{Name: "coord_console", Value: "forged-sign-in", Path: "/ui/"}})
	st, _, err = call(forged, "GET", "node?path=/secret", "", "")
	want("GET /ui/api/node (forged cookie)", who, 401, st, err)
	st, _, err = call(noJar, "POST", "login", "", `{"user":"","password":""}`)
	want("POST /ui/api/login without the CSRF header", who, 403, st, err)

	for _, as := range []struct{ user, password, name string }{{"", "", "anonymous"}, {superUser, "wrong", "super with a wrong password"}} {
		jar, _ := cookiejar.New(nil)
		st, body, err := call(jar, "POST", "login", "login", fmt.Sprintf(`{"user":%q,"password":%q}`, as.user, as.password))
		if err != nil {
			t.Fatalf("console sign-in as %s: %v", as.name, err)
		}
		var me struct {
			CSRF  string `json:"csrf"`
			Admin bool   `json:"admin"`
		}
		json.Unmarshal([]byte(body), &me)
		if me.Admin || me.CSRF == "" {
			t.Errorf("console sign-in as %s: %d %s", as.name, st, body)
		}
		st, body, _ = call(jar, "GET", "node?path=/secret", "", "")
		var node struct {
			Readable bool `json:"readable"`
		}
		json.Unmarshal([]byte(body), &node)
		var got error
		if node.Readable {
			t.Errorf("console GET /ui/api/node?path=/secret as %s: readable (%d %s)", as.name, st, body)
		} else {
			got = fmt.Errorf("%d, data left out: not readable", st)
		}
		rep.add("console GET /ui/api/node?path=/secret", as.name, got)
		st, _, err = call(jar, "GET", "export?path=/secret", "", "")
		want("GET /ui/api/export?path=/secret", as.name, 403, st, err)
		st, _, err = call(jar, "GET", "sessions", "", "")
		want("GET /ui/api/sessions", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "sessions/close", me.CSRF, victimHex)
		want("POST /ui/api/sessions/close (the victim's)", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "cluster/remove", me.CSRF, `{"id":"s3"}`)
		want("POST /ui/api/cluster/remove", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "cluster/transfer", me.CSRF, `{"id":""}`)
		want("POST /ui/api/cluster/transfer", as.name, 403, st, err)
		// (Deleting /secret itself takes DELETE on /, which is open, over
		// the ZooKeeper port as here: ZooKeeper checks a delete against
		// the parent's ACL.)
		st, _, err = call(jar, "POST", "delete", me.CSRF, `{"path":"/secret/child","version":-1}`)
		want("POST /ui/api/delete /secret/child", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "create", me.CSRF, `{"path":"/secret/ghost"}`)
		want("POST /ui/api/create /secret/ghost", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "set", me.CSRF, `{"path":"/secret","data":"eA==","version":-1}`)
		want("POST /ui/api/set /secret", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "create", "not-the-token", `{"path":"/ghost"}`)
		want("POST /ui/api/create with a wrong CSRF token", as.name, 403, st, err)
		st, _, err = call(jar, "POST", "create", me.CSRF, `{"path":"/ghost"}`, "Origin", "http://evil.example")
		want("POST /ui/api/create from another origin", as.name, 403, st, err)
		call(jar, "POST", "logout", me.CSRF, "")
	}
}
