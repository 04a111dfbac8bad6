package asyncapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlehq/settle/asyncapi"
	"github.com/settlehq/settle/core"
	"go.yaml.in/yaml/v3"
)

func TestExportWritesWhereTheEnvironmentAsks(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"doc.json", "doc.yaml"} {
		dest := filepath.Join(dir, name)
		t.Setenv(asyncapi.EnvVar, dest)
		done, err := asyncapi.Export(newApp(t))
		if !done || err != nil {
			t.Fatalf("Export to %s = %v, %v; want true, nil", name, done, err)
		}
		raw, err := os.ReadFile(dest)
		must(t, err)
		var doc map[string]any
		if strings.HasSuffix(name, ".json") {
			must(t, json.Unmarshal(raw, &doc))
			validate(t, raw)
		} else {
			must(t, yaml.Unmarshal(raw, &doc))
		}
		if doc["asyncapi"] != "3.0.0" {
			t.Errorf("%s: asyncapi = %v", name, doc["asyncapi"])
		}
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != 2 {
		t.Errorf("%d files in the folder, want the two documents and no temporary file", len(entries))
	}
}

func TestExportWithoutTheVariableDoesNothing(t *testing.T) {
	t.Setenv(asyncapi.EnvVar, "") // restored after the test
	os.Unsetenv(asyncapi.EnvVar)
	if done, err := asyncapi.Export(newApp(t)); done || err != nil {
		t.Errorf("Export = %v, %v; want false, nil", done, err)
	}
}

func TestExportReportsWhatItCannotDo(t *testing.T) {
	t.Setenv(asyncapi.EnvVar, "")
	if done, err := asyncapi.Export(newApp(t)); !done || err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty variable: %v, %v", done, err)
	}
	dest := filepath.Join(t.TempDir(), "doc.yaml")
	t.Setenv(asyncapi.EnvVar, dest)
	if done, err := asyncapi.Export(core.New()); !done || err == nil {
		t.Errorf("App without info: %v, %v", done, err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("a failed export left %s (%v)", dest, err)
	}
	t.Setenv(asyncapi.EnvVar, filepath.Join(t.TempDir(), "missing", "doc.yaml"))
	if done, err := asyncapi.Export(newApp(t)); !done || err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing folder: %v, %v", done, err)
	}
}
