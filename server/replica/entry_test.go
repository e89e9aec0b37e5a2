package replica

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// encodeSingle writes the format-1 entry of earlier versions.
func encodeSingle(origin string, seq uint64, cmd []byte) []byte {
	b := []byte{entryFormatSingle}
	b = binary.AppendUvarint(b, uint64(len(origin)))
	b = append(b, origin...)
	b = binary.AppendUvarint(b, seq)
	return append(b, cmd...)
}

func TestEntryEnvelope(t *testing.T) {
	want := []entryCmd{{"s2", 42, []byte{1, 2, 3}}, {"s1", 7, []byte{9}}, {"s3", 1 << 40, []byte{4, 5}}}
	b := encodeEntry(want)
	got, err := decodeEntry(b)
	if err != nil || len(got) != len(want) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for i := range want {
		if got[i].origin != want[i].origin || got[i].seq != want[i].seq || !bytes.Equal(got[i].cmd, want[i].cmd) {
			t.Fatalf("command %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	for i := 0; i < len(b); i++ {
		if _, err := decodeEntry(b[:i]); !errors.Is(err, errBadEntry) {
			t.Fatalf("prefix of %d bytes: %v", i, err)
		}
	}
	if _, err := decodeEntry(append(b, 0)); !errors.Is(err, errBadEntry) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := decodeEntry(append([]byte{9}, b[1:]...)); !errors.Is(err, errBadEntry) {
		t.Fatalf("unknown format: %v", err)
	}

	// An older log's single-command entries still read.
	old := encodeSingle("s2", 42, []byte{1, 2, 3})
	got, err = decodeEntry(old)
	if err != nil || len(got) != 1 || got[0].origin != "s2" || got[0].seq != 42 || !bytes.Equal(got[0].cmd, []byte{1, 2, 3}) {
		t.Fatalf("format 1: %+v %v", got, err)
	}
	for i := 0; i < len(old)-3; i++ {
		if _, err := decodeEntry(old[:i]); !errors.Is(err, errBadEntry) {
			t.Fatalf("format 1 prefix of %d bytes: %v", i, err)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(encodeEntry([]entryCmd{{"s1", 1, []byte{1}}}))
	f.Add(encodeSingle("s1", 1, []byte{1, 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := decodeEntry(b)
		if err != nil {
			return
		}
		if b[0] == entryFormatBatch {
			if again, err := decodeEntry(encodeEntry(cmds)); err != nil || len(again) != len(cmds) {
				t.Fatalf("re-encoding: %v", err)
			}
		}
	})
}
