package zxid

import (
	"errors"
	"math"
	"testing"
)

func TestNewSplit(t *testing.T) {
	z := New(1, 3)
	if z != 0x100000003 || z.Epoch() != 1 || z.Counter() != 3 {
		t.Fatalf("New(1,3) = %#x epoch %d counter %d", int64(z), z.Epoch(), z.Counter())
	}
	z = New(math.MaxUint32>>1, math.MaxUint32)
	if z.Epoch() != math.MaxUint32>>1 || z.Counter() != math.MaxUint32 {
		t.Fatalf("round trip of max values failed: %v", z)
	}
}

func TestString(t *testing.T) {
	cases := map[Zxid]string{0: "0x0", New(1, 3): "0x100000003", New(0, 0xff): "0xff", New(0x7a, 0x10): "0x7a00000010"}
	for z, want := range cases {
		if got := z.String(); got != want {
			t.Errorf("String(%d) = %q, want %q", int64(z), got, want)
		}
	}
}

func TestParse(t *testing.T) {
	good := map[string]Zxid{"0x100000003": New(1, 3), "0X1A": 26, "26": 26, "0x0": 0}
	for s, want := range good {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
		if back, _ := Parse(got.String()); back != got {
			t.Errorf("Parse(String(%v)) = %v", got, back)
		}
	}
	for _, s := range []string{"", "0x", "0xg1", "-1", "1.5", "0x10000000000000000", " 1"} {
		if _, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) error = %v, want ErrSyntax", s, err)
		}
	}
}

func TestCompare(t *testing.T) {
	a, b := New(1, 9), New(2, 1)
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 {
		t.Fatal("compare across epochs is wrong")
	}
}

func TestClock(t *testing.T) {
	var c Clock
	if c.Last() != 0 {
		t.Fatalf("zero clock Last = %v", c.Last())
	}
	steps := []struct {
		term uint64
		want Zxid
	}{
		{1, New(1, 1)}, {1, New(1, 2)}, {1, New(1, 3)},
		{3, New(2, 1)}, // newer term: new epoch, counter 1
		{3, New(2, 2)},
		{2, New(2, 3)}, // an older term never moves backwards
		{7, New(3, 1)},
	}
	for i, s := range steps {
		if got := c.Next(s.term); got != s.want {
			t.Fatalf("step %d: Next(%d) = %v, want %v", i, s.term, got, s.want)
		}
		if c.Last() != s.want {
			t.Fatalf("step %d: Last = %v", i, c.Last())
		}
	}
}

func TestClockCounterRollover(t *testing.T) {
	c := Clock{Epoch: 5, Counter: MaxCounter - 1, LastTerm: 9}
	if got := c.Next(9); got != New(5, MaxCounter) {
		t.Fatalf("got %v", got)
	}
	if got := c.Next(9); got != New(6, 1) {
		t.Fatalf("rollover gave %v, want %v", got, New(6, 1))
	}
	if c.LastTerm != 9 {
		t.Fatalf("rollover changed LastTerm to %d", c.LastTerm)
	}
}
