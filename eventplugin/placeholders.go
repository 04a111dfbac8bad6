package eventplugin

// countPlaceholders counts the parameters of sql as the dialect reads them, skipping string
// literals, quoted identifiers and comments: the number of "?" for PlaceholdersQuestion, the
// highest n of "$n" for PlaceholdersDollar. backslash makes a backslash escape the next
// character inside string literals (MySQL and MariaDB by default).
func countPlaceholders(sql string, p Placeholders, backslash bool) int {
	n := 0
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(sql, i, c, backslash && c != '`')
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			i += 2
			for i+1 < len(sql) && !(sql[i] == '*' && sql[i+1] == '/') {
				i++
			}
			i++
		case c == '?' && p == PlaceholdersQuestion:
			n++
		case c == '$' && p == PlaceholdersDollar:
			j := i + 1
			v := 0
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				v = v*10 + int(sql[j]-'0')
				j++
			}
			if j > i+1 {
				// $1 follows no identifier character: "a$1" is an identifier.
				if i == 0 || !identChar(sql[i-1]) {
					n = max(n, v)
				}
				i = j - 1
				continue
			}
			if tag, ok := dollarTag(sql, i); ok && (i == 0 || !identChar(sql[i-1])) {
				i = skipDollarQuoted(sql, i, tag)
			}
		}
	}
	return n
}

// skipQuoted returns the index of the quote that closes the literal opened at sql[i]; a
// doubled quote is an escaped one.
func skipQuoted(sql string, i int, q byte, backslash bool) int {
	for i++; i < len(sql); i++ {
		switch sql[i] {
		case '\\':
			if backslash {
				i++
			}
		case q:
			if i+1 < len(sql) && sql[i+1] == q {
				i++
				continue
			}
			return i
		}
	}
	return len(sql)
}

// dollarTag reads a PostgreSQL dollar-quote opener ($$ or $tag$) at sql[i].
func dollarTag(sql string, i int) (string, bool) {
	for j := i + 1; j < len(sql); j++ {
		switch c := sql[j]; {
		case c == '$':
			return sql[i : j+1], true
		case !identChar(c) || (j == i+1 && c >= '0' && c <= '9'):
			return "", false
		}
	}
	return "", false
}

// skipDollarQuoted returns the index of the last byte of the dollar-quoted string opened at i.
func skipDollarQuoted(sql string, i int, tag string) int {
	for j := i + len(tag); j+len(tag) <= len(sql); j++ {
		if sql[j:j+len(tag)] == tag {
			return j + len(tag) - 1
		}
	}
	return len(sql)
}

func identChar(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80
}
