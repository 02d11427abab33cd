package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker in `make build` (-X main.buildVersion=... -X main.buildCommit=...);
// empty in a plain `go build` or `go install`, which embeds the module version and, where
// the build records VCS information, the commit: version and commit read those then.
var buildVersion, buildCommit string

// version is the release this binary was built as: the linker's, else the module version
// `go install module@version` records, else "(devel)".
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// commit is the VCS revision this binary was built from, "+dirty" when the tree had changes,
// or "unknown" when the build recorded none (-buildvcs=false, or built outside a checkout).
func commit() string {
	if buildCommit != "" {
		return buildCommit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case dirty:
		return rev + "+dirty"
	}
	return rev
}

// versionLine is what --version prints.
func versionLine() string {
	return fmt.Sprintf("tollgate %s (commit %s, %s, %s/%s)", version(), commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
