package cli

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: the reaper and watcher of every run included.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
