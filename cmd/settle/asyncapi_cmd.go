package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// asyncAPIEnv is the environment variable through which settle asyncapi asks a program for its
// AsyncAPI document: the file to write (asyncapi.EnvVar; the program calls asyncapi.Export).
const asyncAPIEnv = "SETTLE_ASYNCAPI"

const asyncAPIUsage = `settle asyncapi [--out FILE] [--format yaml|json] -- COMMAND [ARG…]

Runs COMMAND (a program that exposes its App with asyncapi.Export, e.g. go run ./examples/refunds)
with SETTLE_ASYNCAPI set to a scratch file, and prints the AsyncAPI 3.0 document it writes there
instead of running, or writes it to --out. The format is --format, else --out's extension (.json
for JSON), else YAML. What COMMAND prints goes to standard error.

`

// cmdAsyncAPI runs a program for its AsyncAPI document.
func cmdAsyncAPI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("settle asyncapi", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, asyncAPIUsage); fs.PrintDefaults() }
	out := fs.String("out", "", "write the document to this file instead of standard output")
	format := fs.String("format", "", "yaml or json (default: from --out's extension, else yaml)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	command := fs.Args()
	if len(command) == 0 {
		return usageErr("settle asyncapi: name the program after --, e.g. settle asyncapi -- go run ./examples/refunds")
	}
	f, err := asyncAPIFormat(*format, *out)
	if err != nil {
		return err
	}
	doc, err := runForAsyncAPI(ctx, command, f, stderr)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(doc)
		return err
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		return fmt.Errorf("settle asyncapi: %w", err)
	}
	return nil
}

// asyncAPIFormat picks the document's format: the flag, else the output file's extension, else
// YAML.
func asyncAPIFormat(flagged, out string) (string, error) {
	switch strings.ToLower(flagged) {
	case "yaml", "yml":
		return "yaml", nil
	case "json":
		return "json", nil
	case "":
		if strings.HasSuffix(strings.ToLower(out), ".json") {
			return "json", nil
		}
		return "yaml", nil
	}
	return "", usageErr("settle asyncapi: --format %q: want yaml or json", flagged)
}

// runForAsyncAPI runs command with SETTLE_ASYNCAPI naming a scratch file of format and returns
// what it wrote there.
func runForAsyncAPI(ctx context.Context, command []string, format string, stderr io.Writer) ([]byte, error) {
	dir, err := os.MkdirTemp("", "settle-asyncapi-")
	if err != nil {
		return nil, fmt.Errorf("settle asyncapi: %w", err)
	}
	defer os.RemoveAll(dir)
	dest := filepath.Join(dir, "asyncapi."+format)
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), asyncAPIEnv+"="+dest)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stderr, stderr // stdout is the document's
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("settle asyncapi: %s: %w", strings.Join(command, " "), err)
	}
	doc, err := os.ReadFile(dest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("settle asyncapi: %s exited without writing its document: the program must call asyncapi.Export(app) once its App is mounted, before it runs it",
			strings.Join(command, " "))
	}
	if err != nil {
		return nil, fmt.Errorf("settle asyncapi: %w", err)
	}
	return doc, nil
}
