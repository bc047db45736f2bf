//go:build !race

package constrain

// raceSlowdown widens the time bounds of tests under the race detector
// (race_test.go); without it, 1.
const raceSlowdown = 1
