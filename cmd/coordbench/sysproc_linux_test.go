package main

import (
	"testing"
	"time"
)

// TestFreshPageCostIsPerPage: the probe answers a time per page, not the
// probe's whole time (64 MiB is 16,384 pages, and no machine takes a
// millisecond a page) and not nothing.
func TestFreshPageCostIsPerPage(t *testing.T) {
	d, err := freshPageCost(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 || d >= time.Millisecond {
		t.Fatalf("fresh page cost %v", d)
	}
	t.Logf("%v per 4 KiB page", d)
}
