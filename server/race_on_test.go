//go:build race

package server

// raceDetector: this test binary runs under the race detector, which makes
// the servers several times slower; see main_test.go.
const raceDetector = true
