package sessions

import (
	"errors"
	"slices"
	"testing"
)

// A follower's report of the sessions heard from it that fails (the
// leader slow to answer, or changing) is not lost: the next report carries
// those sessions. Before, they were dropped, and a leader that missed a
// few reports in a row expired sessions whose clients kept pinging.
func TestFailedTouchReportGoesWithTheNext(t *testing.T) {
	w := newWorld(t, "touch")
	defer w.close()
	w.rep.follower.Store(true)
	w.run("connect a timeout=10000")
	w.settle()
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
