package recipes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"coord/recipes"
)

// Tasks submitted by clients are run by workers and their results reach
// the clients, through a master change and a worker's death.
func TestMasterWorker(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 5) // two masters, two workers, a client
		ctx := ctxT(t)
		root := testRoot(t)
		rctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		start := func(f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Masters and workers whose sessions the test ends stop
				// with ErrSessionLost.
				if err := f(); err != nil && rctx.Err() == nil && !errors.Is(err, recipes.ErrSessionLost) {
					t.Errorf("%v", err)
				}
			}()
		}
		defer func() { stop(); wg.Wait() }()
		m1 := recipes.NewMasterWorker(cs[0], root, recipes.WithData([]byte("m1")))
		start(func() error { return m1.RunMaster(rctx) })
		// Worker w1 never finishes: its tasks must come back when it dies.
		stuck := make(chan string, 100)
		start(func() error {
			return recipes.NewMasterWorker(cs[2], root).RunWorker(rctx, "w1", func(ctx context.Context, task string, _ []byte) ([]byte, error) {
				stuck <- task
				<-ctx.Done()
				return nil, ctx.Err()
			})
		})
		client := recipes.NewMasterWorker(cs[4], root)
		var tasks []string
		for i := 0; i < 6; i++ {
			task, err := client.Submit(ctx, []byte(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, task)
		}
		within(t, "w1 starting a task", stuck, 30*time.Second)
		// The second master and worker come; the first master's session
		// ends, then the stuck worker's.
		m2 := recipes.NewMasterWorker(cs[1], root, recipes.WithData([]byte("m2")))
		start(func() error { return m2.RunMaster(rctx) })
		start(func() error {
			return recipes.NewMasterWorker(cs[3], root).RunWorker(rctx, "w2", func(_ context.Context, task string, data []byte) ([]byte, error) {
				return []byte("done " + string(data)), nil
			})
		})
		closeConn(t, cs[0])
		closeConn(t, cs[2])
		for i, task := range tasks {
			res, err := client.Result(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprint("done ", i); string(res) != want {
				t.Fatalf("task %s: %q, want %q", task, res, want)
			}
		}
	})
}
