package server

import (
	"bytes"
	"errors"
	"testing"
)

func TestEntryEnvelope(t *testing.T) {
	cmd := []byte{1, 2, 3}
	b := encodeEntry("s2", 42, cmd)
	origin, seq, got, err := decodeEntry(b)
	if err != nil || origin != "s2" || seq != 42 || !bytes.Equal(got, cmd) {
		t.Fatalf("round trip: %q %d %v %v", origin, seq, got, err)
	}
	for i := 0; i < len(b)-len(cmd); i++ {
		if _, _, _, err := decodeEntry(b[:i]); !errors.Is(err, errBadEntry) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
	if _, _, _, err := decodeEntry(append([]byte{9}, b[1:]...)); !errors.Is(err, errBadEntry) {
		t.Fatalf("unknown format: %v", err)
	}
}
