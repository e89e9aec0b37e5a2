package composenet

import (
	"net"
	"strings"
	"testing"
)

// A prefix with one of its twelve ports taken is skipped; with every
// prefix taken the error names them.
func TestFreePortPrefix(t *testing.T) {
	// Some port of prefix 5 (server 2's client port) is taken here.
	l, err := net.Listen("tcp", "127.0.0.1:52181")
	if err != nil {
		t.Skipf("port 52181 is in use here: %v", err)
	}
	defer l.Close()
	if got, err := FreePortPrefix("5", "4"); err == nil && got == "5" {
		t.Fatalf("prefix 5 chosen with 52181 taken")
	}
	if _, err := FreePortPrefix("5"); err == nil || !strings.Contains(err.Error(), "among 5") {
		t.Fatalf("only prefix 5, taken: %v", err)
	}
}
