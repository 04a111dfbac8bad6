package asyncapi

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/settlehq/settle/core"
)

// EnvVar is the environment variable through which `settle asyncapi` asks a program for its
// document: the file to write it to (its extension picks JSON or YAML, see FormatOf), or "-"
// for YAML on standard output.
const EnvVar = "SETTLE_ASYNCAPI"

// Export writes app's document where the environment variable SETTLE_ASYNCAPI asks and returns
// true: the program should then exit without running the App. Without the variable it does
// nothing and returns false. A program exposes its App to `settle asyncapi` by calling it once
// everything is mounted, before Run:
//
//	if done, err := asyncapi.Export(app); done || err != nil {
//		return err
//	}
//
// The file is written whole or not at all (a temporary file renamed into place).
func Export(app *core.App, opts ...Option) (bool, error) {
	dest, ok := os.LookupEnv(EnvVar)
	if !ok {
		return false, nil
	}
	if dest == "" {
		return true, fmt.Errorf("asyncapi: %s is set but empty: set it to a file (.yaml, .yml or .json) or -", EnvVar)
	}
	doc, err := New(app, opts...)
	if err != nil {
		return true, err
	}
	if dest == "-" {
		return true, doc.Write(os.Stdout, FormatYAML)
	}
	return true, writeFile(doc, dest)
}

func writeFile(doc *Document, dest string) error {
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".asyncapi-*")
	if err != nil {
		return fmt.Errorf("asyncapi: writing %s: %w", dest, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if err := doc.Write(tmp, FormatOf(dest)); err != nil {
		tmp.Close()
		return fmt.Errorf("asyncapi: writing %s: %w", dest, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("asyncapi: writing %s: %w", dest, err)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return fmt.Errorf("asyncapi: writing %s: %w", dest, err)
	}
	return nil
}
