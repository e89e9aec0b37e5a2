package recipes_test

import (
	"context"
	"fmt"
	"time"

	"coord/client"
	"coord/recipes"
	"coord/recipes/coordconn"
	"coord/vocab"
)

// session opens a session on an in-process three-server coord cluster
// (started once for all the examples); the examples close it when done.
// With a real cluster: coordconn.Connect(ctx, []string{"host1:2182", ...}),
// or zkconn.Connect(ctx, []string{"host1:2181", ...}, zkconn.Options{}) for
// Apache ZooKeeper.
func session() *coordconn.Conn {
	c := sharedCoord(nil).(*coordCluster)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := coordconn.Connect(ctx, c.tc.Addrs(), client.WithSessionTimeout(10*time.Second))
	if err != nil {
		panic(err)
	}
	return conn
}

func ExampleMutex() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	m := recipes.NewMutex(conn, "/examples/mutex", recipes.WithData([]byte("worker-1")))
	if err := m.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	holder, _ := recipes.LockHolder(ctx, conn, "/examples/mutex")
	// Pass m.Token() to the guarded resource, which refuses smaller tokens.
	fmt.Printf("held by %s, fencing token > 0: %v\n", holder, m.Token() > 0)
	if err := m.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: held by worker-1, fencing token > 0: true
}

func ExampleRWMutex() {
	ctx := context.Background()
	a, b := session(), session()
	defer a.Close(ctx)
	defer b.Close(ctx)

	r1 := recipes.NewRWMutex(a, "/examples/rw")
	r2 := recipes.NewRWMutex(b, "/examples/rw")
	_ = r1.RLock(ctx)
	_ = r2.RLock(ctx) // readers share
	fmt.Println("two readers")
	_ = r1.RUnlock(ctx)
	_ = r2.RUnlock(ctx)
	w := recipes.NewRWMutex(a, "/examples/rw")
	_ = w.Lock(ctx)
	fmt.Println("one writer")
	_ = w.Unlock(ctx)
	// Output:
	// two readers
	// one writer
}

func ExampleSemaphore() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	sem := recipes.NewSemaphore(conn, "/examples/sem", 2)
	l1, _ := sem.Acquire(ctx)
	l2, _ := sem.Acquire(ctx)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := sem.Acquire(short)
	fmt.Println("third lease:", err != nil)
	_ = l1.Release(ctx)
	_ = l2.Release(ctx)
	// Output: third lease: true
}

func ExampleElection() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	e := recipes.NewElection(conn, "/examples/election", recipes.WithData([]byte("node-a:8080")))
	if err := e.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := e.Await(ctx); err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := recipes.CurrentLeader(ctx, conn, "/examples/election")
	fmt.Printf("leading: %v, leader: %s\n", e.IsLeader(), leader)
	_ = e.Resign(ctx)
	// Output: leading: true, leader: node-a:8080
}

func ExampleLeaderLatch() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	l := recipes.NewLeaderLatch(conn, "/examples/latch")
	_ = l.Start(ctx)
	_ = l.Await(ctx)
	fmt.Println("has leadership:", l.HasLeadership())
	_ = l.Close(ctx)
	fmt.Println("after close:", l.HasLeadership())
	// Output:
	// has leadership: true
	// after close: false
}

func ExampleBarrier() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	b := recipes.NewBarrier(conn, "/examples/barrier")
	_ = b.Set(ctx)
	done := make(chan error)
	go func() { done <- b.Wait(ctx) }()
	_ = b.Remove(ctx)
	fmt.Println("released:", <-done == nil)
	// Output: released: true
}

func ExampleDoubleBarrier() {
	ctx := context.Background()
	a, b := session(), session()
	defer a.Close(ctx)
	defer b.Close(ctx)

	pa := recipes.NewDoubleBarrier(a, "/examples/double", 2)
	pb := recipes.NewDoubleBarrier(b, "/examples/double", 2)
	entered := make(chan error)
	go func() { entered <- pa.Enter(ctx) }()
	_ = pb.Enter(ctx)
	<-entered
	fmt.Println("both entered")
	left := make(chan error)
	go func() { left <- pa.Leave(ctx) }()
	_ = pb.Leave(ctx)
	<-left
	fmt.Println("both left")
	// Output:
	// both entered
	// both left
}

func ExampleQueue() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	q := recipes.NewQueue(conn, "/examples/queue")
	defer q.Close(ctx)
	for _, s := range []string{"a", "b"} {
		_, _ = q.Offer(ctx, []byte(s))
	}
	first, _ := q.Take(ctx) // blocks while the queue is empty
	// Claim keeps the item until Ack; if this session dies first, the item
	// goes back to the queue.
	cl, _ := q.Claim(ctx)
	_ = cl.Ack(ctx)
	fmt.Printf("%s %s\n", first, cl.Data)
	// Output: a b
}

func ExamplePriorityQueue() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	q := recipes.NewPriorityQueue(conn, "/examples/pq")
	defer q.Close(ctx)
	_, _ = q.Offer(ctx, []byte("low"), 10)
	_, _ = q.Offer(ctx, []byte("urgent"), 0)
	d, _ := q.Take(ctx)
	fmt.Println(string(d))
	d, _ = q.Take(ctx)
	fmt.Println(string(d))
	// Output:
	// urgent
	// low
}

func ExampleDelayQueue() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	q := recipes.NewDelayQueue(conn, "/examples/dq")
	defer q.Close(ctx)
	start := time.Now()
	_, _ = q.Offer(ctx, []byte("later"), 200*time.Millisecond)
	d, _ := q.Take(ctx) // wakes when the item is due
	fmt.Println(string(d), time.Since(start) >= 200*time.Millisecond)
	// Output: later true
}

func ExampleStartTransaction() {
	ctx := context.Background()
	coord, site := session(), session()
	defer coord.Close(ctx)
	defer site.Close(ctx)

	tx, err := recipes.StartTransaction(ctx, coord, "/examples/2pc", "tx1", []string{"db"})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := recipes.JoinTransaction(ctx, site, "/examples/2pc", "tx1", "db")
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s.Vote(ctx, true)
	committed, _ := tx.Decide(ctx)
	learned, _ := s.Outcome(ctx)
	fmt.Println("coordinator:", committed, "site:", learned)
	// Output: coordinator: true site: true
}

func ExampleGroup() {
	ctx := context.Background()
	member, watcher := session(), session()
	defer watcher.Close(ctx)

	g := recipes.NewGroup(watcher, "/examples/services/api")
	w, _ := g.Watch(ctx)
	defer w.Close(ctx)
	_, _ = recipes.NewGroup(member, "/examples/services/api").Join(ctx, "api-1", []byte("10.0.0.1:80"))
	for len(w.Members()) != 1 {
		<-w.Changed()
	}
	fmt.Printf("%s\n", w.Members()["api-1"])
	member.Close(ctx) // the member's session ends: it leaves
	for len(w.Members()) != 0 {
		<-w.Changed()
	}
	fmt.Println("members:", len(w.Members()))
	// Output:
	// 10.0.0.1:80
	// members: 0
}

func ExampleUpdateConfig() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	for _, p := range []string{"/examples/config", "/examples/config/db", "/examples/config/cache"} {
		_, _ = conn.Create(ctx, p, []byte("v1"), vocab.ModePersistent, vocab.OpenACLUnsafe)
	}
	cfg, _ := recipes.WatchConfig(ctx, conn, "/examples/config/db")
	defer cfg.Close(ctx)
	changed := cfg.Changed()
	_ = recipes.UpdateConfig(ctx, conn,
		recipes.ConfigUpdate{Path: "/examples/config/db", Data: []byte("v2"), Version: 0},
		recipes.ConfigUpdate{Path: "/examples/config/cache", Data: []byte("v2"), Version: 0})
	<-changed
	d, _, _ := cfg.Current()
	fmt.Println(string(d))
	// Output: v2
}

func ExampleNameService() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	ns := recipes.NewNameService(conn, "/examples/names")
	a, _ := ns.Register(ctx, "job", []byte("first"))
	b, _ := ns.Register(ctx, "job", []byte("second"))
	d, _ := ns.Resolve(ctx, b)
	fmt.Println(a != b, string(d))
	// Output: true second
}

func ExampleCounter() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	k := recipes.NewCounter(conn, "/examples/counter")
	_, _ = k.Add(ctx, 5)
	v, _ := k.Add(ctx, -2)
	fmt.Println(v)
	// Output: 3
}

func ExampleMasterWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	master, worker, clnt := session(), session(), session()
	defer master.Close(context.Background())
	defer worker.Close(context.Background())
	defer clnt.Close(context.Background())

	done := make(chan struct{}, 2)
	go func() {
		_ = recipes.NewMasterWorker(master, "/examples/mw").RunMaster(ctx)
		done <- struct{}{}
	}()
	go func() {
		_ = recipes.NewMasterWorker(worker, "/examples/mw").RunWorker(ctx, "w1",
			func(_ context.Context, _ string, data []byte) ([]byte, error) {
				return append([]byte("hello, "), data...), nil
			})
		done <- struct{}{}
	}()
	mw := recipes.NewMasterWorker(clnt, "/examples/mw")
	task, _ := mw.Submit(ctx, []byte("world"))
	res, _ := mw.Result(ctx, task)
	fmt.Println(string(res))
	cancel()
	<-done
	<-done
	// Output: hello, world
}

func ExampleNodeCache() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	nc, _ := recipes.NewNodeCache(ctx, conn, "/examples/node")
	defer nc.Close(ctx)
	changed := nc.Changed()
	_, _ = conn.Create(ctx, "/examples/node", []byte("hi"), vocab.ModePersistent, vocab.OpenACLUnsafe)
	<-changed
	d, _, ok := nc.Current()
	fmt.Println(string(d), ok)
	// Output: hi true
}

func ExampleTreeCache() {
	ctx := context.Background()
	conn := session()
	defer conn.Close(ctx)

	_, _ = conn.Create(ctx, "/examples/tree", nil, vocab.ModePersistent, vocab.OpenACLUnsafe)
	tc, _ := recipes.NewTreeCache(ctx, conn, "/examples/tree")
	defer tc.Close(ctx)
	for _, p := range []string{"/examples/tree/a", "/examples/tree/a/b"} {
		_, _ = conn.Create(ctx, p, []byte(p), vocab.ModePersistent, vocab.OpenACLUnsafe)
	}
	for tc.Len() != 3 {
		<-tc.Changed()
	}
	fmt.Println(tc.Children("/examples/tree/a"))
	// Output: [b]
}
