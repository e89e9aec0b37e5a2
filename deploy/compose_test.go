package deploy_test

import (
	"bytes"
	"context"
	"coord/internal/composenet"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stack is one compose project of docker-compose.yml: its own name, subnet,
// host ports and image tags, so it runs beside a user's `make up` and beside
// another test run.
type stack struct {
	t       *testing.T
	root    string   // repository root
	compose []string // docker-compose or docker compose, with -f and -p
	project string
	subnet  string // three octets
	prefix  string // host port prefix (docker-compose.yml)
	image   string
	env     []string
}

// TestCompose brings up the compose cluster (3 voters, 1 observer) and checks
// it under container faults: reads and writes through different containers
// with coordctl and kazoo, docker kill of the leader, docker network
// disconnect of one voter, a rolling upgrade under a write load, and down -v
// leaving nothing behind.
func TestCompose(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed: skipping the docker-compose tests")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers (docker info: %v: %s): skipping the docker-compose tests", err, bytes.TrimSpace(out))
	}
	var composeCmd []string
	if _, err := exec.LookPath("docker-compose"); err == nil {
		composeCmd = []string{"docker-compose"}
	} else if exec.Command("docker", "compose", "version").Run() == nil {
		composeCmd = []string{"docker", "compose"}
	} else {
		t.Skip("neither docker-compose nor `docker compose` is installed: skipping the docker-compose tests")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, root, composeCmd)
	start := time.Now()
	s.buildImages()
	t.Logf("images built in %v", time.Since(start).Round(time.Second))

	s.up()
	t.Run("ReadWriteAcrossContainers", s.testReadWrite)
	t.Run("KillLeader", s.testKillLeader)
	t.Run("DisconnectMinority", s.testDisconnect)
	t.Run("RollingUpgradeUnderLoad", s.testRollingUpgrade)
	t.Run("DownLeavesNothing", s.testDown)
}

func newStack(t *testing.T, root string, composeCmd []string) *stack {
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	project := fmt.Sprintf("coordtest%d%03d", os.Getpid()%100000, r.Intn(1000))
	s := &stack{t: t, root: root, project: project, image: "coord:" + project}
	var err error
	if s.subnet, err = composenet.FreeSubnet(213, r); err != nil {
		t.Fatal(err)
	}
	// Host port prefixes below the kernel's ephemeral range (32768-60999)
	// first: a port in it can be taken by any other test's connection
	// between this check and the containers' start (a CI run lost 34180
	// that way). Never 2: those are the compose file's defaults, which
	// `make up` and internal/doctest's run of docs/deploy.md use, at the
	// same time as this test in go test ./....
	if s.prefix, err = composenet.FreePortPrefix("1", "3", "4", "5", "6"); err != nil {
		t.Fatal(err)
	}
	s.compose = append(append([]string{}, composeCmd...), "-f", filepath.Join(root, "docker-compose.yml"), "-p", project)
	s.env = append(os.Environ(), "COORD_IMAGE="+s.image, "COORD_SUBNET="+s.subnet, "COORD_PORT_PREFIX="+s.prefix, "COORD_RAFT_TIMEOUT=1s",
		"COMPOSE="+strings.Join(s.compose, " "), "BIN_DIR=build/"+project)
	t.Logf("project %s, subnet %s.0/24, host ports %s1181..%s4182", project, s.subnet, s.prefix, s.prefix)
	t.Cleanup(s.cleanup)
	return s
}

// run runs a command in the repository root with the stack's environment.
func (s *stack) run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = s.root, s.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (s *stack) must(timeout time.Duration, name string, args ...string) string {
	s.t.Helper()
	out, err := s.run(timeout, name, args...)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *stack) composeRun(timeout time.Duration, args ...string) (string, error) {
	return s.run(timeout, s.compose[0], append(append([]string{}, s.compose[1:]...), args...)...)
}

// ctl runs coordctl inside service's container (talking to that server).
// It uses docker exec, not compose exec: on a busy machine starting
// docker-compose (Python) takes seconds.
func (s *stack) ctl(service string, args ...string) (string, error) {
	out, err := s.run(30*time.Second, "docker", append([]string{"exec", s.container(service), "coordctl", "--command-timeout", "10s"}, args...)...)
	return strings.TrimSpace(out), err
}

// container returns the id of service's container, running or not, by the
// labels both docker-compose 1.29 and docker compose v2 set.
// create creates path through service, retrying for up to 30 s while no
// leader answers (an election on a busy machine): a create that failed was
// not acknowledged, and one that reports NodeExists went through earlier.
func (s *stack) create(service, path, data string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.ctl(service, "create", path, data)
		if err == nil || strings.Contains(err.Error(), "already exists") {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		s.t.Logf("create %s through %s, retrying: %v", path, service, err)
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *stack) container(service string) string {
	s.t.Helper()
	out, err := s.run(30*time.Second, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service)
	ids := strings.Fields(out)
	if err != nil || len(ids) != 1 {
		s.t.Fatalf("want one container for %s, have %q: %v", service, ids, err)
	}
	return ids[0]
}

func (s *stack) buildImages() {
	s.must(8*time.Minute, "deploy/build-image.sh", s.image, "v1")
	s.must(3*time.Minute, "deploy/build-image.sh", s.image+"-v2", "v2")
}

func (s *stack) up() {
	start := time.Now()
	s.must(2*time.Minute, "deploy/keygen.sh") // the cluster key docker-compose.yml mounts
	s.must(3*time.Minute, s.compose[0], append(append([]string{}, s.compose[1:]...), "up", "-d")...)
	s.waitHealthy("")
	s.t.Logf("cluster up and healthy in %v", time.Since(start).Round(time.Millisecond))
}

func (s *stack) waitHealthy(services ...string) {
	s.t.Helper()
	args := []string{"deploy/wait-healthy.sh"}
	for _, sv := range services {
		if sv != "" {
			args = append(args, sv)
		}
	}
	if _, err := s.run(3*time.Minute, args[0], args[1:]...); err != nil {
		logs, _ := s.composeRun(time.Minute, "logs", "--tail=40")
		s.t.Fatalf("%v\nlogs:\n%s", err, logs)
	}
}

// leader asks service which server leads, retrying until one is known.
func (s *stack) leader(service string, not string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := s.ctl(service, "leader")
		if f := strings.Fields(out); err == nil && len(f) > 0 && f[0] != not {
			return f[0]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s knows no leader (other than %q) after %v: %s %v", service, not, within, out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventually retries f until it returns nil or within passes.
func eventually(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *stack) zkHost(n int) string { return fmt.Sprintf("127.0.0.1:%s%d181", s.prefix, n) }

func (s *stack) testReadWrite(t *testing.T) {
	if err := s.create("coord1", "/compose", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.create("coord1", "/compose/ctl", "through-coord1"); err != nil {
		t.Fatal(err)
	}
	// A fresh session on the observer is sequentially consistent, not
	// linearizable: it sees the write once it has applied it.
	eventually(t, 10*time.Second, "coordctl get through coord4", func() error {
		out, err := s.ctl("coord4", "get", "/compose/ctl")
		if err == nil && out != "through-coord1" {
			return fmt.Errorf("read %q", out)
		}
		return err
	})
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is missing: the kazoo half needs python3-kazoo")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import kazoo").Run(); err != nil {
		t.Skip("python3-kazoo is not installed: skipping the kazoo half")
	}
	out := s.must(time.Minute, "/usr/bin/python3", "deploy/testdata/kazoo_rw.py", s.zkHost(2), s.zkHost(3), "/compose/kazoo", "via-coord2")
	if got := strings.TrimSpace(out); got != "via-coord2" {
		t.Fatalf("kazoo wrote through coord2 (%s) and read %q through coord3 (%s)", s.zkHost(2), got, s.zkHost(3))
	}
	// And what kazoo wrote, coordctl reads on the observer.
	eventually(t, 10*time.Second, "coordctl get of kazoo's write through coord4", func() error {
		out, err := s.ctl("coord4", "get", "/compose/kazoo")
		if err == nil && out != "via-coord2" {
			return fmt.Errorf("read %q", out)
		}
		return err
	})
}

func (s *stack) testKillLeader(t *testing.T) {
	leader := s.leader("coord4", "", 30*time.Second)
	var acked []string
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("/compose/kill-%02d", i)
		if err := s.create("coord4", p, fmt.Sprint(i)); err != nil {
			t.Fatalf("write before the kill: %v", err)
		}
		acked = append(acked, p)
	}
	start := time.Now()
	s.must(30*time.Second, "docker", "kill", s.container(leader))
	asker := "coord4"
	newLeader := s.leader(asker, leader, 30*time.Second)
	t.Logf("killed leader %s; %s leads after %v", leader, newLeader, time.Since(start).Round(time.Millisecond))
	// A write through the new leader is acknowledged, and every write
	// acknowledged before the kill is there (read on the new leader).
	if err := s.create(newLeader, "/compose/after-kill", "x"); err != nil {
		t.Fatalf("a write after the failover: %v", err)
	}
	out, err := s.ctl(newLeader, "ls", "/compose")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range strings.Fields(out) {
		have["/compose/"+n] = true
	}
	for _, p := range acked {
		if !have[p] {
			t.Errorf("acknowledged write %s lost after the leader was killed", p)
		}
	}
	// Start it again (docker kill counts as a manual stop: the restart
	// policy leaves it down) and see it catch up.
	s.must(time.Minute, "docker", "start", s.container(leader))
	s.waitHealthy(leader)
	eventually(t, 20*time.Second, "the killed leader, restarted, reads the write made while it was down", func() error {
		out, err := s.ctl(leader, "get", "/compose/after-kill")
		if err == nil && out != "x" {
			return fmt.Errorf("read %q", out)
		}
		return err
	})
}

// health runs `coord health` in service's container (over its loopback).
func (s *stack) health(service string) (map[string]any, error) {
	out, err := s.run(20*time.Second, "docker", "exec", s.container(service), "coord", "health")
	var h map[string]any
	if i := strings.Index(out, "{"); i >= 0 {
		json.NewDecoder(strings.NewReader(out[i:])).Decode(&h)
	}
	return h, err
}

func (s *stack) testDisconnect(t *testing.T) {
	leader := s.leader("coord4", "", 30*time.Second)
	victim := "coord1"
	for _, v := range []string{"coord1", "coord2", "coord3"} {
		if v != leader {
			victim = v
			break
		}
	}
	network := s.project + "_coordnet"
	ip := s.subnet + "." + map[string]string{"coord1": "11", "coord2": "12", "coord3": "13"}[victim]
	before, _ := s.health(victim)
	s.must(30*time.Second, "docker", "network", "disconnect", network, s.container(victim))
	connected := false
	reconnect := func() {
		if !connected {
			connected = true
			s.run(30*time.Second, "docker", "network", "connect", "--ip", ip, network, s.container(victim))
		}
	}
	defer reconnect()
	// Cut off from the quorum, it stops serving: /health turns unhealthy and
	// it knows no leader, and its applied index stands still while the
	// majority commits writes.
	var cut map[string]any
	eventually(t, 30*time.Second, victim+" refuses service once cut off", func() error {
		h, err := s.health(victim)
		if err == nil {
			return fmt.Errorf("still healthy: %v", h)
		}
		if h == nil || h["serving"] != false {
			return fmt.Errorf("health %v: %v", h, err)
		}
		cut = h
		return nil
	})
	t.Logf("%s cut off: before %v, after %v", victim, before, cut)
	// A write sent through it fails: its own client port is unreachable
	// and it is no longer part of a quorum.
	if out, err := s.ctl(victim, "create", "/compose/through-cut-off", "x"); err == nil {
		t.Errorf("a write through cut-off %s succeeded: %s", victim, out)
	}
	var acked []string
	for i := 0; i < 10; i++ {
		p := fmt.Sprintf("/compose/partition-%02d", i)
		if err := s.create(leader, p, fmt.Sprint(i)); err != nil {
			t.Fatalf("the majority refused a write while %s was cut off: %v", victim, err)
		}
		acked = append(acked, p)
	}
	time.Sleep(time.Second)
	h, _ := s.health(victim)
	if h == nil || h["applied_index"] != cut["applied_index"] {
		t.Errorf("cut-off %s applied entries without a quorum: %v then %v", victim, cut, h)
	}
	if h != nil && h["serving"] != false {
		t.Errorf("cut-off %s serves again without a leader: %v", victim, h)
	}
	reconnect()
	s.waitHealthy(victim)
	for _, p := range acked {
		eventually(t, 20*time.Second, victim+" catches up with "+p, func() error {
			_, err := s.ctl(victim, "get", p)
			return err
		})
	}
	if _, err := s.ctl(victim, "get", "/compose/through-cut-off"); err == nil {
		t.Errorf("the write refused by cut-off %s exists", victim)
	}
}

type loadResult struct {
	Acked         []string `json:"acked"`
	Present       []string `json:"present"`
	Indeterminate int      `json:"indeterminate"`
	SessionStart  int64    `json:"session_start"`
	SessionEnd    int64    `json:"session_end"`
	States        []string `json:"states"`
}

func (s *stack) testRollingUpgrade(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import kazoo").Run(); err != nil {
		t.Skip("python3-kazoo is not installed: the load of the rolling upgrade runs on kazoo")
	}
	dir := t.TempDir()
	stop, outFile := filepath.Join(dir, "stop"), filepath.Join(dir, "load.json")
	hosts := strings.Join([]string{s.zkHost(1), s.zkHost(2), s.zkHost(3), s.zkHost(4)}, ",")
	load := exec.Command("/usr/bin/python3", "deploy/testdata/kazoo_load.py", hosts, stop, outFile)
	load.Dir = s.root
	var loadOut bytes.Buffer
	load.Stdout, load.Stderr = &loadOut, &loadOut
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- load.Wait() }()
	finished := false
	defer func() {
		if !finished {
			load.Process.Kill()
			<-done
		}
	}()
	time.Sleep(2 * time.Second) // the load is writing
	before := map[string]string{}
	for _, sv := range []string{"coord1", "coord2", "coord3", "coord4"} {
		before[sv] = s.imageOf(sv)
	}
	start := time.Now()
	out, err := s.run(5*time.Minute, "env", "COORD_IMAGE="+s.image+"-v2", "deploy/rolling-upgrade.sh")
	t.Logf("rolling upgrade took %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Error(err)
	}
	time.Sleep(2 * time.Second) // the load writes on the upgraded cluster
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		finished = true
		if err != nil {
			t.Fatalf("load: %v\n%s", err, loadOut.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("load did not finish:\n%s", loadOut.String())
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatalf("load wrote no result: %v\n%s", err, loadOut.String())
	}
	var r loadResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %d acknowledged creates, %d indeterminate, %d present; states %v", len(r.Acked), r.Indeterminate, len(r.Present), r.States)
	if len(r.Acked) < 20 {
		t.Errorf("the load got only %d writes acknowledged", len(r.Acked))
	}
	present := map[string]bool{}
	for _, p := range r.Present {
		present[p] = true
	}
	for _, p := range r.Acked {
		if !present[p] {
			t.Errorf("acknowledged write %s lost in the rolling upgrade", p)
		}
	}
	if r.SessionStart != r.SessionEnd {
		t.Errorf("the load's session changed from %#x to %#x", r.SessionStart, r.SessionEnd)
	}
	for _, st := range r.States {
		if st == "LOST" || st == "EXPIRED" {
			t.Errorf("the load's session expired during the rolling upgrade: states %v", r.States)
			break
		}
	}
	for sv, img := range before {
		if now := s.imageOf(sv); now == img {
			t.Errorf("%s still runs image %s after the rolling upgrade", sv, img)
		}
	}
}

func (s *stack) imageOf(service string) string {
	out, err := s.run(30*time.Second, "docker", "inspect", "-f", "{{.Image}}", s.container(service))
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func (s *stack) testDown(t *testing.T) {
	s.must(3*time.Minute, s.compose[0], append(append([]string{}, s.compose[1:]...), "down", "-v", "--remove-orphans")...)
	label := "label=com.docker.compose.project=" + s.project
	for _, what := range [][]string{
		{"ps", "-aq", "--filter", label},
		{"network", "ls", "-q", "--filter", label},
		{"volume", "ls", "-q", "--filter", label},
		{"network", "ls", "-q", "--filter", "name=" + s.project},
		{"volume", "ls", "-q", "--filter", "name=" + s.project},
	} {
		if out := strings.TrimSpace(s.must(30*time.Second, "docker", what...)); out != "" {
			t.Errorf("after down -v, docker %s lists %s", strings.Join(what, " "), out)
		}
	}
}

// cleanup removes whatever the test made, also when it failed half way.
func (s *stack) cleanup() {
	if s.t.Failed() {
		if logs, err := s.composeRun(time.Minute, "logs", "--tail=60"); err == nil {
			s.t.Logf("compose logs:\n%s", logs)
		}
	}
	s.composeRun(3*time.Minute, "down", "-v", "--remove-orphans")
	// Under deploy/build-image.sh's lock: removing the images removes their
	// untagged parent layers, which another build may be using as cache.
	if _, err := exec.LookPath("flock"); err == nil {
		s.run(time.Minute, "flock", "/tmp/coord-image-build.lock", "docker", "rmi", s.image, s.image+"-v2")
	} else {
		s.run(time.Minute, "docker", "rmi", s.image, s.image+"-v2")
	}
	os.RemoveAll(filepath.Join(s.root, "build", s.project))
}
