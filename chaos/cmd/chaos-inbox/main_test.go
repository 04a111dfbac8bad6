package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/settlehq/settle/dialect-sqlite"
)

// TestCheckCountsTheSideTable: the trial's verdict reads ids written once, twice, never, and ids
// never published, from the side table as the workers leave it.
func TestCheckCountsTheSideTable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "service.db")
	if err := createTables(ctx, path); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{msgID(0), msgID(1), msgID(1), msgID(3)} {
		if _, err := db.Pool().ExecContext(ctx, "INSERT INTO side (id) VALUES (?)", id); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	rows, once, lost, twice, err := check(ctx, path, 4)
	if rows != 4 || once != 2 || lost != 1 || twice != 1 || err != nil {
		t.Errorf("check: rows %d, once %d, lost %d, twice %d, %v; want 4, 2, 1, 1", rows, once, lost, twice, err)
	}
	if _, _, _, _, err := check(ctx, path, 2); err == nil || !strings.Contains(err.Error(), "never published") {
		t.Errorf("an id beyond the messages published: %v", err)
	}
	r := result{messages: 4, once: 4, selfKills: 3, duplicates: 2}
	if r.ok() {
		t.Error("a trial whose killed messages did not all come back as duplicates passed")
	}
}

// TestPickChoosesAShare: about one message in n, another choice in each generation.
func TestPickChoosesAShare(t *testing.T) {
	same := 0
	picked := 0
	for i := range 5000 {
		a, b := pick(msgID(i), 1, 50), pick(msgID(i), 2, 50)
		if a {
			picked++
		}
		if a && b {
			same++
		}
	}
	if picked < 50 || picked > 200 || same > 20 {
		t.Errorf("picked %d of 5000 (want about 100), %d in both generations", picked, same)
	}
}
