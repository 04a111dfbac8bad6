package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/settlehq/settle/core"
	sqlite "github.com/settlehq/settle/dialect-sqlite"
)

func TestHealthIsThePoolsPing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	h := db.CheckHealth(context.Background())
	if h.Status != core.HealthPass || h.State != "connected" || h.Name != "sqlite "+path {
		t.Fatalf("open: %+v", h)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if h := db.CheckHealth(context.Background()); h.Status != core.HealthFail || h.State != "unreachable" || h.Output == "" {
		t.Fatalf("closed: %+v", h)
	}
}
