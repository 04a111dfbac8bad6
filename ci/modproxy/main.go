// Command modproxy writes a file-system Go module proxy (the GOPROXY=file:// layout that
// `go mod download` reads) holding the given modules at one version, as they are in the tree:
// for each module, <path>/@v/list, VERSION.info, VERSION.mod and VERSION.zip, the zip made by
// golang.org/x/mod/zip exactly as the go command checks it (the module's files under
// path@version/, nested modules, vendor and VCS folders left out).
//
//	modproxy -version v0.1.0 -time 2026-11-30T12:00:00Z -out DIR MODULE_DIR...
//
// ci/consumer.sh runs it; it is its own module, outside go.work, so that golang.org/x/mod stays
// out of every module settle ships.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the version every module is written at (v0.1.0)")
	at := flag.String("time", "", "the version's time, RFC 3339 (default: now)")
	out := flag.String("out", "", "the proxy's root folder")
	flag.Parse()
	if err := run(*version, *at, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(version, at, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version such as v0.1.0", version)
	}
	if out == "" || len(dirs) == 0 {
		return errors.New("usage: modproxy -version V [-time T] -out DIR MODULE_DIR...")
	}
	t := time.Now().UTC()
	if at != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, at); err != nil {
			return fmt.Errorf("-time %q: %w", at, err)
		}
	}
	for _, dir := range dirs {
		if err := write(out, dir, version, t); err != nil {
			return fmt.Errorf("module in %s: %w", dir, err)
		}
	}
	return nil
}

func write(out, dir, version string, t time.Time) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return errors.New("go.mod names no module")
	}
	mv := module.Version{Path: path, Version: version}
	if err := module.Check(path, version); err != nil {
		return err
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return err
	}
	files := map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(at, name), b, 0o644); err != nil {
			return err
		}
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(z, mv, dir); err != nil {
		z.Close()
		return fmt.Errorf("zipping %s: %w", mv, err)
	}
	if err := z.Close(); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", path, version)
	return nil
}
