package servers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// natsServerPkg is the nats-server main package. chaos/go.mod names it as a tool, so its
// version is the one the workspace uses (transport-nats embeds the same module in its tests).
const natsServerPkg = "github.com/nats-io/nats-server/v2"

// chaosModule is the module path BuildNATSServer builds from.
const chaosModule = "github.com/settlehq/settle/chaos"

// BuildNATSServer builds nats-server from the module version chaos/go.mod requires into dir
// and returns the binary's path and its version line. The machine's nats-server (2.9 on the
// development machine) cannot be told to fsync JetStream writes (sync_interval: always needs
// 2.10), so the suite builds its own. It needs the Go toolchain and the settle source tree: it
// looks for the chaos module in the working directory and its parents (ci/chaos.sh runs the
// driver from the repository's root).
func BuildNATSServer(ctx context.Context, dir string) (bin, version string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", "", fmt.Errorf("nats: building nats-server (%s, the version chaos/go.mod requires) needs the Go toolchain: %w", natsServerPkg, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("nats: building nats-server: %w", err)
	}
	mod, err := findModule(wd, chaosModule)
	if err != nil {
		return "", "", fmt.Errorf("nats: building nats-server: %w (run the driver from the settle repository, as ci/chaos.sh does)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("nats: building nats-server: %w", err)
	}
	bin = filepath.Join(dir, "nats-server")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, natsServerPkg)
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("nats: go build %s in %s failed: %w\n%s", natsServerPkg, mod, err, strings.TrimSpace(string(out)))
	}
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("nats: the built %s --version: %w: %s", bin, err, out)
	}
	version = strings.TrimSpace(string(out))
	if !syncAlwaysSupported(version) {
		return "", "", fmt.Errorf("nats: the built nats-server is %q: sync_interval: always needs 2.10 or later (raise %s in chaos/go.mod)", version, natsServerPkg)
	}
	return bin, version, nil
}

// findModule returns the directory of the module named path: dir or one of its parents, or a
// "<that>/chaos" directory beside them.
func findModule(dir, path string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		for _, c := range []string{d, filepath.Join(d, "chaos")} {
			if modulePath(filepath.Join(c, "go.mod")) == path {
				return c, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("module %s not found in %s or its parents", path, dir)
		}
	}
}

// modulePath returns the module line of a go.mod file, or "".
func modulePath(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// syncAlwaysSupported reports whether a "nats-server: v2.X.Y" version line is 2.10 or later.
func syncAlwaysSupported(version string) bool {
	v := version[strings.LastIndex(version, " ")+1:]
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major > 2 || major == 2 && minor >= 10
}

// LegacyNATSEnv names a nats-server binary before 2.10 for the trials that replay its crashes
// (default: the nats-server on PATH, when it is one).
const LegacyNATSEnv = "SETTLE_CHAOS_NATS_LEGACY"

// LegacyNATSServer finds a nats-server binary before 2.10 — the development machine's 2.9 —
// which writes JetStream to disk in the background with no setting to do otherwise: the
// binary LegacyNATSEnv names, or nats-server on PATH. It returns the path and its version line,
// or an error saying what was found and how to name one.
func LegacyNATSServer(ctx context.Context) (bin, version string, err error) {
	bin = os.Getenv(LegacyNATSEnv)
	if bin == "" {
		if bin, err = exec.LookPath("nats-server"); err != nil {
			return "", "", fmt.Errorf("nats: this trial replays a crash of nats-server before 2.10 and needs its binary: none on PATH; name one with %s=/path/to/nats-server (2.9.x)", LegacyNATSEnv)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("nats: %s --version: %w: %s", bin, err, out)
	}
	version = strings.TrimSpace(string(out))
	if syncAlwaysSupported(version) {
		return "", "", fmt.Errorf("nats: this trial replays a crash of nats-server before 2.10; %s is %q: name a 2.9 binary with %s", bin, version, LegacyNATSEnv)
	}
	return bin, version, nil
}
