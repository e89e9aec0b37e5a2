package jepsen

import (
	"bytes"
	"context"
	"coord/internal/composenet"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunCompose is a short seeded run against the docker-compose.yml
// cluster (3 voters, 1 observer) with every compose nemesis: every checker
// must pass, faults must have been injected, and the report directory must
// hold each container's log next to the report. It needs Docker and
// docker-compose (or `docker compose`) and builds the image from this
// checkout.
//
// It runs only with COORD_JEPSEN_COMPOSE=1 (.ci/run sets it, after the
// other packages' tests: beside deploy's and the docs' compose clusters it
// would race them for subnets and host ports):
//
//	COORD_JEPSEN_COMPOSE=1 go test -v -run TestRunCompose -timeout 15m ./jepsen/
func TestRunCompose(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs the compose cluster for about a minute")
	}
	if os.Getenv("COORD_JEPSEN_COMPOSE") != "1" {
		t.Skip("set COORD_JEPSEN_COMPOSE=1 to run the compose cluster (.ci/run does, on its own)")
	}
	requireCompose(t)
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	// RunCompose's default subnet is one per pid, which may be taken; the
	// port prefixes go in the reverse of deploy's TestCompose order (it
	// may run at the same time), never 2 (the compose file's default,
	// which `make up` uses).
	subnet, err := composenet.FreeSubnet(214, r)
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := composenet.FreePortPrefix("6", "5", "4", "3", "1")
	if err != nil {
		t.Fatal(err)
	}
	opts := ComposeOptions{
		Root:       "..",
		Project:    fmt.Sprintf("jepsentest%d%03d", os.Getpid()%100000, r.Intn(1000)),
		Subnet:     subnet,
		PortPrefix: prefix,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	rep, err := RunCompose(ctx, Config{
		Duration: 20 * time.Second, Seed: 5,
		Nemeses:   ComposeNemesisNames,
		Workloads: []string{"register", "sequential"},
		Workers:   2, Interval: time.Second, Hold: 1500 * time.Millisecond,
		Dir: t.TempDir(), Log: testLog(t),
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkComposeReport(t, rep, opts)
}

// requireCompose skips the test where Docker or docker-compose is missing.
func requireCompose(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers (docker info: %v: %s)", err, bytes.TrimSpace(out))
	}
	if _, err := exec.LookPath("docker-compose"); err != nil && exec.Command("docker", "compose", "version").Run() != nil {
		t.Skip("neither docker-compose nor `docker compose` is installed")
	}
}

// checkComposeReport checks what TestRunCompose's run reported and left.
func checkComposeReport(t *testing.T, rep *Report, opts ComposeOptions) {
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
	if len(rep.Notes) == 0 || !strings.HasPrefix(rep.Notes[0], "compose project "+opts.Project) {
		t.Errorf("notes: %v; want the compose project first", rep.Notes)
	}
	if !strings.Contains(filepath.Base(rep.Dir), "-compose-seed5") {
		t.Errorf("report directory %s", rep.Dir)
	}
	if rep.Config.Voters != 3 || rep.Config.Observers != 1 {
		t.Errorf("config: %d voters, %d observers; want the compose file's 3 and 1", rep.Config.Voters, rep.Config.Observers)
	}
	if len(rep.Faults) == 0 {
		t.Errorf("no fault was injected")
	}
	for _, f := range rep.Faults {
		t.Logf("fault %s: %s %s", f.Nemesis, f.Desc, f.Err)
	}
	// No recovery verdict (a cluster that does not recover is a note).
	if len(rep.Verdicts) != 2 || !rep.Valid() {
		t.Errorf("%d verdicts, valid %v; want register and sequential, passed", len(rep.Verdicts), rep.Valid())
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s %v", v.Checker, v.Result, v.Summary, v.Details)
	}
	for _, f := range []string{"params.json", "verdicts.json", "history.jsonl", "report.html", "coord1.log", "coord4.log"} {
		if _, err := os.Stat(filepath.Join(rep.Dir, f)); err != nil {
			t.Errorf("report directory: %v", err)
		}
	}
	html, _ := os.ReadFile(filepath.Join(rep.Dir, "report.html"))
	if !bytes.Contains(html, []byte(`href="coord1.log"`)) {
		t.Errorf("report.html does not link coord1.log")
	}
	// Nothing is left behind: the project's containers are gone.
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+opts.Project).Output()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("containers left after the run: %q (%v)", out, err)
	}
}
