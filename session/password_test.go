package session

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
)

// countingReader yields 0, 1, 2, ... so generated passwords are predictable.
type countingReader struct{ next byte }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.next
		r.next++
	}
	return len(p), nil
}

func TestGeneratePasswordDeterministic(t *testing.T) {
	r := &countingReader{}
	p1, err := GeneratePassword(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	if !bytes.Equal(p1, want) {
		t.Fatalf("first password = %v, want %v", p1, want)
	}
	p2, err := GeneratePassword(r)
	if err != nil {
		t.Fatal(err)
	}
	if p2[0] != 16 || len(p2) != PasswordLen {
		t.Fatalf("second password = %v, want 16 bytes starting at 16", p2)
	}
}

func TestGeneratePasswordShortRead(t *testing.T) {
	_, err := GeneratePassword(bytes.NewReader(make([]byte, PasswordLen-1)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("GeneratePassword(15-byte reader) error = %v, want io.ErrUnexpectedEOF", err)
	}
	_, err = GeneratePassword(bytes.NewReader(nil))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("GeneratePassword(empty reader) error = %v, want io.EOF", err)
	}
}

func TestGeneratePasswordCryptoRand(t *testing.T) {
	a, err := GeneratePassword(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GeneratePassword(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != PasswordLen || bytes.Equal(a, b) {
		t.Fatalf("two crypto/rand passwords: %x and %x; want distinct %d-byte values", a, b, PasswordLen)
	}
}

func TestCheckPassword(t *testing.T) {
	stored, _ := GeneratePassword(&countingReader{next: 100})
	flip := func(i int) []byte {
		p := bytes.Clone(stored)
		p[i] ^= 1
		return p
	}
	tests := []struct {
		name          string
		stored, given []byte
		want          bool
	}{
		{"equal", stored, bytes.Clone(stored), true},
		{"first byte differs", stored, flip(0), false},
		{"last byte differs", stored, flip(PasswordLen - 1), false},
		{"given is a prefix", stored, stored[:PasswordLen-1], false},
		{"given is longer", stored, append(bytes.Clone(stored), 0), false},
		{"given nil", stored, nil, false},
		{"stored empty, given empty", []byte{}, []byte{}, false},
		{"both nil", nil, nil, false},
		{"stored short but equal", stored[:8], stored[:8], false},
		{"stored all zero, given the same", make([]byte, PasswordLen), make([]byte, PasswordLen), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckPassword(tc.stored, tc.given); got != tc.want {
				t.Errorf("CheckPassword(%x, %x) = %v, want %v", tc.stored, tc.given, got, tc.want)
			}
		})
	}
}
