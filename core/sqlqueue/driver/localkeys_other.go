//go:build !unix && !windows

package driver

import (
	"fmt"
	"os"
	goruntime "runtime"
)

// lockFile has no file lock to take on this platform.
func lockFile(path string) (*os.File, error) {
	return nil, fmt.Errorf("no file locks on %s, so one process per database file cannot be guaranteed for the advisory form", goruntime.GOOS)
}
