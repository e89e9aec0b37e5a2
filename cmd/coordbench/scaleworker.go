package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coord/vocab"
	"coord/zk"
)

// -scale's sessions live in worker processes: coordbench started again
// as `coordbench -scale-worker -servers ... -from I -to J -timeout T`,
// each holding sessions I..J-1 (session i on server i mod n). The
// coordinator writes one JSON scaleCmd per line on a worker's stdin; the
// worker answers each with a scaleMsg carrying Done, and every 100 ms
// writes its counters (a scaleMsg with Status). Times are Unix
// nanoseconds: the processes share one clock.

// scalePerWorker is the most sessions one worker holds: a process here
// may open at most `ulimit -n` files (20,000 where these numbers were
// measured, and no capability to raise it).
const scalePerWorker = 15000

type scaleCmd struct {
	Cmd    string `json:"cmd"`
	Per    int    `json:"per,omitempty"`    // watch: watches per session
	Server int    `json:"server,omitempty"` // arm-storm: the server (index) about to be killed; -1 every server (a move)
}

type scaleStatus struct {
	Connected, Registered, Delivered int64
	Down, Back, Expired, Failed      int64
	Lost                             int64 // sessions not connected now
	Deleted                          int64
	PingGapMax                       time.Duration // the longest gap between a session's pings (a max, not a sum)
}

func (s *scaleStatus) add(o scaleStatus) {
	s.Connected += o.Connected
	s.Registered += o.Registered
	s.Delivered += o.Delivered
	s.Down += o.Down
	s.Back += o.Back
	s.Expired += o.Expired
	s.Failed += o.Failed
	s.Lost += o.Lost
	s.Deleted += o.Deleted
	s.PingGapMax = max(s.PingGapMax, o.PingGapMax)
}

type scaleMsg struct {
	Done      string       `json:"done,omitempty"`
	Err       string       `json:"err,omitempty"`
	Status    *scaleStatus `json:"status,omitempty"`
	Retries   int          `json:"retries,omitempty"`
	PerServer []int        `json:"per_server,omitempty"`
	Watches   int          `json:"watches,omitempty"`
	Pairs     int          `json:"pairs,omitempty"`
	Down      int          `json:"down,omitempty"`
	Expired   int          `json:"expired,omitempty"`
	Failed    int          `json:"failed,omitempty"`
	Times     []int64      `json:"times,omitempty"`
	// collect-storm: the reconnect tries by how they ended, the time
	// their handshakes took (ms, summed), and each moved session's count.
	Attempts  map[string]int   `json:"attempts,omitempty"`
	AttemptMs map[string]int64 `json:"attempt_ms,omitempty"`
	Tries     []int            `json:"tries,omitempty"`
}

// --- the coordinator's side ---

type scaleWorkers struct {
	procs []*scaleProc
}

type scaleProc struct {
	cmd    *exec.Cmd
	in     *json.Encoder
	dones  chan scaleMsg
	exited chan struct{}
	stderr *tailBuffer
	mu     sync.Mutex
	st     scaleStatus
}

// startScaleWorkers starts enough workers for n sessions.
func startScaleWorkers(ctx context.Context, n int, servers []string, timeout time.Duration) (*scaleWorkers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w := &scaleWorkers{}
	for from := 0; from < n; from += scalePerWorker {
		to := min(n, from+scalePerWorker)
		cmd := exec.Command(exe, "-scale-worker", "-servers", strings.Join(servers, ","),
			"-from", strconv.Itoa(from), "-to", strconv.Itoa(to), "-timeout", timeout.String())
		cmd.SysProcAttr = childAttr()
		p := &scaleProc{cmd: cmd, dones: make(chan scaleMsg, 1), exited: make(chan struct{}), stderr: &tailBuffer{max: 4096}}
		cmd.Stderr = p.stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			w.stop()
			return nil, err
		}
		outp, err := cmd.StdoutPipe()
		if err != nil {
			w.stop()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			w.stop()
			return nil, err
		}
		p.in = json.NewEncoder(in)
		go p.read(outp)
		w.procs = append(w.procs, p)
	}
	return w, nil
}

func (p *scaleProc) read(r io.Reader) {
	defer close(p.exited)
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	for {
		var m scaleMsg
		if err := dec.Decode(&m); err != nil {
			return
		}
		if m.Status != nil {
			p.mu.Lock()
			p.st = *m.Status
			p.mu.Unlock()
		}
		if m.Done != "" {
			p.dones <- m
		}
	}
}

// do sends cmd to every worker and waits for all their answers.
func (w *scaleWorkers) do(cmd scaleCmd) ([]scaleMsg, error) {
	for _, p := range w.procs {
		if err := p.in.Encode(cmd); err != nil {
			return nil, fmt.Errorf("worker %d: %w (%s)", p.cmd.Process.Pid, err, p.stderr)
		}
	}
	out := make([]scaleMsg, 0, len(w.procs))
	var errs []error
	for _, p := range w.procs {
		select {
		case m := <-p.dones:
			out = append(out, m)
			if m.Err != "" {
				errs = append(errs, fmt.Errorf("%s: %s", cmd.Cmd, m.Err))
			}
		case <-p.exited:
			errs = append(errs, fmt.Errorf("%s: worker %d exited: %s", cmd.Cmd, p.cmd.Process.Pid, p.stderr))
		}
	}
	return out, errors.Join(errs...)
}

// status sums the workers' latest counters.
func (w *scaleWorkers) status() scaleStatus {
	var s scaleStatus
	for _, p := range w.procs {
		p.mu.Lock()
		s.add(p.st)
		p.mu.Unlock()
	}
	return s
}

// waitFor polls the summed counters until cond holds, at most d.
func (w *scaleWorkers) waitFor(ctx context.Context, d time.Duration, cond func(scaleStatus) bool) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && ctx.Err() == nil; {
		if cond(w.status()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// progress prints a counter every 5 s until the returned func is called.
func (w *scaleWorkers) progress(out io.Writer, what string, total int, f func(scaleStatus) int64) func() {
	var c atomic.Int64
	var gap atomic.Int64
	stop := every(200*time.Millisecond, func() {
		st := w.status()
		c.Store(f(st))
		gap.Store(int64(st.PingGapMax))
	})
	end := startProgress(out, what, total, &c, func() string {
		return fmt.Sprintf("; longest gap between a session's pings %v", time.Duration(gap.Load()).Round(time.Millisecond))
	})
	return func() { stop(); end() }
}

// cpuSeconds is the CPU time the workers used so far.
func (w *scaleWorkers) cpuSeconds() float64 {
	if w == nil {
		return 0
	}
	var s float64
	for _, p := range w.procs {
		s += cpuSeconds(p.cmd.Process.Pid)
	}
	return s
}

func (w *scaleWorkers) stop() {
	for _, p := range w.procs {
		p.in.Encode(scaleCmd{Cmd: "quit"})
	}
	for _, p := range w.procs {
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			p.cmd.Process.Kill()
		}
		p.cmd.Wait()
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// --- the worker's side ---

type scaleWorker struct {
	from    int
	servers []string
	timeout time.Duration
	hooks   lightHooks
	conns   []*lightConn
	ping    *pinger
	st      struct{ connected, registered, delivered, down, back, expired, failed, deleted atomic.Int64 }

	mu       sync.Mutex
	arrivals []atomic.Int64 // arm-fanout
	backs    []int64        // arm-storm
	attempts map[string]int // arm-storm: tries by how they ended
	attemptT map[string]time.Duration
	tries    map[*lightConn]int
	pairs    [][2]*lightConn
	gone     []atomic.Int64 // drop
}

// runScaleWorker is `coordbench -scale-worker`.
func runScaleWorker(args []string, stdin io.Reader, stdout io.Writer, stderr io.Writer) int {
	fs := flag.NewFlagSet("coordbench -scale-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", "", "ZooKeeper-protocol addresses")
	from := fs.Int("from", 0, "first session")
	to := fs.Int("to", 0, "after the last session")
	timeout := fs.Duration("timeout", 30*time.Second, "session timeout")
	if err := fs.Parse(args); err != nil || *to <= *from || *servers == "" {
		fmt.Fprintln(stderr, "coordbench -scale-worker: want -servers, -from < -to, -timeout")
		return 2
	}
	w := &scaleWorker{from: *from, servers: splitList(*servers), timeout: *timeout, conns: make([]*lightConn, *to-*from)}
	w.ping = startPinger(len(w.conns), w.timeout)
	var outMu sync.Mutex
	enc := json.NewEncoder(stdout)
	send := func(m scaleMsg) {
		outMu.Lock()
		defer outMu.Unlock()
		enc.Encode(m)
	}
	stop := make(chan struct{})
	go func() { // the counters, every 100 ms
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var last scaleStatus
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s := w.status()
			if s != last {
				last = s
				send(scaleMsg{Status: &s})
			}
		}
	}()
	defer close(stop)
	dec := json.NewDecoder(stdin)
	for {
		var cmd scaleCmd
		if err := dec.Decode(&cmd); err != nil || cmd.Cmd == "quit" {
			for _, lc := range w.conns {
				if lc != nil {
					lc.drop()
				}
			}
			return 0
		}
		m, err := w.do(cmd)
		m.Done = cmd.Cmd
		if err != nil {
			m.Err = err.Error()
		}
		s := w.status()
		m.Status = &s
		send(m)
	}
}

func (w *scaleWorker) status() scaleStatus {
	s := scaleStatus{Connected: w.st.connected.Load(), Registered: w.st.registered.Load(), Delivered: w.st.delivered.Load(),
		Down: w.st.down.Load(), Back: w.st.back.Load(), Expired: w.st.expired.Load(), Failed: w.st.failed.Load(), Deleted: w.st.deleted.Load(),
		PingGapMax: time.Duration(w.ping.gapMax.Load())}
	for _, lc := range w.conns {
		if lc == nil {
			continue
		}
		if c, _ := lc.state(); !c {
			s.Lost++
		}
	}
	return s
}

func (w *scaleWorker) do(cmd scaleCmd) (scaleMsg, error) {
	ctx := context.Background()
	var m scaleMsg
	switch cmd.Cmd {
	case "connect":
		var retries atomic.Int64
		err := parallel(ctx, len(w.conns), 256, func(j int) error {
			id := w.from + j
			n, err := retry(20, 100*time.Millisecond, func() error {
				lc, err := dialLight(ctx, id, w.servers, id%len(w.servers), w.timeout, &w.hooks)
				if err == nil {
					w.conns[j] = lc
					w.ping.slots[j].Store(lc)
					w.st.connected.Add(1)
				}
				return err
			})
			retries.Add(int64(n))
			if err != nil {
				return fmt.Errorf("session %d: %w", id, err)
			}
			return nil
		})
		m.Retries = int(retries.Load())
		m.PerServer = make([]int, len(w.servers))
		for _, lc := range w.conns {
			if lc != nil {
				m.PerServer[lc.server()]++
			}
		}
		return m, err

	case "watch":
		err := parallel(ctx, len(w.conns), 256, func(j int) error {
			lc, i := w.conns[j], w.from+j
			if err := lc.getDataW(scaleHot); err != nil {
				return fmt.Errorf("session %d: getData %s: %w", i, scaleHot, err)
			}
			w.st.registered.Add(1)
			for k := 1; k < cmd.Per; k++ {
				key := scaleKey(i*7 + k)
				var err error
				switch (i + k) % 5 {
				case 0:
					err = lc.existsW(key)
				case 1:
					err = lc.getDataW(key)
				case 2:
					err = lc.existsW(fmt.Sprintf("%s/none/n%d-%d", scaleRoot, i, k))
				case 3:
					err = lc.childrenW(key)
				case 4:
					err = lc.addWatchRecursive(key)
				}
				if err != nil {
					return fmt.Errorf("session %d: watch %d: %w", i, k, err)
				}
				w.st.registered.Add(1)
			}
			return nil
		})
		for _, lc := range w.conns {
			m.Watches += lc.watchCount()
		}
		return m, err

	case "arm-fanout":
		w.arrivals = make([]atomic.Int64, len(w.conns))
		f := func(lc *lightConn, ev zk.WatcherEvent, at time.Time) {
			j := lc.id - w.from
			if ev.Path == scaleHot && ev.Type == zk.EventNodeDataChanged && j >= 0 && j < len(w.arrivals) {
				if w.arrivals[j].CompareAndSwap(0, at.UnixNano()) {
					w.st.delivered.Add(1)
				}
			}
		}
		w.hooks.event.Store(&f)
		return m, nil

	case "collect-fanout":
		w.hooks.event.Store(nil)
		for j := range w.arrivals {
			if v := w.arrivals[j].Load(); v != 0 {
				m.Times = append(m.Times, v)
			}
		}
		return m, nil

	case "arm-storm":
		for _, lc := range w.conns {
			if cmd.Server < 0 || lc.server() == cmd.Server {
				m.Watches += lc.watchCount()
			}
		}
		// Counted afresh: a move may have come before.
		for _, c := range []*atomic.Int64{&w.st.down, &w.st.back, &w.st.expired, &w.st.failed} {
			c.Store(0)
		}
		down := func(lc *lightConn, at time.Time) { w.st.down.Add(1) }
		back := func(lc *lightConn, at time.Time, expired bool, err error) {
			switch {
			case expired:
				w.st.expired.Add(1)
			case err != nil:
				w.st.failed.Add(1)
			default:
				w.mu.Lock()
				w.backs = append(w.backs, at.UnixNano())
				w.mu.Unlock()
				w.st.back.Add(1)
			}
		}
		w.mu.Lock()
		w.backs = nil
		w.attempts, w.attemptT, w.tries = map[string]int{}, map[string]time.Duration{}, map[*lightConn]int{}
		w.mu.Unlock()
		attempt := func(lc *lightConn, kind string, took time.Duration) {
			w.mu.Lock()
			w.attempts[kind]++
			w.attemptT[kind] += took
			if kind != "setwatches" {
				w.tries[lc]++
			}
			w.mu.Unlock()
		}
		w.hooks.disconnect.Store(&down)
		w.hooks.reconnected.Store(&back)
		w.hooks.attempt.Store(&attempt)
		return m, nil

	case "collect-storm":
		w.hooks.disconnect.Store(nil)
		w.hooks.reconnected.Store(nil)
		w.hooks.attempt.Store(nil)
		w.mu.Lock()
		m.Times = w.backs
		m.Attempts, m.AttemptMs = w.attempts, map[string]int64{}
		for k, d := range w.attemptT {
			m.AttemptMs[k] = d.Milliseconds()
		}
		for _, n := range w.tries {
			m.Tries = append(m.Tries, n)
		}
		w.mu.Unlock()
		m.Down, m.Expired, m.Failed = int(w.st.down.Load()), int(w.st.expired.Load()), int(w.st.failed.Load())
		return m, nil

	case "move":
		// Every session's connection closed under it, the session kept: it
		// reconnects to another server and re-registers its watches, as
		// after its server's restart (arm-storm with -1 counts them).
		for _, lc := range w.conns {
			lc.bounce()
		}
		return m, nil

	case "ephemerals":
		var live []*lightConn
		for _, lc := range w.conns {
			if c, exp := lc.state(); c && !exp {
				live = append(live, lc)
			}
		}
		w.pairs = nil
		for j := 0; j+1 < len(live); j += 2 {
			w.pairs = append(w.pairs, [2]*lightConn{live[j], live[j+1]})
		}
		w.gone = make([]atomic.Int64, len(w.pairs))
		err := parallel(ctx, len(w.pairs), 256, func(j int) error {
			p := fmt.Sprintf("%s/e%07d", scaleEph, w.pairs[j][0].id)
			// A session may be between servers (it lost its connection
			// and is coming back) or its server slow to answer: try again
			// for a while; a create that did apply answers NodeExists.
			if _, err := retry(21, time.Second, func() error {
				err := w.pairs[j][0].create(p, nil, vocab.ModeEphemeral)
				if errors.Is(err, vocab.NodeExists) {
					return nil
				}
				return err
			}); err != nil {
				return fmt.Errorf("ephemeral %s: %w", p, err)
			}
			// The watcher may be on a server that has not applied the
			// create yet (ZooKeeper promises order within a session
			// only): a data watch once it sees the node, or the watch
			// would be spent on NodeCreated.
			if _, err := retry(201, 5*time.Millisecond, func() error { return w.pairs[j][1].getDataW(p) }); err != nil {
				return fmt.Errorf("data watch on %s: %w", p, err)
			}
			return nil
		})
		m.Pairs = len(w.pairs)
		return m, err

	case "drop":
		idx := make(map[int]int, len(w.pairs))
		for j, p := range w.pairs {
			idx[p[0].id] = j
		}
		f := func(lc *lightConn, ev zk.WatcherEvent, at time.Time) {
			if ev.Type != zk.EventNodeDeleted || !strings.HasPrefix(ev.Path, scaleEph+"/e") {
				return
			}
			id, err := strconv.Atoi(ev.Path[len(scaleEph)+2:])
			if j, ok := idx[id]; err == nil && ok && w.gone[j].CompareAndSwap(0, at.UnixNano()) {
				w.st.deleted.Add(1)
			}
		}
		w.hooks.event.Store(&f)
		for _, p := range w.pairs {
			p[0].drop()
		}
		return m, nil

	case "collect-expiry":
		w.hooks.event.Store(nil)
		for j := range w.gone {
			if v := w.gone[j].Load(); v != 0 {
				m.Times = append(m.Times, v)
			}
		}
		return m, nil
	}
	return m, fmt.Errorf("unknown command %q", cmd.Cmd)
}

// retry calls f up to tries times, waiting wait between calls, until it
// succeeds; it returns how many calls were retries and f's last error.
func retry(tries int, wait time.Duration, f func() error) (int, error) {
	var err error
	for try := 0; try < tries; try++ {
		if try > 0 {
			time.Sleep(wait)
		}
		if err = f(); err == nil {
			return try, nil
		}
	}
	return tries - 1, err
}
