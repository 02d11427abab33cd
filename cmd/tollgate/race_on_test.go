//go:build race

package main

// raceFlag builds the binaries the process tests run with the race detector when the tests
// themselves run with it.
var raceFlag = []string{"-race"}
