//go:build !race

package gocmd_test

const raceEnabled = false
