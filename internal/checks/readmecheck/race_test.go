//go:build race

package readmecheck_test

// raceEnabled is whether the test binary runs under the race detector, so
// that the blocks are built with -race too and find their dependencies
// compiled in the build cache.
const raceEnabled = true
