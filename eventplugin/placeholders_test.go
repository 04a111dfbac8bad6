package eventplugin

import "testing"

func TestCountPlaceholders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sql       string
		p         Placeholders
		backslash bool
		want      int
	}{
		{"DELETE FROM t WHERE id = ? AND locked_until = ?", PlaceholdersQuestion, false, 2},
		{"SELECT '?', \"?\", `?` FROM t WHERE a = ?", PlaceholdersQuestion, false, 1},
		{"SELECT 'it''s ?' WHERE a = ?", PlaceholdersQuestion, false, 1},
		{`SELECT 'a\' ? ' WHERE a = ?`, PlaceholdersQuestion, true, 1},
		{`SELECT 'a\' WHERE a = ?`, PlaceholdersQuestion, false, 1},
		{"SELECT 1 -- what ?\nWHERE a = ? /* and ? */", PlaceholdersQuestion, false, 1},
		{"UPDATE t SET a = $1 WHERE id = $2 AND b = $2", PlaceholdersDollar, false, 2},
		{"SELECT '$3', $$ body $9 $$, $tag$ $7 $tag$ WHERE a = $1", PlaceholdersDollar, false, 1},
		{"SELECT a$1 FROM t WHERE x = ?", PlaceholdersDollar, false, 0},
		{"SELECT data ? 'key' FROM t WHERE id = $1", PlaceholdersDollar, false, 1},
		{"SELECT 1", PlaceholdersQuestion, false, 0},
	}
	for _, c := range cases {
		if got := countPlaceholders(c.sql, c.p, c.backslash); got != c.want {
			t.Errorf("countPlaceholders(%q) = %d, want %d", c.sql, got, c.want)
		}
	}
}
