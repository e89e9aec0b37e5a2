package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"coord/vocab"
	"coord/zk"
)

// -scale N: N sessions and -scale-watches watches on one cluster, over
// ZooKeeper's protocol with lightConn (light.go), so that coord and
// Apache ZooKeeper are loaded by the same client. In order:
//
//  1. memory and CPU of every server with no sessions;
//  2. N sessions opened (256 at a time per worker process, session i on
//     server i mod n): the connect rate;
//  3. memory again (heap after a full collection, and RSS) and CPU at idle
//     over -scale-cpu-window while every session pings at a third of its
//     timeout, as clients do: bytes per session and the heartbeat cost;
//  4. the watches: every session leaves a data watch on one hot znode,
//     and the rest of -scale-watches spread over the sessions, cycling
//     through exists on a znode that exists, getData, exists on one that
//     does not, getChildren and addWatch persistent-recursive, over 1,000
//     znodes: the registration rate and bytes per watch;
//  5. fan-out: one setData of the hot znode, timed to each of the N
//     events (the workers share this machine's clock);
//  6. a connect storm: SIGKILL of the leader; every session that loses its
//     server reconnects to another (light.go: as the Java client does) with
//     its id and re-registers its watches (SetWatches2): how long until all
//     are back, and how many expired; the killed server is started again;
//  7. mass expiry: half the sessions each create an ephemeral znode that
//     another session watches, then all of them vanish at once (their
//     connections closed, no closeSession): the time until every
//     ephemeral is gone (NodeDeleted events), while one session keeps
//     writing: its setData p99 before and during the expiries.

const (
	scaleRoot  = benchRoot + "/scale"
	scaleKeys  = 1000 // znodes the watches spread over
	scaleHot   = scaleRoot + "/hot"
	scaleEph   = scaleRoot + "/eph"
	scaleWrite = scaleRoot + "/w" // the expiry phase's writer; nobody watches it
)

func scaleKey(j int) string { return fmt.Sprintf("%s/k/k%05d", scaleRoot, j%scaleKeys) }

// scaleServer is one server's side of -scale.
type scaleServer struct {
	Name string `json:"name"`
	// Live heap after a full collection and RSS: with no sessions, with the
	// sessions, and with the watches too.
	HeapEmpty    int64 `json:"heap_empty"`
	HeapSessions int64 `json:"heap_sessions"`
	HeapWatches  int64 `json:"heap_watches"`
	RSSEmpty     int64 `json:"rss_empty"`
	RSSSessions  int64 `json:"rss_sessions"`
	RSSWatches   int64 `json:"rss_watches"`
	// CPU in cores over the window: without sessions, and with every
	// session pinging.
	CPUEmpty float64 `json:"cpu_empty"`
	CPUIdle  float64 `json:"cpu_idle"`
	Sessions int     `json:"sessions"` // connected to it after the connect phase
}

type scaleResult struct {
	Sessions       int           `json:"sessions"`
	Timeout        time.Duration `json:"timeout_ns"`
	Connect        time.Duration `json:"connect_ns"`
	ConnectRetries int           `json:"connect_retries"`
	Servers        []scaleServer `json:"servers"`
	ClientCPUIdle  float64       `json:"client_cpu_idle"` // this process, cores, while the sessions idle

	Watches       int           `json:"watches"`
	WatchRegister time.Duration `json:"watch_register_ns"`

	FanoutWatchers  int           `json:"fanout_watchers"`
	FanoutDelivered int           `json:"fanout_delivered"`
	FanoutAck       time.Duration `json:"fanout_ack_ns"`
	FanoutP50       time.Duration `json:"fanout_p50_ns"`
	FanoutP99       time.Duration `json:"fanout_p99_ns"`
	FanoutLast      time.Duration `json:"fanout_last_ns"`

	// The move (-scale-phases move): every session taken to another
	// server with its watches; the servers' CPU over it (summed, seconds)
	// and what they would have used idle in as long.
	MoveSessions  int           `json:"move_sessions,omitempty"`
	MoveBack      int           `json:"move_back,omitempty"`
	MoveExpired   int           `json:"move_expired,omitempty"`
	MoveFailed    int           `json:"move_failed,omitempty"`
	MoveWatches   int           `json:"move_watches,omitempty"`
	MoveP50       time.Duration `json:"move_p50_ns,omitempty"`
	MoveAllBack   time.Duration `json:"move_all_back_ns,omitempty"`
	MoveCPU       float64       `json:"move_cpu_s,omitempty"`
	MoveCPUIdle   float64       `json:"move_cpu_idle_s,omitempty"`
	MoveTriesP50  int           `json:"move_tries_p50,omitempty"`
	MoveTriesMax  int           `json:"move_tries_max,omitempty"`
	MoveSetWatchN int           `json:"move_setwatches_failed,omitempty"` // tries whose SetWatches2 failed

	StormKilled       string        `json:"storm_killed"`
	StormDisconnected int           `json:"storm_disconnected"`
	StormBack         int           `json:"storm_back"`
	StormExpired      int           `json:"storm_expired"`
	StormFailed       int           `json:"storm_failed"`
	StormWatches      int           `json:"storm_watches"` // re-registered by the sessions that moved
	StormP50          time.Duration `json:"storm_p50_ns"`
	StormAllBack      time.Duration `json:"storm_all_back_ns"`
	// The moved sessions' reconnect tries: by how each ended (attemptKind),
	// the time their handshakes took (ms, summed), and tries per session.
	StormAttempts  map[string]int   `json:"storm_attempts,omitempty"`
	StormAttemptMs map[string]int64 `json:"storm_attempt_ms,omitempty"`
	StormTriesP50  int              `json:"storm_tries_p50,omitempty"`
	StormTriesMax  int              `json:"storm_tries_max,omitempty"`

	ExpirySessions  int           `json:"expiry_sessions"`
	ExpiryCreate    time.Duration `json:"expiry_create_ns"`
	ExpiryDeleted   int           `json:"expiry_deleted"` // NodeDeleted events seen
	ExpiryLeft      int           `json:"expiry_left"`    // ephemerals still there at the end
	ExpiryFirst     time.Duration `json:"expiry_first_ns"`
	ExpiryLast      time.Duration `json:"expiry_last_ns"`
	WriteP99Before  time.Duration `json:"write_p99_before_ns"`
	WriteP99During  time.Duration `json:"write_p99_during_ns"`
	WriteMaxBefore  time.Duration `json:"write_max_before_ns"`
	WriteMaxDuring  time.Duration `json:"write_max_during_ns"`
	WritesDuring    int           `json:"writes_during"`
	WriteErrsDuring int           `json:"write_errors_during"`
}

// cpuSeconds is the user and system CPU time of process pid.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// pinger pings every session at a third of its timeout, spread evenly.
type pinger struct {
	slots []atomic.Pointer[lightConn]
	stop  chan struct{}
	done  chan struct{}
	// gapMax is the longest time between two pings of one session (ns):
	// a session whose pings stall here for its timeout expires for the
	// load client's sake, not the server's.
	gapMax atomic.Int64
}

func startPinger(n int, timeout time.Duration) *pinger {
	p := &pinger{slots: make([]atomic.Pointer[lightConn], n), stop: make(chan struct{}), done: make(chan struct{})}
	const tick = 20 * time.Millisecond
	per := max(1, int(int64(n)*int64(tick)/int64(timeout/3))+1)
	go func() {
		defer close(p.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		next := 0
		last := make([]int64, n)
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			for k := 0; k < per; k++ {
				if lc := p.slots[next].Load(); lc != nil {
					now := time.Now().UnixNano()
					if gap := now - last[next]; last[next] != 0 && gap > p.gapMax.Load() {
						p.gapMax.Store(gap)
					}
					last[next] = now
					lc.ping()
				}
				next = (next + 1) % n
			}
		}
	}()
	return p
}

func (p *pinger) close() {
	close(p.stop)
	<-p.done
}

// parallel runs f(i) for i in [0, n) on workers goroutines and returns the
// first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && first.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return ctx.Err()
}

// runScale is -scale; see the comment above. The sessions live in worker
// processes (scaleworker.go), at most scalePerWorker each: a process here
// may hold at most `ulimit -n` descriptors (20,000 on the machine these
// numbers come from, with no way to raise it).
func (b *bench) runScale(ctx context.Context, out io.Writer, n, watches int, timeout, cpuWindow time.Duration, phases map[string]bool) (scaleResult, error) {
	res := scaleResult{Sessions: n, Timeout: timeout}
	e := b.ens
	servers := b.servers
	say := func(format string, a ...any) {
		fmt.Fprintf(out, "# scale: "+format+"\n", a...)
	}
	if lim := fileLimit(); lim > 0 {
		if most := (n + len(servers) - 2) / (len(servers) - 1); uint64(most)+2000 > lim {
			return res, fmt.Errorf("with %d servers a server may hold %d sessions (after the leader's move to the others), more than a process may open here (ulimit -n %d): add servers (-observers)", len(servers), most, lim)
		}
	}
	hooks := &lightHooks{}
	admin, err := dialLight(ctx, -1, servers, 0, timeout, hooks)
	if err != nil {
		return res, err
	}
	defer admin.drop()
	ping := startPinger(2, timeout)
	defer ping.close()
	ping.slots[0].Store(admin)
	for _, p := range []string{scaleRoot, scaleRoot + "/k", scaleHot, scaleEph, scaleWrite} {
		if err := admin.create(p, []byte("x"), vocab.ModePersistent); err != nil && !errors.Is(err, vocab.NodeExists) {
			return res, fmt.Errorf("creating %s: %w", p, err)
		}
	}
	for j := range scaleKeys {
		if err := admin.create(scaleKey(j), []byte("0123456789"), vocab.ModePersistent); err != nil && !errors.Is(err, vocab.NodeExists) {
			return res, fmt.Errorf("creating %s: %w", scaleKey(j), err)
		}
	}

	res.Servers = make([]scaleServer, e.size())
	for i := range res.Servers {
		res.Servers[i].Name = e.name(i + 1)
	}
	memory := func(set func(s *scaleServer, heap, rss int64)) {
		for i := range res.Servers {
			heap := e.liveHeap(ctx, i+1)
			rss := int64(0)
			if pid := e.pid(i + 1); pid > 0 {
				rss = rssOf(pid)
			}
			set(&res.Servers[i], heap, rss)
		}
	}
	var workers *scaleWorkers
	cpu := func(set func(s *scaleServer, cores float64)) float64 {
		before := make([]float64, e.size())
		for i := range before {
			before[i] = cpuSeconds(e.pid(i + 1))
		}
		self := workers.cpuSeconds()
		t := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(cpuWindow):
		}
		d := time.Since(t).Seconds()
		for i := range before {
			set(&res.Servers[i], (cpuSeconds(e.pid(i+1))-before[i])/d)
		}
		return (workers.cpuSeconds() - self) / d
	}
	memory(func(s *scaleServer, heap, rss int64) { s.HeapEmpty, s.RSSEmpty = heap, rss })
	cpu(func(s *scaleServer, c float64) { s.CPUEmpty = c })
	say("no sessions: %s", serverLine(res.Servers, func(s scaleServer) string {
		return fmt.Sprintf("heap %s rss %s cpu %.3f", mib(s.HeapEmpty), mib(s.RSSEmpty), s.CPUEmpty)
	}))

	workers, err = startScaleWorkers(ctx, n, servers, timeout)
	if err != nil {
		return res, err
	}
	defer workers.stop()
	say("%d worker processes of at most %d sessions each", len(workers.procs), scalePerWorker)

	// 2. Connect.
	t0 := time.Now()
	stopProgress := workers.progress(out, "connected", n, func(s scaleStatus) int64 { return s.Connected })
	dones, err := workers.do(scaleCmd{Cmd: "connect"})
	stopProgress()
	res.Connect = time.Since(t0)
	if err != nil {
		return res, err
	}
	for _, d := range dones {
		res.ConnectRetries += d.Retries
		for i, c := range d.PerServer {
			res.Servers[i].Sessions += c
		}
	}
	say("%d sessions in %v (%.0f/s, %d retries)", n, res.Connect.Round(time.Millisecond), float64(n)/res.Connect.Seconds(), res.ConnectRetries)
	time.Sleep(3 * time.Second)
	memory(func(s *scaleServer, heap, rss int64) { s.HeapSessions, s.RSSSessions = heap, rss })
	res.ClientCPUIdle = cpu(func(s *scaleServer, c float64) { s.CPUIdle = c })
	say("%d sessions idle: %s; the workers %.3f cores", n, serverLine(res.Servers, func(s scaleServer) string {
		return fmt.Sprintf("%d sessions heap %s rss %s cpu %.3f", s.Sessions, mib(s.HeapSessions), mib(s.RSSSessions), s.CPUIdle)
	}), res.ClientCPUIdle)
	if st := workers.status(); st.Lost > 0 {
		return res, fmt.Errorf("while idle: %d sessions lost their connection (%d expired)", st.Lost, st.Expired)
	}

	// 4. Watches.
	per := max(1, watches/n)
	t0 = time.Now()
	stopProgress = workers.progress(out, "watches", per*n, func(s scaleStatus) int64 { return s.Registered })
	dones, err = workers.do(scaleCmd{Cmd: "watch", Per: per})
	stopProgress()
	res.WatchRegister = time.Since(t0)
	if err != nil {
		return res, err
	}
	for _, d := range dones {
		res.Watches += d.Watches
	}
	time.Sleep(2 * time.Second)
	memory(func(s *scaleServer, heap, rss int64) { s.HeapWatches, s.RSSWatches = heap, rss })
	say("%d watches in %v (%.0f/s): %s", res.Watches, res.WatchRegister.Round(time.Millisecond), float64(res.Watches)/res.WatchRegister.Seconds(),
		serverLine(res.Servers, func(s scaleServer) string {
			return fmt.Sprintf("heap %s rss %s", mib(s.HeapWatches), mib(s.RSSWatches))
		}))

	// The move: every session to another server, its watches with it.
	if phases["move"] {
		if err := b.scaleMove(ctx, out, workers, &res, n); err != nil {
			return res, err
		}
	}

	// 5. Fan-out.
	if _, err := workers.do(scaleCmd{Cmd: "arm-fanout"}); err != nil {
		return res, err
	}
	start := time.Now()
	if err := admin.setData(scaleHot, []byte("changed")); err != nil {
		return res, fmt.Errorf("fan-out setData: %w", err)
	}
	res.FanoutAck = time.Since(start)
	workers.waitFor(ctx, 60*time.Second, func(s scaleStatus) bool { return s.Delivered >= int64(n) })
	dones, err = workers.do(scaleCmd{Cmd: "collect-fanout"})
	if err != nil {
		return res, err
	}
	lat := gatherSince(dones, start)
	res.FanoutWatchers, res.FanoutDelivered = n, int(lat.n)
	res.FanoutP50, res.FanoutP99, res.FanoutLast = lat.percentile(0.5), lat.percentile(0.99), lat.percentile(1)
	say("fan-out of one setData to %d watchers: %d events, ack %v, p50 %v, p99 %v, last %v", n, res.FanoutDelivered,
		res.FanoutAck.Round(time.Microsecond), res.FanoutP50.Round(time.Microsecond), res.FanoutP99.Round(time.Microsecond), res.FanoutLast.Round(time.Microsecond))

	if phases["storm"] {
		// 6. The connect storm.
		leader, err := e.waitLeader(ctx, 30*time.Second, 0)
		if err != nil {
			return res, err
		}
		res.StormKilled = e.name(leader)
		dones, err = workers.do(scaleCmd{Cmd: "arm-storm", Server: leader - 1})
		if err != nil {
			return res, err
		}
		for _, d := range dones {
			res.StormWatches += d.Watches
		}
		kill := time.Now()
		<-e.killAsync(leader)
		say("SIGKILL %s (leader) with %d sessions on it", res.StormKilled, res.Servers[leader-1].Sessions)
		var quietSince time.Time
		last := int64(-1)
		workers.waitFor(ctx, lightReconnectFor+10*time.Second, func(s scaleStatus) bool {
			if t := s.Down + s.Back + s.Expired + s.Failed; t != last {
				last, quietSince = t, time.Now()
			}
			return s.Down == s.Back+s.Expired+s.Failed && time.Since(kill) > 5*time.Second && time.Since(quietSince) > 3*time.Second
		})
		dones, err = workers.do(scaleCmd{Cmd: "collect-storm"})
		if err != nil {
			return res, err
		}
		back := gatherSince(dones, kill)
		res.StormAttempts, res.StormAttemptMs = map[string]int{}, map[string]int64{}
		var tries []int
		for _, d := range dones {
			res.StormDisconnected += d.Down
			res.StormExpired += d.Expired
			res.StormFailed += d.Failed
			for k, n := range d.Attempts {
				res.StormAttempts[k] += n
				res.StormAttemptMs[k] += d.AttemptMs[k]
			}
			tries = append(tries, d.Tries...)
		}
		res.StormTriesP50, res.StormTriesMax = medianMax(tries)
		res.StormBack = int(back.n)
		res.StormP50, res.StormAllBack = back.percentile(0.5), back.percentile(1)
		say("storm: %d sessions lost their server, %d back (p50 %v, all %v after the kill), %d expired, %d failed; the killed server's sessions held %d watches",
			res.StormDisconnected, res.StormBack, res.StormP50.Round(time.Millisecond), res.StormAllBack.Round(time.Millisecond), res.StormExpired, res.StormFailed, res.StormWatches)
		if err := e.restart(ctx, leader); err != nil {
			return res, fmt.Errorf("restarting %s: %w", res.StormKilled, err)
		}
		if nl, err := e.waitLeader(ctx, 60*time.Second, 0); err == nil {
			if err := e.waitCaughtUp(ctx, leader, nl, 2*time.Minute); err != nil {
				return res, fmt.Errorf("%s catching up: %w", res.StormKilled, err)
			}
		}

	}

	if !phases["expiry"] {
		return res, nil
	}
	// 7. Mass expiry.
	t0 = time.Now()
	dones, err = workers.do(scaleCmd{Cmd: "ephemerals"})
	res.ExpiryCreate = time.Since(t0)
	if err != nil {
		return res, err
	}
	for _, d := range dones {
		res.ExpirySessions += d.Pairs
	}
	writer, err := dialLight(ctx, -2, servers, 0, timeout, hooks)
	if err != nil {
		return res, err
	}
	defer writer.drop()
	ping.slots[1].Store(writer)
	type write struct {
		at  time.Time
		lat time.Duration
		err bool
	}
	var writes []write
	stopW := make(chan struct{})
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		for {
			select {
			case <-stopW:
				return
			default:
			}
			at := time.Now()
			err := writer.setData(scaleWrite, []byte("w"))
			writes = append(writes, write{at, time.Since(at), err != nil})
		}
	}()
	time.Sleep(10 * time.Second) // the writer's normal latency
	dropAt := time.Now()
	if _, err := workers.do(scaleCmd{Cmd: "drop"}); err != nil {
		close(stopW)
		<-wdone
		return res, err
	}
	say("%d sessions with an ephemeral each (made in %v) dropped without closing; waiting for their expiry", res.ExpirySessions, res.ExpiryCreate.Round(time.Millisecond))
	workers.waitFor(ctx, timeout+90*time.Second, func(s scaleStatus) bool { return s.Deleted >= int64(res.ExpirySessions) })
	time.Sleep(2 * time.Second)
	close(stopW)
	<-wdone
	dones, err = workers.do(scaleCmd{Cmd: "collect-expiry"})
	if err != nil {
		return res, err
	}
	gone := gatherSince(dones, dropAt)
	res.ExpiryDeleted = int(gone.n)
	res.ExpiryFirst, res.ExpiryLast = gone.percentile(0), gone.percentile(1)
	// The expiries' window: from a second before the first ephemeral went
	// to a second after the last.
	inExpiries := func(at time.Time) bool {
		return gone.n > 0 && at.After(dropAt.Add(res.ExpiryFirst-time.Second)) && at.Before(dropAt.Add(res.ExpiryLast+time.Second))
	}
	var (
		before, during hist
		slow           []write // during, the slowest first once sorted
	)
	for _, w := range writes {
		switch {
		case w.at.Before(dropAt):
			before.record(w.lat)
		case inExpiries(w.at):
			if w.err {
				res.WriteErrsDuring++
			}
			during.record(w.lat)
			slow = append(slow, w)
		}
	}
	// The slowest writes during the expiries and when they began, to lay
	// beside the servers' logs.
	slices.SortFunc(slow, func(a, b write) int { return cmp.Compare(b.lat, a.lat) })
	for _, w := range slow[:min(5, len(slow))] {
		say("a slow setData during the expiries: %v, began %v after the drop (%s)", w.lat.Round(time.Microsecond), w.at.Sub(dropAt).Round(time.Millisecond), w.at.UTC().Format("15:04:05.000"))
	}
	res.WriteP99Before, res.WriteP99During = before.percentile(0.99), during.percentile(0.99)
	res.WriteMaxBefore, res.WriteMaxDuring, res.WritesDuring = before.percentile(1), during.percentile(1), int(during.n)
	if r, err := admin.call(zk.OpGetChildren, &zk.GetChildrenRequest{Path: scaleEph}, lightCallWait); err == nil {
		var kids zk.GetChildrenResponse
		if zk.Unmarshal(r.body, &kids) == nil {
			res.ExpiryLeft = len(kids.Children)
		}
	}
	say("expiry: %d of %d ephemerals deleted (events), first %v and last %v after the drop, %d left; writes p99 %v before, %v during (%d writes, max %v before, %v during, %d errors)",
		res.ExpiryDeleted, res.ExpirySessions, res.ExpiryFirst.Round(time.Millisecond), res.ExpiryLast.Round(time.Millisecond), res.ExpiryLeft,
		res.WriteP99Before.Round(time.Microsecond), res.WriteP99During.Round(time.Microsecond), res.WritesDuring,
		res.WriteMaxBefore.Round(time.Microsecond), res.WriteMaxDuring.Round(time.Microsecond), res.WriteErrsDuring)
	return res, nil
}

// scaleMove closes every session's connection and waits until each is
// back on another server with its watches (re-registered by SetWatches2),
// or expired, or given up; the servers' CPU over that time is the cost of
// taking them back.
func (b *bench) scaleMove(ctx context.Context, out io.Writer, workers *scaleWorkers, res *scaleResult, n int) error {
	e := b.ens
	dones, err := workers.do(scaleCmd{Cmd: "arm-storm", Server: -1})
	if err != nil {
		return err
	}
	for _, d := range dones {
		res.MoveWatches += d.Watches
	}
	cpu0 := make([]float64, e.size())
	for i := range cpu0 {
		cpu0[i] = cpuSeconds(e.pid(i + 1))
	}
	start := time.Now()
	if _, err := workers.do(scaleCmd{Cmd: "move"}); err != nil {
		return err
	}
	workers.waitFor(ctx, lightReconnectFor+10*time.Second, func(s scaleStatus) bool {
		return s.Down >= int64(n) && s.Down == s.Back+s.Expired+s.Failed
	})
	took := time.Since(start)
	for i := range cpu0 {
		res.MoveCPU += cpuSeconds(e.pid(i+1)) - cpu0[i]
		res.MoveCPUIdle += res.Servers[i].CPUIdle * took.Seconds()
	}
	dones, err = workers.do(scaleCmd{Cmd: "collect-storm"})
	if err != nil {
		return err
	}
	back := gatherSince(dones, start)
	var tries []int
	for _, d := range dones {
		res.MoveSessions += d.Down
		res.MoveExpired += d.Expired
		res.MoveFailed += d.Failed
		res.MoveSetWatchN += d.Attempts["setwatches"]
		tries = append(tries, d.Tries...)
	}
	res.MoveTriesP50, res.MoveTriesMax = medianMax(tries)
	res.MoveBack = int(back.n)
	res.MoveP50, res.MoveAllBack = back.percentile(0.5), back.percentile(1)
	fmt.Fprintf(out, "# scale: move: %d sessions off their server, %d back on another (p50 %v, all %v), %d expired, %d failed, %d watches re-registered; the servers' CPU %.2f s (%.2f s idle in as long)\n",
		res.MoveSessions, res.MoveBack, res.MoveP50.Round(time.Millisecond), res.MoveAllBack.Round(time.Millisecond), res.MoveExpired, res.MoveFailed, res.MoveWatches, res.MoveCPU, res.MoveCPUIdle)
	if st := workers.status(); st.Lost > 0 {
		return fmt.Errorf("after the move: %d sessions not connected (%d expired)", st.Lost, st.Expired)
	}
	return nil
}

// medianMax returns the median and the largest of tries (sorted in place),
// zeros for none.
func medianMax(tries []int) (p50, most int) {
	if len(tries) == 0 {
		return 0, 0
	}
	slices.Sort(tries)
	return tries[(len(tries)-1)/2], tries[len(tries)-1]
}

// gatherSince records the workers' times (Unix ns) as durations since t
// (percentile 0 and 1 are the first and the last, exactly).
func gatherSince(dones []scaleMsg, t time.Time) *hist {
	h := &hist{}
	for _, d := range dones {
		for _, at := range d.Times {
			h.record(time.Duration(at - t.UnixNano()))
		}
	}
	return h
}

// fileLimit is this process's open-file limit (0 if unknown).
func fileLimit() uint64 {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return lim.Cur
}

func mib(b int64) string { return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20)) }

func serverLine(ss []scaleServer, f func(scaleServer) string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.Name + " " + f(s)
	}
	return strings.Join(parts, "; ")
}

// startProgress prints count/total every 5 s until the returned func is
// called.
func startProgress(out io.Writer, what string, total int, count *atomic.Int64, extra func() string) func() {
	start := time.Now()
	return every(5*time.Second, func() {
		c := count.Load()
		fmt.Fprintf(out, "# scale: %s %d of %d after %v (%.0f/s)%s\n", what, c, total, time.Since(start).Round(time.Second), float64(c)/time.Since(start).Seconds(), extra())
	})
}

// every calls f every d until the returned func is called, which returns
// once f is no longer running.
func every(d time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// printScale prints the summary table of -scale.
func printScale(out io.Writer, r scaleResult) {
	var heapS, heapW, rssS int64
	var cpuE, cpuI float64
	for _, s := range r.Servers {
		heapS += s.HeapSessions - s.HeapEmpty
		heapW += s.HeapWatches - s.HeapSessions
		rssS += s.RSSSessions - s.RSSEmpty
		cpuE += s.CPUEmpty
		cpuI += s.CPUIdle
	}
	fmt.Fprintf(out, "scale  sessions %d (timeout %v): connect %v (%.0f/s); heap per session %.0f B (all servers), RSS per session %.0f B; CPU idle %.3f cores (%.3f without sessions), client %.3f\n",
		r.Sessions, r.Timeout, r.Connect.Round(time.Millisecond), float64(r.Sessions)/r.Connect.Seconds(), float64(heapS)/float64(r.Sessions), float64(rssS)/float64(r.Sessions), cpuI, cpuE, r.ClientCPUIdle)
	fmt.Fprintf(out, "scale  watches %d: registered in %v (%.0f/s); heap per watch %.1f B\n",
		r.Watches, r.WatchRegister.Round(time.Millisecond), float64(r.Watches)/r.WatchRegister.Seconds(), float64(heapW)/float64(max(1, r.Watches)))
	fmt.Fprintf(out, "scale  fan-out to %d watchers: %d delivered, p50 %v p99 %v last %v\n",
		r.FanoutWatchers, r.FanoutDelivered, r.FanoutP50.Round(time.Microsecond), r.FanoutP99.Round(time.Microsecond), r.FanoutLast.Round(time.Microsecond))
	if r.MoveSessions > 0 {
		extra := max(0, r.MoveCPU-r.MoveCPUIdle)
		fmt.Fprintf(out, "scale  move of every session to another server: %d moved, %d back (p50 %v, all %v), %d expired, %d failed, %d watches re-registered; servers' CPU %.2f s above idle (%.1f µs a session, %.2f µs a watch); tries per session p50 %d, max %d\n",
			r.MoveSessions, r.MoveBack, r.MoveP50.Round(time.Millisecond), r.MoveAllBack.Round(time.Millisecond), r.MoveExpired, r.MoveFailed, r.MoveWatches,
			extra, extra*1e6/float64(r.MoveSessions), extra*1e6/float64(max(1, r.MoveWatches)), r.MoveTriesP50, r.MoveTriesMax)
	}
	if r.StormKilled == "" {
		fmt.Fprintf(out, "scale  storm not run (-scale-phases)\n")
	} else {
		fmt.Fprintf(out, "scale  storm after SIGKILL of %s: %d disconnected, %d back (p50 %v, all %v), %d expired, %d failed, %d watches re-registered by the moved sessions\n",
			r.StormKilled, r.StormDisconnected, r.StormBack, r.StormP50.Round(time.Millisecond), r.StormAllBack.Round(time.Millisecond), r.StormExpired, r.StormFailed, r.StormWatches)
	}
	if len(r.StormAttempts) > 0 {
		var kinds []string
		for _, k := range []string{"ok", "closed", "timeout", "dial", "setwatches", "expired"} {
			if n := r.StormAttempts[k]; n > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %d (handshake mean %v)", k, n, (time.Duration(r.StormAttemptMs[k])*time.Millisecond/time.Duration(n)).Round(time.Millisecond)))
			}
		}
		fmt.Fprintf(out, "scale  storm tries: %s; per session p50 %d, max %d\n", strings.Join(kinds, ", "), r.StormTriesP50, r.StormTriesMax)
	}
	if r.ExpirySessions == 0 {
		fmt.Fprintf(out, "scale  expiry not run (-scale-phases)\n")
		return
	}
	fmt.Fprintf(out, "scale  expiry of %d sessions at once: %d ephemerals deleted from %v to %v after the drop, %d left; setData p99 %v before, %v during (max %v before, %v during, %d writes, %d errors)\n",
		r.ExpirySessions, r.ExpiryDeleted, r.ExpiryFirst.Round(time.Millisecond), r.ExpiryLast.Round(time.Millisecond), r.ExpiryLeft,
		r.WriteP99Before.Round(time.Microsecond), r.WriteP99During.Round(time.Microsecond),
		r.WriteMaxBefore.Round(time.Microsecond), r.WriteMaxDuring.Round(time.Microsecond), r.WritesDuring, r.WriteErrsDuring)
}
