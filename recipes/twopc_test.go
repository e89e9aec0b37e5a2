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

// Every participant learns the same outcome: commit when all vote commit,
// abort when one votes abort or dies before voting, and the sites decide
// themselves when the coordinator is gone.
func TestTwoPhaseCommit(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		const n = 4
		ctx := ctxT(t)
		dir := testRoot(t)
		sites := make([]string, n)
		for i := range sites {
			sites[i] = fmt.Sprint("site", i)
		}
		for _, tc := range []struct {
			name       string
			abortAt    int // a site voting abort (-1: none)
			dieAt      int // a site whose session ends before voting (-1: none)
			coordDies  bool
			wantCommit bool
		}{
			{"all-commit", -1, -1, false, true},
			{"one-aborts", 2, -1, false, false},
			{"site-dies", -1, 1, false, false},
			{"coordinator-dies", -1, -1, true, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cs := conns(t, c, n+1)
				tx, err := recipes.StartTransaction(ctx, cs[n], dir, tc.name, sites)
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				outcomes := map[string]bool{}
				var voted atomic.Int32
				allVoted := make(chan struct{})
				var wg sync.WaitGroup
				errs := make(chan error, n+1)
				for i := 0; i < n; i++ {
					s, err := recipes.JoinTransaction(ctx, cs[i], dir, tc.name, sites[i])
					if err != nil {
						t.Fatal(err)
					}
					if i == tc.dieAt {
						closeConn(t, cs[i])
						if voted.Add(1) == n {
							close(allVoted)
						}
						continue
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := s.Vote(ctx, i != tc.abortAt)
						if voted.Add(1) == n {
							close(allVoted)
						}
						if err != nil {
							errs <- err
							return
						}
						ok, err := s.Outcome(ctx)
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						outcomes[sites[i]] = ok
						mu.Unlock()
					}()
				}
				if tc.coordDies {
					within(t, "the votes", allVoted, 30*time.Second)
					closeConn(t, cs[n])
				} else {
					ok, err := tx.Decide(ctx)
					if err != nil {
						t.Fatal(err)
					}
					mu.Lock()
					outcomes["coordinator"] = ok
					mu.Unlock()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatal(err)
				}
				for who, ok := range outcomes {
					if ok != tc.wantCommit {
						t.Errorf("%s learned commit=%v, want %v", who, ok, tc.wantCommit)
					}
				}
			})
		}
	})
}

// A coordinator whose votes do not come in time aborts.
func TestTwoPhaseCommitTimeout(t *testing.T) {
	both(t, func(t *testing.T, c cluster) {
		cs := conns(t, c, 2)
		ctx := ctxT(t)
		tx, err := recipes.StartTransaction(ctx, cs[0], testRoot(t), "tx", []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := recipes.JoinTransaction(ctx, cs[1], testRoot(t), "tx", "a")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan bool, 1)
		go func() {
			if err := s.Vote(ctx, true); err != nil {
				t.Error(err)
			}
			ok, _ := s.Outcome(ctx)
			got <- ok
		}()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if ok, err := tx.Decide(short); err != nil || ok {
			t.Fatalf("Decide without b's vote = %v %v, want abort", ok, err)
		}
		if ok := within(t, "a's outcome", got, 30*time.Second); ok {
			t.Fatal("a learned commit")
		}
	})
}
