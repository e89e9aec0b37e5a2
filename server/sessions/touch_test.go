package sessions

import (
	"errors"
	"slices"
	"testing"
)

// followerWorld is a following server with a connected session (timeout
// 10 s) of each name, settled.
func followerWorld(t *testing.T, names ...string) *world {
	t.Helper()
	w := newWorld(t, "touch")
	w.rep.follower.Store(true)
	for _, n := range names {
		w.run("connect " + n + " timeout=10000")
	}
	w.settle()
	return w
}

// A follower's report of the sessions heard from it that fails (the
// leader slow to answer, or changing) is not lost: the next report carries
// those sessions. Before, they were dropped, and a leader that missed a
// few reports in a row expired sessions whose clients kept pinging.
func TestFailedTouchReportGoesWithTheNext(t *testing.T) {
	w := followerWorld(t, "a")
	defer w.close()
	id := w.session("a").id
	w.l.Touch(id) // a ping

	var failed, sent []int64
	_, err := w.l.ReportTouches(func(ids []int64) error {
		failed = ids
		return errors.New("the leader did not answer in time")
	})
	if err == nil || !slices.Contains(failed, id) {
		t.Fatalf("the first report %v (err %v) does not carry session 0x%x, touched on the follower", failed, err, id)
	}
	if _, err := w.l.ReportTouches(func(ids []int64) error { sent = ids; return nil }); err != nil || !slices.Contains(sent, id) {
		t.Fatalf("after a failed report, the next one carries %v (err %v), not session 0x%x", sent, err, id)
	}
	sent = nil
	w.l.ReportTouches(func(ids []int64) error { sent = ids; return nil })
	if len(sent) != 0 {
		t.Fatalf("a report that went through is sent again: %v", sent)
	}
	// The leader reports nothing: its touches extend the deadlines at once.
	w.rep.follower.Store(false)
	w.l.Touch(id)
	w.l.ReportTouches(func(ids []int64) error { sent = ids; return nil })
	if len(sent) != 0 {
		t.Fatalf("the leader reported %v", sent)
	}
}

// A follower's clients touch their connections (no lock); each report
// carries every session heard from since the last one once, including
// one whose connection ended after its last request, and none twice.
func TestFollowerReportsItsConnectionsTouches(t *testing.T) {
	w := followerWorld(t, "a", "b", "c")
	defer w.close()
	a, b, c := w.session("a"), w.session("b"), w.session("c")
	report := func() []int64 {
		t.Helper()
		var sent []int64
		if _, err := w.l.ReportTouches(func(ids []int64) error { sent = ids; return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(sent)
		return sent
	}
	if got, want := report(), []int64{a.id, b.id, c.id}; !slices.Equal(got, want) {
		t.Fatalf("the first report carries %x, want the three connects %x", got, want)
	}
	a.conn.c.Touch()
	w.l.Touch(a.id) // by id as well: still once
	c.conn.c.Touch()
	c.conn.c.Shut(nil) // c's client goes after its last request
	if got, want := report(), []int64{a.id, c.id}; !slices.Equal(got, want) {
		t.Fatalf("report after a's and c's requests carries %x, want %x", got, want)
	}
	if got := report(); len(got) != 0 {
		t.Fatalf("nothing was heard since, yet the report carries %x", got)
	}
}

// A server that marked a connection while it followed, then led, does not
// report that stale mark after it steps down again: the session got a
// full timeout when it took over, and its client was not heard since.
func TestTakeOverClearsFollowerMarks(t *testing.T) {
	w := followerWorld(t, "a")
	defer w.close()
	a := w.session("a")
	w.l.ReportTouches(func([]int64) error { return nil }) // the connect's touch
	a.conn.c.Touch()
	w.rep.follower.Store(false)
	w.l.TakeOver()
	w.rep.follower.Store(true)
	var sent []int64
	w.l.ReportTouches(func(ids []int64) error { sent = ids; return nil })
	if len(sent) != 0 {
		t.Fatalf("after leading, the report carries the mark made before: %x", sent)
	}
}
