package jepsen

import (
	"context"
	"sync"
)

// A Workload drives clients against the cluster and checks what they saw.
// Setup prepares the znodes it needs; Run runs its workers until ctx ends
// (every operation is bounded by Env.OpTimeout, so Run returns soon after);
// Check judges the history once the faults are healed and the cluster
// has recovered, and may read the final state.
type Workload interface {
	Name() string
	Setup(ctx context.Context, env *Env) error
	Run(ctx context.Context, env *Env)
	Check(ctx context.Context, env *Env) Verdict
}

// Result is a checker's verdict.
type Result string

const (
	Pass    Result = "pass"
	Failed  Result = "fail"
	Unknown Result = "unknown" // the checker could not decide (a timeout)
)

// Verdict is one checker's judgement of a run.
type Verdict struct {
	Checker string   `json:"checker"`
	Result  Result   `json:"result"`
	Summary string   `json:"summary"`
	Details []string `json:"details,omitempty"` // the violations, smallest first
	Files   []string `json:"files,omitempty"`   // in the report directory
}

// Workloads lists the workloads by name, sized for workers clients each.
func Workloads(workers int) map[string]Workload {
	return map[string]Workload{
		"register":   &Register{Keys: 3, Workers: workers},
		"sessions":   &Sessions{Workers: max(1, workers/2), Racers: 20},
		"ryw":        &RYW{Workers: workers},
		"sequential": &Sequential{Workers: max(1, workers/2)},
		"gosessions": &GoSessions{Keys: 3, Workers: max(1, workers/2)},
		"lock":       &Lock{Workers: max(2, workers/2)},
		"queue":      &Queue{Workers: max(2, workers/2)},
		"watches":    &Watches{Nodes: 4, Writers: max(1, workers/2)},
		"minority":   &Minority{},
	}
}

func runWorkers(ctx context.Context, n int, f func(worker int)) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}
