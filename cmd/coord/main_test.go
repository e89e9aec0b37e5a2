package main

import (
	"os"
	"testing"
)

// TestUnknownCommandStartsNothing: a misspelt command is refused before a
// server starts and bootstraps ./coord-data (issue 27: `coord lcoal` ran a
// server), as is a zero -tick (it was taken as the default); -help exits 0.
func TestUnknownCommandStartsNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{{"lcoal"}, {"-id", "x", "version2"}, {"-tick", "0"}, {"-max-session-timeout", "-1s"}} {
		if rc := run(args); rc != 2 {
			t.Errorf("coord %q: exit %d, want 2", args, rc)
		}
	}
	if _, err := os.Stat("coord-data"); !os.IsNotExist(err) {
		t.Errorf("a misspelt command made ./coord-data (stat: %v)", err)
	}
	if rc := run([]string{"-help"}); rc != 0 {
		t.Errorf("coord -help: exit %d, want 0", rc)
	}
}
