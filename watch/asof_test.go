package watch

// Registrations made from a view older than the latest trigger: the watch
// must behave as if it had been registered when the view was taken.

import (
	"errors"
	"slices"
	"testing"

	"coord/fsm"
)

func TestAddAsOf(t *testing.T) {
	history := []fsm.Trigger{
		{Path: "/a", Type: changed, Zxid: 11},
		{Path: "/b", Type: created, Zxid: 12},
		{Path: "/", Type: children, Zxid: 12},
		{Path: "/a", Type: deleted, Zxid: 13},
		{Path: "/", Type: children, Zxid: 13},
	}
	tests := []struct {
		name  string
		child bool
		path  string
		asOf  int64
		want  []Event // nil: registered
	}{
		{"data, view before a change: fires with the first change", false, "/a", 10, []Event{ev(1, "/a", changed, 11)}},
		{"data, view after the change: fires with the delete", false, "/a", 11, []Event{ev(1, "/a", deleted, 13)}},
		{"data, view current: registered", false, "/a", 13, nil},
		{"data, view newer than any trigger: registered", false, "/a", 99, nil},
		{"exists on a missing node that was created since", false, "/b", 11, []Event{ev(1, "/b", created, 12)}},
		{"data, untouched path: registered", false, "/c", 0, nil},
		{"data ignores children changed", false, "/", 10, nil},
		{"child, view before a child was created", true, "/", 11, []Event{ev(1, "/", children, 12)}},
		{"child, view between the two", true, "/", 12, []Event{ev(1, "/", children, 13)}},
		{"child ignores data changes", true, "/b", 11, nil},
		{"child, node deleted since", true, "/a", 12, []Event{ev(1, "/a", deleted, 13)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			for _, tr := range history {
				r.Trigger(tr)
			}
			add, k := r.AddDataAsOf, "d"
			if tc.child {
				add, k = r.AddChildAsOf, "c"
			}
			got, err := add(1, tc.path, tc.asOf)
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, "add", got, tc.want)
			var left []string
			if tc.want == nil {
				left = []string{"1 " + tc.path + " " + k}
			}
			sameDump(t, "add", dump(r), left)
			checkInvariants(t, r)
		})
	}
}

func TestAddAsOfHistoryLimit(t *testing.T) {
	r := New()
	// historyLen+2 triggers with zxids 1..historyLen+2: the first two are
	// forgotten, so views older than zxid 2 cannot be checked.
	for z := int64(1); z <= historyLen+2; z++ {
		r.Trigger(fsm.Trigger{Path: "/x", Type: changed, Zxid: z})
	}
	for _, asOf := range []int64{0, 1} {
		if _, err := r.AddDataAsOf(1, "/y", asOf); !errors.Is(err, ErrViewTooOld) {
			t.Errorf("asOf %d: err %v, want ErrViewTooOld", asOf, err)
		}
	}
	if r.Len() != 0 {
		t.Errorf("a refused registration registered a watch")
	}
	got, err := r.AddDataAsOf(1, "/x", 2)
	if err != nil || !slices.Equal(got, []Event{ev(1, "/x", changed, 3)}) {
		t.Errorf("asOf 2: %v, %v; want the change at zxid 3", got, err)
	}
	if got, err := r.AddDataAsOf(1, "/y", 2); err != nil || got != nil || r.Len() != 1 {
		t.Errorf("asOf 2 on an untouched path: %v, %v, Len %d", got, err, r.Len())
	}
}

// Triggers sharing a zxid (one entry's NodeCreated and NodeChildrenChanged)
// straddling the ring's edge: a view at that zxid needs none of them.
func TestAddAsOfSameZxidAtTheEdge(t *testing.T) {
	r := New()
	r.Trigger(fsm.Trigger{Path: "/p/a", Type: created, Zxid: 5})
	r.Trigger(fsm.Trigger{Path: "/p", Type: children, Zxid: 5})
	for range historyLen - 1 {
		r.Trigger(fsm.Trigger{Path: "/q", Type: changed, Zxid: 6})
	}
	// The NodeCreated at 5 is forgotten, the NodeChildrenChanged at 5 is not.
	if _, err := r.AddChildAsOf(1, "/p", 5); err != nil {
		t.Errorf("asOf 5: %v", err)
	}
	if _, err := r.AddChildAsOf(1, "/p", 4); !errors.Is(err, ErrViewTooOld) {
		t.Errorf("asOf 4: %v, want ErrViewTooOld", err)
	}
}

func TestMarkGap(t *testing.T) {
	r := New()
	r.Trigger(fsm.Trigger{Path: "/a", Type: changed, Zxid: 5})
	r.MarkGap(100) // a snapshot restore took the state to zxid 100
	for _, asOf := range []int64{0, 5, 99} {
		if _, err := r.AddDataAsOf(1, "/b", asOf); !errors.Is(err, ErrViewTooOld) {
			t.Errorf("asOf %d: %v, want ErrViewTooOld", asOf, err)
		}
	}
	g := newRig(t)
	if _, err := r.Reattach(g.f.View(), 1, 0, WatchSet{DataWatches: []string{"/"}}); !errors.Is(err, ErrViewTooOld) {
		t.Errorf("Reattach from a view before the gap: %v", err)
	}
	if got, err := r.AddDataAsOf(1, "/b", 100); err != nil || got != nil {
		t.Errorf("asOf 100: %v, %v", got, err)
	}
	r.MarkGap(50) // never moves back
	if _, err := r.AddDataAsOf(1, "/c", 60); !errors.Is(err, ErrViewTooOld) {
		t.Errorf("MarkGap moved the gap back: %v", err)
	}
	sameDump(t, "gap", dump(r), []string{"1 /b d"})
}
