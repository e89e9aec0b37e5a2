package jepsen

import (
	"sync"
	"time"
)

// Outcome is what a client knows of an operation once it returned.
type Outcome string

const (
	// OK: the operation took effect (or the read saw what it returned).
	OK Outcome = "ok"
	// Fail: the operation certainly did not take effect.
	Fail Outcome = "fail"
	// Info: indeterminate (a timeout, a dropped connection): it may or may
	// not have taken effect, now or later.
	Info Outcome = "info"
)

// Op is one operation of a history. Times are nanoseconds since the run
// started. The fields a workload does not use stay zero.
type Op struct {
	Workload string  `json:"workload"`
	Process  int     `json:"process"` // the client (worker) that ran it
	F        string  `json:"f"`       // read, write, cas, create, session, ...
	Key      string  `json:"key,omitempty"`
	Value    int64   `json:"value,omitempty"`   // write/cas: the value written
	Version  int32   `json:"version,omitempty"` // cas: the expected version
	Path     string  `json:"path,omitempty"`
	Session  int64   `json:"session,omitempty"`
	Outcome  Outcome `json:"outcome"`
	Err      string  `json:"err,omitempty"`
	// Results of an ok operation.
	OutValue   int64 `json:"out_value,omitempty"`
	OutVersion int32 `json:"out_version,omitempty"`
	// Zxid is the zxid an ok operation saw (a write's or read's Stat.Mzxid,
	// a create's Czxid); Server the server the client was on.
	Zxid     int64  `json:"zxid,omitempty"`
	Server   string `json:"server,omitempty"`
	Invoke   int64  `json:"invoke"`
	Complete int64  `json:"complete"`
}

// Latency is how long the operation took.
func (o Op) Latency() time.Duration { return time.Duration(o.Complete - o.Invoke) }

// Fault is one window of an injected fault.
type Fault struct {
	Nemesis string `json:"nemesis"`
	Desc    string `json:"desc"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Err     string `json:"err,omitempty"`
}

// RoleChange records the leader the runner saw change.
type RoleChange struct {
	At     int64  `json:"at"`
	Leader string `json:"leader"` // "" : none seen
}

// History collects operations, faults and role changes from many
// goroutines.
type History struct {
	start time.Time

	mu     sync.Mutex
	ops    []Op
	faults []Fault
	roles  []RoleChange
}

// NewHistory starts a history's clock.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the history's clock.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records a completed operation.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// AddFault records a fault window.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.faults = append(h.faults, f)
	h.mu.Unlock()
}

// AddRole records a leader change.
func (h *History) AddRole(r RoleChange) {
	h.mu.Lock()
	h.roles = append(h.roles, r)
	h.mu.Unlock()
}

// Ops returns a copy of the operations of one workload ("" : all).
func (h *History) Ops(workload string) []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Op
	for _, op := range h.ops {
		if workload == "" || op.Workload == workload {
			out = append(out, op)
		}
	}
	return out
}

// Faults and Roles return copies.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Fault(nil), h.faults...)
}

func (h *History) Roles() []RoleChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]RoleChange(nil), h.roles...)
}
