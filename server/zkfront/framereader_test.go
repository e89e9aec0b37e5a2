package zkfront

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"net"
	"testing"

	"coord/zk"
)

// frameReader hands out the frames written to the connection whatever
// the writes' boundaries: pipelined frames in one write, a frame split
// over several, a frame larger than the borrowed buffer, and the wait
// between frames with no buffer held.
func TestFrameReaderSplitsAndBatches(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var frames [][]byte
	var stream []byte
	for i := range 300 {
		n := r.Intn(200)
		if i%50 == 7 {
			n = 100 << 10 // larger than the 64 KiB buffer
		}
		body := make([]byte, n)
		r.Read(body)
		frames = append(frames, body)
		stream = append(stream, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		stream = append(stream, body...)
	}
	client, server := net.Pipe()
	go func() {
		rest := stream
		for len(rest) > 0 {
			k := min(len(rest), 1+r.Intn(3000))
			if r.Intn(4) == 0 {
				k = min(len(rest), 1+r.Intn(4)) // inside a length prefix
			}
			client.Write(rest[:k])
			rest = rest[k:]
		}
		client.Close()
	}()
	fr := &frameReader{nc: server, max: 1 << 20}
	defer fr.release()
	for i, want := range frames {
		got, err := fr.next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := fr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	if fr.br != nil {
		t.Error("the buffer is still held after everything was read")
	}
}

// A frame that ends early is ErrUnexpectedEOF; one longer than max is
// refused without its body being read.
func TestFrameReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []byte
		want   error
	}{
		{"cut in the body", []byte{0, 0, 0, 9, 1, 2, 3}, io.ErrUnexpectedEOF},
		{"cut in the length", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"too long", []byte{0, 0x10, 0, 0}, zk.ErrFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			go func() { client.Write(tc.stream); client.Close() }()
			fr := &frameReader{nc: server, max: 1024}
			defer fr.release()
			if _, err := fr.next(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
