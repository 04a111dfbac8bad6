package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlehq/settle/asyncapi"
)

var update = flag.Bool("update", false, "rewrite the committed AsyncAPI documents (docs/asyncapi/) from the service")

// docModes are the modes whose documents are committed, by file name.
var docModes = []struct {
	file string
	cfg  Config
}{
	{"refunds-sqlite.yaml", Config{Backoff: DefaultBackoff, Poll: DefaultPoll}},
	{"refunds-rabbitmq.yaml", Config{Backoff: DefaultBackoff, Poll: DefaultPoll, AMQP: "amqp://guest:guest@localhost:5672/"}},
	{"refunds-nats.yaml", Config{Backoff: DefaultBackoff, Poll: DefaultPoll, NATS: "nats://127.0.0.1:4222"}},
}

// TestCommittedAsyncAPIDocumentsAreCurrent fails when a change to the service changed its
// contract and docs/asyncapi/ was not regenerated: go test ./refunds -run AsyncAPI -update.
func TestCommittedAsyncAPIDocumentsAreCurrent(t *testing.T) {
	for _, m := range docModes {
		t.Run(m.file, func(t *testing.T) {
			app, done, err := DescribedApp(context.Background(), m.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			doc, err := asyncapi.New(app, DocOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := doc.YAML()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", "..", "docs", "asyncapi", m.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (make it with -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s is stale: the service's contract changed. Review the change and regenerate it: go test ./refunds -run AsyncAPI -update\n%s",
					path, firstDifference(string(want), string(got)))
			}
		})
	}
}

// firstDifference shows the first line where two documents differ.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, wl, gl)
		}
	}
	return ""
}
