// Command watchmem measures the server heap that watches take, on coord and
// on Apache ZooKeeper side by side, as a user would: it starts one
// standalone server of each as its own process, connects one session with
// github.com/go-zookeeper/zk, sets N exists watches on distinct missing
// nodes (/app/node-000000, ...), and reads the server's live heap after a
// full collection before and after. The client's own watcher table lives in
// this process and is not counted.
//
//	go run ./cmd/watchmem                # both, 200,000 watches
//	go run ./cmd/watchmem -target coord  # coord only (no Java needed)
//
// coord's heap is runtime.MemStats.HeapAlloc after runtime.GC, read from its
// /debug/pprof/heap?gc=1&debug=1; ZooKeeper's is the byte total of
// `jmap -histo:live`, which collects first and counts every live object
// (Debian's zookeeper package, started through internal/zkproc, and a JDK's
// jmap). Each server's wchs is printed to show that it holds the watches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/internal/fourletter"
	"coord/internal/freeport"
	"coord/internal/zkproc"
)

func main() {
	target := flag.String("target", "both", "coord, zookeeper or both")
	n := flag.Int("n", 200_000, "exists watches to set from one session")
	coordBin := flag.String("coord", "", "coord binary (default: go build ./cmd/coord)")
	xmx := flag.String("xmx", "512m", "ZooKeeper's -Xmx")
	flag.Parse()
	log.SetFlags(0)
	dir, err := os.MkdirTemp("", "watchmem")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	var results []string
	if *target == "coord" || *target == "both" {
		bin := *coordBin
		if bin == "" {
			bin = filepath.Join(dir, "coord")
			log.Printf("building coord into %s", bin)
			if out, err := exec.Command("go", "build", "-o", bin, "coord/cmd/coord").CombinedOutput(); err != nil {
				log.Fatalf("go build: %v\n%s", err, out)
			}
		}
		results = append(results, measure("coord", *n, startCoord(bin, filepath.Join(dir, "coord-data"))))
	}
	if *target == "zookeeper" || *target == "both" {
		results = append(results, measure("ZooKeeper", *n, startZooKeeper(*xmx, filepath.Join(dir, "zk"))))
	}
	fmt.Println()
	for _, r := range results {
		fmt.Println(r)
	}
}

// server is a started server process: its client address and how to read
// its live heap.
type server struct {
	addr string
	heap func() (int64, error)
	stop func()
}

func measure(name string, n int, s *server) string {
	defer s.stop()
	conn, ev, err := zk.Connect([]string{s.addr}, 30*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	defer conn.Close()
	waitSession(name, ev)
	// Warm up the request path (and the JIT) without leaving watches.
	for i := range 2000 {
		if _, _, err := conn.Exists(fmt.Sprintf("/warm/node-%06d", i)); err != nil {
			log.Fatalf("%s: exists: %v", name, err)
		}
	}
	before := heap(name, s)
	start := time.Now()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, _, _, err := conn.ExistsW(fmt.Sprintf("/app/node-%06d", i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		log.Fatalf("%s: exists watch: %v", name, err)
	}
	log.Printf("%s: %d exists watches set in %v; wchs:\n%s", name, n, time.Since(start).Round(time.Millisecond), fourLetter(s.addr, "wchs"))
	after := heap(name, s)
	per := float64(after-before) / float64(n)
	return fmt.Sprintf("%-10s heap %7.1f MB -> %7.1f MB: %6.1f B per exists watch (%d watches, one session)",
		name, float64(before)/1e6, float64(after)/1e6, per, n)
}

// heap reads the live heap twice and keeps the smaller reading.
func heap(name string, s *server) int64 {
	best := int64(-1)
	for range 2 {
		h, err := s.heap()
		if err != nil {
			log.Fatalf("%s: reading the heap: %v", name, err)
		}
		if best < 0 || h < best {
			best = h
		}
		time.Sleep(500 * time.Millisecond)
	}
	return best
}

func waitSession(name string, ev <-chan zk.Event) {
	timeout := time.After(60 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.State == zk.StateHasSession {
				return
			}
		case <-timeout:
			log.Fatalf("%s: no session after 60 s", name)
		}
	}
}

func startCoord(bin, dataDir string) *server {
	p, err := freeport.Addrs(4)
	if err != nil {
		log.Fatal(err)
	}
	httpAddr := p[3]
	cmd := exec.Command(bin, "-id", "m1", "-data-dir", dataDir,
		"-raft-addr", p[0], "-grpc-addr", p[1],
		"-gossip-addr", "", "-zk-addr", p[2], "-http-addr", httpAddr,
		"-log-level", "warn",
		"-pprof",                      // the heap profile below: /debug/pprof/ is served only with -pprof
		"-4lw-whitelist", "srvr,wchs") // wchs is off by default
	start(cmd)
	heapRE := regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)
	return &server{
		addr: p[2],
		stop: func() { cmd.Process.Kill(); cmd.Wait() },
		heap: func() (int64, error) {
			resp, err := http.Get("http://" + httpAddr + "/debug/pprof/heap?gc=1&debug=1")
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				return 0, err
			}
			m := heapRE.FindSubmatch(b)
			if m == nil {
				return 0, errors.New("no HeapAlloc in the heap profile")
			}
			return strconv.ParseInt(string(m[1]), 10, 64)
		},
	}
}

func startZooKeeper(xmx, dir string) *server {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := zkproc.Start(ctx, zkproc.Options{Dir: dir, JVM: []string{"-Xmx" + xmx}, Output: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	totalRE := regexp.MustCompile(`(?m)^Total\s+\d+\s+(\d+)\s*$`)
	return &server{
		addr: e.Servers[0].Addr,
		stop: e.Close,
		heap: func() (int64, error) {
			out, err := exec.Command("jmap", "-histo:live", strconv.Itoa(e.Servers[0].Pid())).Output()
			if err != nil {
				return 0, fmt.Errorf("jmap: %v", err)
			}
			m := totalRE.FindSubmatch(out)
			if m == nil {
				return 0, errors.New("no Total line in jmap -histo:live")
			}
			return strconv.ParseInt(string(m[1]), 10, 64)
		},
	}
}

// start runs the server with its output on stderr, to die with this
// process.
func start(cmd *exec.Cmd) {
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Fatalf("starting %s: %v", cmd.Path, err)
	}
}

// fourLetter sends a four-letter word and returns the answer, each line
// indented, for the log (an error that left no answer in its place).
func fourLetter(addr, word string) string {
	out, err := fourletter.Ask(context.Background(), addr, word, fourletter.Options{DialTimeout: 10 * time.Second, Timeout: 10 * time.Second})
	if out == "" && err != nil {
		return err.Error()
	}
	var b strings.Builder
	for line := range strings.Lines(out) {
		b.WriteString("  " + strings.TrimRight(line, "\r\n") + "\n")
	}
	return b.String()
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
