package session

import (
	"sync"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	var zero FakeClock
	if !zero.Now().IsZero() {
		t.Fatalf("zero FakeClock reads %v, want the zero time", zero.Now())
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFakeClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	if got := c.Advance(1500 * time.Millisecond); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("Advance returned %v", got)
	}
	if got := c.Now(); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("after Advance, Now() = %v", got)
	}
	c.Set(start.Add(-time.Hour))
	if got := c.Now(); !got.Equal(start.Add(-time.Hour)) {
		t.Fatalf("after Set backwards, Now() = %v", got)
	}
}

func TestFakeClockConcurrent(t *testing.T) {
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFakeClock(start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now().Sub(start), 8000*time.Millisecond; got != want {
		t.Fatalf("after 8000 concurrent 1ms advances, clock moved %v, want %v", got, want)
	}
}

func TestSystemClock(t *testing.T) {
	var c Clock = SystemClock{}
	a := c.Now()
	b := c.Now()
	if a.IsZero() || b.Before(a) {
		t.Fatalf("SystemClock readings %v then %v: want non-zero and non-decreasing", a, b)
	}
}
