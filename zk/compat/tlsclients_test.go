package compat

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coord/internal/testcluster"
	"coord/internal/testpki"
	"coord/server"
)

// Real clients over TLS and with SASL: zkCli.sh (the Java client, its
// Netty socket with zookeeper.client.secure=true, PEM key and trust stores,
// a JAAS Client section for SASL) and kazoo (use_ssl), against coord and
// against Apache ZooKeeper 3.8 configured with the same PEM material and
// the same JAAS users.

// tlsServer is one server of the selected target with TLS on its client
// ports, made from one testpki.PKI.
type tlsServer struct {
	name    string
	unified string // TLS and plaintext side by side (coord's -zk-addr; ZooKeeper's clientPort with port unification)
	secure  string // TLS only (coord's -secure-zk-addr; ZooKeeper's secureClientPort)
	pki     *testpki.PKI
	files   tlsFiles
}

// tlsFiles are the PEM files the clients are given. Keys are PKCS#8
// ("PRIVATE KEY"): ZooKeeper's PEM reader takes nothing else, where Go,
// Python and coord also read SEC1 ("EC PRIVATE KEY").
type tlsFiles struct {
	CA          string // the CA certificate (every client's trust store)
	ClientCert  string // client certificate (kazoo's certfile)
	ClientKey   string // its key (kazoo's keyfile)
	ClientStore string // certificate and key in one file (the Java client's PEM key store)
	ServerStore string // the server's certificate and key in one file (ZooKeeper's PEM key store)
}

func writeTLSFiles(t *testing.T, p *testpki.PKI) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	f := tlsFiles{CA: p.CAFile,
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		ClientStore: filepath.Join(dir, "client-store.pem"), ServerStore: filepath.Join(dir, "server-store.pem")}
	pkcs8 := func(key any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Client.Certificate[0]})
	key := pkcs8(p.Client.PrivateKey.(*ecdsa.PrivateKey))
	srvCert, err := os.ReadFile(p.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyPEM, err := os.ReadFile(p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(srvKeyPEM)
	if blk == nil {
		t.Fatalf("no PEM block in %s", p.KeyFile)
	}
	srvKey, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{f.ClientCert: cert, f.ClientKey: key,
		f.ClientStore: append(append([]byte{}, cert...), key...),
		f.ServerStore: append(append([]byte{}, srvCert...), pkcs8(srvKey)...)} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// zkNettyModules puts the two Netty jars Debian's zookeeper.jar manifest
// leaves out (netty-codec, which SslHandler extends, and netty-resolver,
// which the client's Bootstrap needs) on a ZooKeeper JVM whose -cp the
// launcher sets after these options: as modules, which the class path's
// code reads.
var zkNettyModules = []string{"--module-path", "/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar",
	"--add-modules", "io.netty.codec,io.netty.resolver"}

// zkCliNettyClassPath is zkCli.sh's class path with those two jars; a -cp
// in CLIENT_JVMFLAGS comes after the script's own and wins.
const zkCliNettyClassPath = "-cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar"

// newTLSServer starts one server of the selected target with TLS on both
// client ports (client certificates optional, as coord's default;
// ZooKeeper's is to require one, so ssl.clientAuth=want) and, if jaas is
// set, the SASL users of that JAAS file.
func newTLSServer(t *testing.T, jaas string) *tlsServer {
	t.Helper()
	pki := testpki.New(t)
	s := &tlsServer{name: target(), pki: pki, files: writeTLSFiles(t, pki)}
	switch target() {
	case "coord":
		var users map[string]string
		if jaas != "" {
			var err error
			if users, err = server.ReadSASLUsers(jaas); err != nil {
				t.Fatal(err)
			}
		}
		tc := testcluster.New(t, 1, 0, func(cfg *server.Config) {
			pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA)
			cfg.SecureZKAddr = "127.0.0.1:0"
			cfg.SASLUsers = users
		})
		s.unified, s.secure = tc.Servers[0].ZKAddr(), tc.Servers[0].SecureZKAddr()
	case "zookeeper":
		requireZooKeeper(t)
		securePort := freePorts(t, 1)[0]
		o := procOpts{
			zooCfg: []string{"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
				fmt.Sprintf("secureClientPort=%d", securePort), "secureClientPortAddress=127.0.0.1",
				"ssl.keyStore.location=" + s.files.ServerStore, "ssl.keyStore.type=PEM",
				"ssl.trustStore.location=" + s.files.CA, "ssl.trustStore.type=PEM",
				"ssl.clientAuth=want"},
			jvmProps: append([]string{"-Dzookeeper.client.portUnification=true"}, zkNettyModules...),
		}
		if jaas != "" {
			o.jvmProps = append(o.jvmProps, "-Djava.security.auth.login.config="+jaas,
				"-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
		}
		zc := newZKClusterOpts(t, 1, o)
		s.unified, s.secure = zc.Addr(0), fmt.Sprintf("127.0.0.1:%d", securePort)
	default:
		t.Fatalf("%s=%q: want coord or zookeeper", targetEnv, target())
	}
	return s
}

// javaTLSFlags are the Java client's options for TLS with the Netty
// socket and PEM stores (keyStore only for mutual TLS).
func (s *tlsServer) javaTLSFlags(withCert bool) string {
	f := "-Dzookeeper.client.secure=true -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty" +
		" -Dzookeeper.ssl.trustStore.location=" + s.files.CA + " -Dzookeeper.ssl.trustStore.type=PEM"
	if withCert {
		f += " -Dzookeeper.ssl.keyStore.location=" + s.files.ClientStore + " -Dzookeeper.ssl.keyStore.type=PEM"
	}
	return zkCliNettyClassPath + " " + f
}

// zkCliWith runs zkCli.sh as zkCli does, with more JVM options
// (CLIENT_JVMFLAGS), and returns its output whatever its exit status.
func zkCliWith(t *testing.T, addr, jvmFlags, commands string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCliPath, "-server", addr, "-timeout", "10000", "-waitforconnection")
	cmd.Stdin = bytes.NewReader([]byte(commands))
	cmd.Env = append(os.Environ(), "CLIENT_JVMFLAGS=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "+jvmFlags)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("zkCli.sh -server %s (%v, exit %v):\n%s", addr, time.Since(start).Round(time.Millisecond), err, out)
	if ctx.Err() != nil {
		t.Fatalf("zkCli.sh did not finish within 60s")
	}
	return string(out)
}

// wantLines fails unless out holds every block of lines in want, each
// block's lines consecutive.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, strings.TrimRight(l, "\r "))
	}
	norm := "\n" + strings.Join(lines, "\n") + "\n"
	for _, w := range want {
		if !strings.Contains(norm, "\n"+w+"\n") {
			t.Errorf("%s: output lacks %q", what, w)
		}
	}
}

// zkCli.sh over TLS with the Java client's Netty socket: create and get on
// the TLS-only port and on the unified one, whoami without and with a
// client certificate (x509:<subject>), and a node whose ACL names the
// certificate, readable by its holder only.
func TestZkCliTLS(t *testing.T) {
	requireZkCli(t)
	s := newTLSServer(t, "")
	subject := "CN=coord test client"

	out := zkCliWith(t, s.secure, s.javaTLSFlags(false), "create /zkcli-tls x\nget /zkcli-tls\nwhoami\nquit\n")
	wantLines(t, "TLS-only port, no client certificate", out,
		"Created /zkcli-tls", "x", "Auth scheme: User\nip: 127.0.0.1\n")

	out = zkCliWith(t, s.unified, s.javaTLSFlags(true),
		"get /zkcli-tls\nwhoami\ncreate /x509-only c 'x509:"+subject+":cdrwa'\ngetAcl /x509-only\nget /x509-only\nquit\n")
	wantLines(t, "unified port, client certificate", out,
		"x", "Auth scheme: User\nip: 127.0.0.1\nx509: "+subject, "Created /x509-only",
		"'x509,'"+subject+"\n: cdrwa", "c")

	out = zkCliWith(t, s.secure, s.javaTLSFlags(false), "get /x509-only\nquit\n")
	wantLines(t, "TLS without the certificate", out, "Insufficient permission : /x509-only")
}

// kazoo with use_ssl: the TLS-only and the unified port, a client
// certificate giving an x509 identity, and plaintext refused on the
// TLS-only port; against coord also -tls-only, which refuses plaintext on
// -zk-addr.
func TestKazooTLS(t *testing.T) {
	requireKazoo(t)
	s := newTLSServer(t, "")
	runKazoo(t, "kazoo_tls.py", []string{s.secure, s.unified, s.files.CA, s.files.ClientCert, s.files.ClientKey, "CN=coord test client"},
		[]string{"tls_port", "unified_port", "client_certificate", "plaintext_refused"})

	t.Run("tls-only", func(t *testing.T) {
		if target() != "coord" {
			t.Skip("ZooKeeper has no switch that turns plaintext off on clientPort; its TLS-only port is secureClientPort, refused plaintext above")
		}
		only := testcluster.New(t, 1, 0, func(cfg *server.Config) { s.pki.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA); cfg.TLSOnly = true })
		addr := only.Servers[0].ZKAddr()
		runKazoo(t, "kazoo_tls.py", []string{addr, addr, s.files.CA, s.files.ClientCert, s.files.ClientKey, "CN=coord test client"},
			[]string{"tls_port", "client_certificate", "plaintext_refused"})
	})
}

// A rotated certificate serves new connections without a restart, seen by
// kazoo: the server's certificate and key are replaced by ones from another
// CA; a client that trusts only that CA is refused before and served
// after, the server still running.
func TestKazooTLSRotation(t *testing.T) {
	requireKazoo(t)
	if target() != "coord" {
		t.Skip("ZooKeeper 3.8.0 reads the client ports' key store once, at start (its reload, sslQuorumReloadCertFiles, covers quorum TLS only)")
	}
	s := newTLSServer(t, "")
	next := testpki.New(t)
	runKazoo(t, "kazoo_tls.py", []string{"refused", s.secure, next.CAFile}, []string{"refused"})
	for _, f := range [][2]string{{next.KeyFile, s.pki.KeyFile}, {next.CertFile, s.pki.CertFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".new", f[1]); err != nil {
			t.Fatal(err)
		}
	}
	runKazoo(t, "kazoo_tls.py", []string{"rotated", s.secure, next.CAFile}, []string{"rotated"})
}

// The Java client's SASL DIGEST-MD5 login (a JAAS Client section), good
// and bad passwords, with the users of one JAAS Server section given to
// coord (-sasl-users) and to ZooKeeper (its SASL provider): the good login
// holds sasl:bob (whoami), creates a node only sasl:bob may use and reads
// it; an anonymous session may not; a wrong password or an unknown user
// gets AuthFailed and no connection.
func TestZkCliSASL(t *testing.T) {
	requireZkCli(t)
	dir := t.TempDir()
	jaas := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(jaas, []byte(`Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bobpw";
};
`), 0o600); err != nil {
		t.Fatal(err)
	}
	client := func(name, user, password string) string {
		p := filepath.Join(dir, name+".conf")
		err := os.WriteFile(p, []byte(fmt.Sprintf(`Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username=%q
       password=%q;
};
`, user, password)), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return "-Djava.security.auth.login.config=" + p
	}
	s := newTLSServer(t, jaas)

	out := zkCliWith(t, s.unified, client("good", "bob", "bobpw"),
		"whoami\ncreate /sasl-bob b sasl:bob:cdrwa\ngetAcl /sasl-bob\nget /sasl-bob\nquit\n")
	wantLines(t, "good password", out, "WatchedEvent state:SaslAuthenticated type:None path:null",
		"Auth scheme: User\nsasl: bob\nip: 127.0.0.1", "Created /sasl-bob", "'sasl,'bob\n: cdrwa", "b")

	// SASL over TLS with a client certificate: both identities.
	out = zkCliWith(t, s.secure, client("good", "bob", "bobpw")+" "+s.javaTLSFlags(true), "whoami\nget /sasl-bob\nquit\n")
	wantLines(t, "good password over mutual TLS", out, "Auth scheme: User\nsasl: bob\nip: 127.0.0.1\nx509: CN=coord test client", "b")

	out = zkCliWith(t, s.unified, "", "get /sasl-bob\nquit\n")
	wantLines(t, "anonymous", out, "Insufficient permission : /sasl-bob")

	for _, c := range []struct{ name, user, password string }{{"wrong", "bob", "wrong"}, {"unknown", "mallory", "x"}} {
		out := zkCliWith(t, s.unified, client(c.name, c.user, c.password), "whoami\nget /sasl-bob\nquit\n")
		// What zkCli.sh prints for the commands after the refusal depends on
		// timing ("Not connected", or AuthFailed for the path), on both
		// servers; the event and the absence of the data are not.
		wantLines(t, c.name, out, "WatchedEvent state:AuthFailed type:None path:null")
		if strings.Contains(out, "sasl: ") || strings.Contains(out, "SaslAuthenticated") || strings.Contains(out, "\nb\n") {
			t.Errorf("%s: logged in", c.name)
		}
	}
}

// The Java client's SASL login across a crash of the server (SIGKILL and
// start again, real processes of either target): the node a login made
// keeps its sasl ACL, the same login is admitted again with the same
// identities, and a wrong password is still AuthFailed.
func TestZkCliSASLRestart(t *testing.T) {
	requireZkCli(t)
	dir := t.TempDir()
	jaas := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(jaas, []byte("Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n user_bob=\"bobpw\";\n};\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	login := func(name, password string) string {
		p := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(p, []byte(fmt.Sprintf("Client {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n username=\"bob\"\n password=%q;\n};\n", password)), 0o600); err != nil {
			t.Fatal(err)
		}
		return "-Djava.security.auth.login.config=" + p
	}
	cl := newProcClusterOpts(t, 1, procOpts{
		coordArgs: []string{"-sasl-users", jaas},
		jvmProps: []string{"-Djava.security.auth.login.config=" + jaas,
			"-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
	})
	out := zkCliWith(t, cl.Addr(0), login("good", "bobpw"), "create /sasl-restart r sasl:bob:cdrwa\nwhoami\nquit\n")
	wantLines(t, "before the crash", out, "Created /sasl-restart", "Auth scheme: User\nsasl: bob\nip: 127.0.0.1")

	cl.Restart(0)
	out = zkCliWith(t, cl.Addr(0), login("good", "bobpw"), "whoami\nget /sasl-restart\ngetAcl /sasl-restart\nquit\n")
	wantLines(t, "after the crash", out, "WatchedEvent state:SaslAuthenticated type:None path:null",
		"Auth scheme: User\nsasl: bob\nip: 127.0.0.1", "r", "'sasl,'bob\n: cdrwa")
	out = zkCliWith(t, cl.Addr(0), login("bad", "wrong"), "get /sasl-restart\nquit\n")
	wantLines(t, "wrong password after the crash", out, "WatchedEvent state:AuthFailed type:None path:null")
	if strings.Contains(out, "\nr\n") {
		t.Error("a wrong password read the node")
	}
	out = zkCliWith(t, cl.Addr(0), "", "get /sasl-restart\nquit\n")
	wantLines(t, "anonymous after the crash", out, "Insufficient permission : /sasl-restart")
}
