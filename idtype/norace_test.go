//go:build !race

package idtype

const raceEnabled = false
