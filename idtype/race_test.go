//go:build race

package idtype

// raceEnabled scales down the heaviest tests under the race detector,
// which slows atomics by an order of magnitude.
const raceEnabled = true
