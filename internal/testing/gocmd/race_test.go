//go:build race

package gocmd_test

// raceEnabled is whether this binary was built with -race.
const raceEnabled = true
