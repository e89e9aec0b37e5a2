package compat

import (
	"os"
	"path/filepath"
	"testing"
)

// SASL DIGEST-MD5 logins from kazoo (sasl_options) with users from a JAAS
// file, the same file for coord (-sasl-users) and for ZooKeeper
// (java.security.auth.login.config with the SASL authentication
// provider): a good password logs in and holds sasl:<user>, a wrong one
// or an unknown user is refused. Real processes of both.
func TestKazooSASL(t *testing.T) {
	requireKazoo(t)
	jaas := filepath.Join(t.TempDir(), "jaas.conf")
	err := os.WriteFile(jaas, []byte(`Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bobpw";
};
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cl := newProcClusterOpts(t, 1, procOpts{
		coordArgs: []string{"-sasl-users", jaas},
		jvmProps: []string{"-Djava.security.auth.login.config=" + jaas,
			"-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
	})
	runKazoo(t, "kazoo_sasl.py", cl.Addrs(), []string{"good_password", "acl_sasl_scheme", "wrong_password", "unknown_user"})
}
