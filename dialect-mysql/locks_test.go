package mysql

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLockNameGoAndSQLAgree proves that the name settle computes in Go for GET_LOCK is the name
// the claim's IS_USED_LOCK filter computes in SQL, for short keys and for keys hashed because
// the name would pass 64 characters, and that every name is accepted by GET_LOCK.
func TestLockNameGoAndSQLAgree(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		db, name := s.openFresh(t)
		ctx := context.Background()
		prefix := name + ".jobs:" // the engine's keys start with the canonical table
		room := maxLockName - len(lockPrefix) - len(prefix)
		keys := []string{"1", "42", "customer-7", "ключ", strings.Repeat("k", room), strings.Repeat("k", room+1), strings.Repeat("x", 300), strings.Repeat("é", 80)}
		for _, key := range keys {
			want := lockName(prefix + key)
			if n := utf8.RuneCountInString(want); n > maxLockName {
				t.Fatalf("lockName(%q) is %d characters", key, n)
			}
			var got string
			if err := db.QueryRowContext(ctx, "SELECT "+lockNameSQL(prefix, "k.v")+" FROM (SELECT CAST(? AS CHAR) AS v) AS k", key).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("key %q: SQL computes %q, Go %q", key, got, want)
			}
			var ok int
			if err := db.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0) + RELEASE_LOCK(?)", want, want).Scan(&ok); err != nil || ok != 2 {
				t.Fatalf("GET_LOCK/RELEASE_LOCK(%q) = %d, %v", want, ok, err)
			}
		}
		if lockName("a.jobs:1") == lockName("b.jobs:1") {
			t.Fatal("tables of two databases share a lock name")
		}
	})
}
