//go:build race

package relay_test

// raceEnabled is whether the race detector is on.
const raceEnabled = true
