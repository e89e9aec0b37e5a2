package session

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultBounds(t *testing.T) {
	b := DefaultBounds(2 * time.Second)
	if b.Tick != 2*time.Second || b.Min != 4*time.Second || b.Max != 40*time.Second {
		t.Fatalf("DefaultBounds(2s) = %+v, want Tick 2s, Min 4s, Max 40s", b)
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("DefaultBounds(2s).Validate() = %v", err)
	}
}

func TestNegotiate(t *testing.T) {
	def := DefaultBounds(2 * time.Second) // [4000, 40000] ms
	fixed := Bounds{Tick: time.Second, Min: 5 * time.Second, Max: 5 * time.Second}
	tests := []struct {
		name   string
		b      Bounds
		req    int32
		wantMs int32
	}{
		{"below min", def, 1000, 4000},
		{"one below min", def, 3999, 4000},
		{"exactly min", def, 4000, 4000},
		{"within", def, 10000, 10000},
		{"exactly max", def, 40000, 40000},
		{"one above max", def, 40001, 40000},
		{"far above max", def, math.MaxInt32, 40000},
		{"zero", def, 0, 4000},
		{"negative", def, -1, 4000},
		{"most negative", def, math.MinInt32, 4000},
		{"min equals max, low", fixed, 1, 5000},
		{"min equals max, high", fixed, 60000, 5000},
		// Not a valid Bounds, but Negotiate must still do what ZooKeeper does:
		// raise to min first, then lower to max.
		{"min above max", Bounds{Tick: time.Second, Min: 10 * time.Second, Max: 3 * time.Second}, 5000, 3000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Negotiate(tc.req); got != tc.wantMs {
				t.Errorf("%+v.Negotiate(%d) = %d, want %d", tc.b, tc.req, got, tc.wantMs)
			}
		})
	}
}

func TestBoundsValidate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		b       Bounds
		wantErr string // substring; "" means valid
	}{
		{"default", DefaultBounds(time.Second), ""},
		{"sub-ms tick is fine", Bounds{Tick: 500 * time.Microsecond, Min: ms, Max: 10 * ms}, ""},
		{"largest max", Bounds{Tick: ms, Min: ms, Max: maxTimeout}, ""},
		{"zero tick", Bounds{Tick: 0, Min: ms, Max: ms}, "Bounds.Tick must be > 0, got 0s"},
		{"negative tick", Bounds{Tick: -ms, Min: ms, Max: ms}, "Bounds.Tick"},
		{"zero min", Bounds{Tick: ms, Min: 0, Max: ms}, "Bounds.Min must be in [1ms, "},
		{"fractional min", Bounds{Tick: ms, Min: 1500 * time.Microsecond, Max: 2 * ms}, "Bounds.Min must be a whole number of milliseconds, got 1.5ms"},
		{"zero max", Bounds{Tick: ms, Min: ms, Max: 0}, "Bounds.Max must be in [1ms, "},
		{"max over int32 ms", Bounds{Tick: ms, Min: ms, Max: maxTimeout + ms}, "Bounds.Max must be in [1ms, "},
		{"max below min", Bounds{Tick: ms, Min: 10 * ms, Max: 5 * ms}, "Bounds.Max must be >= Bounds.Min (10ms), got 5ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("Validate() = nil, want error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
