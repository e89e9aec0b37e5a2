package recipes_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coord/recipes"
)

// BenchmarkRecipes measures lock hand-offs per second (8 sessions
// contending for one Mutex, each acquisition a hand-off from the previous
// holder) and queue items per second (4 producers offering, 4 consumers
// taking, every item through the exactly-once take) on a 3-server coord
// cluster and on a 3-server Apache ZooKeeper 3.8 ensemble, side by side:
//
//	go test ./recipes -run '^$' -bench Recipes -benchtime 2000x
func BenchmarkRecipes(b *testing.B) {
	for _, bc := range []struct {
		name string
		get  func(testing.TB) cluster
	}{{"coord", sharedCoord}, {"zookeeper", sharedZK}} {
		b.Run(bc.name+"/lock", func(b *testing.B) { benchLock(b, bc.get(b)) })
		b.Run(bc.name+"/queue", func(b *testing.B) { benchQueue(b, bc.get(b)) })
	}
}

var benchRound atomic.Int64

func benchLock(b *testing.B, c cluster) {
	const sessions = 8
	cs := conns(b, c, sessions)
	dir := fmt.Sprintf("/bench/lock%d", benchRound.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	run(b, sessions, func(i int) error {
		m := recipes.NewMutex(cs[i], dir)
		for left.Add(-1) >= 0 {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			if err := m.Unlock(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handoffs/s")
}

func benchQueue(b *testing.B, c cluster) {
	const producers, consumers = 4, 4
	cs := conns(b, c, producers+consumers)
	dir := fmt.Sprintf("/bench/queue%d", benchRound.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var toOffer, toTake atomic.Int64
	toOffer.Store(int64(b.N))
	toTake.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for i := 0; i < producers+consumers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := recipes.NewQueue(cs[i], dir)
			defer q.Close(ctx)
			if i < producers {
				for toOffer.Add(-1) >= 0 {
					if _, err := q.Offer(ctx, []byte("item")); err != nil {
						errs <- err
						return
					}
				}
				return
			}
			for toTake.Add(-1) >= 0 {
				if _, err := q.Take(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
}
