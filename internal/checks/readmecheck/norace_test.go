//go:build !race

package readmecheck_test

const raceEnabled = false
