package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadLedger: ticks published twice, missing ticks and the longest gap, from the lines the
// workers append.
func TestReadLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	lines := "beat@2026-12-04T18:00:01Z 10\nbeat@2026-12-04T18:00:02Z 11\nbeat@2026-12-04T18:00:02Z 12\n" +
		"beat@2026-12-04T18:00:05Z 10\nbeat@2026-12-04T18:00:06Z 10\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	published, twice, missed, gap, err := readLedger(path)
	if published != 4 || twice != 1 || missed != 2 || gap != 3*time.Second || err != nil {
		t.Errorf("published %d, twice %d, missed %d, gap %v, %v; want 4, 1, 2, 3s", published, twice, missed, gap, err)
	}
	r := result{published: published, twice: twice, gap: gap}
	if r.ok() {
		t.Error("a trial with a tick published twice and a 3 s gap passed")
	}
	if err := os.WriteFile(path, []byte("not a tick\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := readLedger(path); err == nil {
		t.Error("a malformed ledger line was read")
	}
}
