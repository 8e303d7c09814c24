package otelidempotency

import (
	"runtime/debug"
	"sync"
)

// Version returns the version of this module, the instrumentation
// scope's. It is the one the Go build recorded, such as v0.4.0 or a
// pseudo-version. It is (devel) when it is built in its own module.
func Version() string { return version() }

// version reads the build's record once: the scope name is the module's
// path.
var version = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if info.Main.Path == ScopeName {
		return info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path == ScopeName {
			return d.Version
		}
	}
	return "(unknown)"
})
