package compat

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update-golden", false,
	"rewrite testdata/zkcli_expected.txt from the target's output (use with "+targetEnv+"=zookeeper)")

// requireZkCli skips when Debian's zkCli.sh (zookeeper package) or java is
// missing; CI installs both.
func requireZkCli(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skipf("zkCli.sh needs java (apt-get install default-jre-headless): %v", err)
	}
	if _, err := os.Stat(zkCliPath); err != nil {
		t.Skipf("no %s (apt-get install zookeeper): %v", zkCliPath, err)
	}
}

// zkCli runs ZooKeeper's Java command-line client against addr with the
// commands on its standard input (one session, as a person typing them).
func zkCli(t testing.TB, addr string, commands []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zkCliPath, "-server", addr, "-timeout", "10000", "-waitforconnection")
	cmd.Stdin = bytes.NewReader(commands)
	cmd.Env = append(os.Environ(), "CLIENT_JVMFLAGS=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("zkCli.sh: %v\n%s", err, out)
	}
	return string(out)
}

// The Java client's zkCli.sh, a session of commands covering CRUD, versions,
// sequential/ephemeral/TTL/container nodes, ACLs with digest auth and the
// error messages; the output must be ZooKeeper's, line for line, once the
// values that differ between servers are replaced by names that keep their
// equalities (zxids Z1, Z2, ... in order of appearance, session ids S1, ...).
func TestZkCli(t *testing.T) {
	requireZkCli(t)
	cl := newCluster(t, 1)
	commands, err := os.ReadFile("testdata/zkcli_commands.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := normalizeZkCli(zkCli(t, cl.Addrs()[0], commands))
	if *updateGolden {
		if err := os.WriteFile("testdata/zkcli_expected.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote testdata/zkcli_expected.txt from %s", cl.Name())
		return
	}
	wantB, err := os.ReadFile("testdata/zkcli_expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := string(wantB)
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("zkCli.sh transcript differs from ZooKeeper's at line %d:\n got: %q\nwant: %q", i+1, g, w)
				break
			}
		}
		t.Logf("full transcript:\n%s", got)
	}
}

var (
	zxidLine  = regexp.MustCompile(`^(cZxid|mZxid|pZxid) = (0x[0-9a-f]+)$`)
	ownerLine = regexp.MustCompile(`^ephemeralOwner = (0x[0-9a-f]+)$`)
	timeLine  = regexp.MustCompile(`^(ctime|mtime) = \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \w+ \d{4}$`)
	ephLine   = regexp.MustCompile(`^\[(/[^\]]*)\]$`)
)

// normalizeZkCli drops what depends on timing (the client's own connection
// events, JVM warnings) and names the values that differ between servers.
func normalizeZkCli(out string) string {
	zxids, owners := map[string]string{}, map[string]string{}
	name := func(m map[string]string, prefix, v string) string {
		if v == "0x0" {
			return v
		}
		if n, ok := m[v]; ok {
			return n
		}
		m[v] = fmt.Sprintf("%s%d", prefix, len(m)+1)
		return m[v]
	}
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r ")
		switch {
		case line == "", line == "WATCHER::", strings.HasPrefix(line, "WatchedEvent "),
			strings.HasPrefix(line, "SLF4J:"), strings.HasPrefix(line, "Connecting to "),
			line == "Welcome to ZooKeeper!", strings.HasPrefix(line, "JLine support"):
			continue
		}
		if m := zxidLine.FindStringSubmatch(line); m != nil {
			line = m[1] + " = " + name(zxids, "Z", m[2])
		} else if m := ownerLine.FindStringSubmatch(line); m != nil {
			line = "ephemeralOwner = " + name(owners, "S", m[1])
		} else if m := timeLine.FindStringSubmatch(line); m != nil {
			line = m[1] + " = <time>"
		} else if m := ephLine.FindStringSubmatch(line); m != nil && strings.Contains(line, "/cli/") {
			// getEphemerals lists in the server's set order; sort it.
			parts := strings.Split(m[1], ", ")
			sortStrings(parts)
			line = "[" + strings.Join(parts, ", ") + "]"
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
