package driver

import (
	"strings"
	"testing"
)

func TestSelectThenUpdateClaim(t *testing.T) {
	s, err := NewSchema(pgLike{}, StandardTable("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	c := SelectThenUpdateClaim(s, " FOR UPDATE SKIP LOCKED").(*selectUpdateClaim)
	if want := `SELECT "id", "payload", "attempt" + 1, "headers", "created_at" FROM "jobs" WHERE "grp" = $1 AND "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $2) AND "locked_until" IS NULL ORDER BY "id" LIMIT $3 FOR UPDATE SKIP LOCKED`; c.sel.sql != want {
		t.Errorf("select:\n got %s\nwant %s", c.sel.sql, want)
	}
	if want := `UPDATE "jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "id" IN ($2, $3)`; c.upd.SQL(2) != want {
		t.Errorf("update:\n got %s\nwant %s", c.upd.SQL(2), want)
	}
}

// hinting is pgLike with ByIDHints, spelled as MySQL pins the primary key.
type hinting struct{ pgLike }

func (hinting) UpdateByIDs(q string) string { return "UPDATE " + q + " FORCE INDEX (PRIMARY)" }
func (hinting) DeleteByIDs(q string) string {
	return "DELETE " + q + " FROM " + q + " FORCE INDEX (PRIMARY)"
}

// TestSelectThenUpdateClaimHints: SelectThenUpdateClaim's UPDATE names its rows by id, so it
// starts with the dialect's ByIDHints; its SELECT is left alone.
func TestSelectThenUpdateClaimHints(t *testing.T) {
	for _, tb := range []Table{StandardTable("jobs"), {Name: "jobs", Columns: Columns{LockedUntil: "locked_until"}}} {
		ps, _ := NewSchema(pgLike{}, tb)
		hs, _ := NewSchema(hinting{}, tb)
		pc, hc := SelectThenUpdateClaim(ps, " FOR UPDATE").(*selectUpdateClaim), SelectThenUpdateClaim(hs, " FOR UPDATE").(*selectUpdateClaim)
		if pc.sel.sql != hc.sel.sql {
			t.Errorf("the claim's SELECT changed by hints:\n got %s\nwant %s", hc.sel.sql, pc.sel.sql)
		}
		if want := "UPDATE " + ps.QTable + " FORCE INDEX (PRIMARY)" + strings.TrimPrefix(pc.upd.SQL(2), "UPDATE "+ps.QTable); hc.upd.SQL(2) != want {
			t.Errorf("the claim's UPDATE:\n got %s\nwant %s", hc.upd.SQL(2), want)
		}
	}
}
