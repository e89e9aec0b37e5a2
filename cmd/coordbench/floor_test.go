package main

import (
	"os"
	"strings"
	"testing"
)

// TestMeasureFloor: every part is measured (nothing zero), the sums are
// ordered as they must be (serial ≥ parallel ≥ the two round trips alone),
// the file is gone afterwards and the table names every row.
func TestMeasureFloor(t *testing.T) {
	dir := t.TempDir()
	f, err := measureFloor(dir, 300)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]floorPercentile{"append": f.Append, "round trip": f.RTT, "serial": f.Serial, "parallel": f.Parallel, "together": f.Together} {
		if p.P50 <= 0 || p.P50 > p.P99 || p.P99 > p.P999 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if f.Serial.P50 < f.Parallel.P50 || f.Parallel.P50 < f.RTT.P50 || f.Serial.P50 < f.Append.P50 {
		t.Errorf("floor not ordered: %+v", f)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	var b strings.Builder
	printFloor(&b, f)
	for _, row := range []string{"append", "round trip", "(serial)", "max(2 appends)", "3 at once"} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, b.String())
		}
	}
}
