package eventplugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Plugin binaries built by go build, once per test binary: the build takes seconds, and the
// machine is shared.
var builds struct {
	sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// buildPlugin builds the main package at pkg (a path relative to this module) and returns the
// binary's path.
func buildPlugin(t testing.TB, pkg string) string {
	t.Helper()
	builds.Lock()
	defer builds.Unlock()
	if bin, ok := builds.bins[pkg]; ok {
		return bin
	}
	if err, ok := builds.errs[pkg]; ok {
		t.Fatalf("building %s: %v", pkg, err)
	}
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "eventplugin-test-")
		if err != nil {
			t.Fatal(err)
		}
		builds.dir = dir
		builds.bins, builds.errs = map[string]string{}, map[string]error{}
	}
	bin := filepath.Join(builds.dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, "./"+pkg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		builds.errs[pkg] = err
		t.Fatalf("go build ./%s: %v\n%s", pkg, err, out)
	}
	builds.bins[pkg] = bin
	return bin
}

func cleanupBuilds() {
	builds.Lock()
	defer builds.Unlock()
	if builds.dir != "" {
		os.RemoveAll(builds.dir)
	}
}
