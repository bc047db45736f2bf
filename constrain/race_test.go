//go:build race

package constrain

// raceSlowdown widens the time bounds of tests under the race detector,
// which runs this package's code 2-20 times slower.
const raceSlowdown = 10
