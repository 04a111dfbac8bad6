package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Flavour is the server family: MySQL or MariaDB. The two share the wire protocol and most of
// the SQL settle uses; where they differ (MariaDB has INSERT … RETURNING and DELETE …
// RETURNING, MySQL has neither; the session variable for the isolation level is spelled
// differently) the dialect chooses by flavour, never by trial and error.
type Flavour uint8

const (
	// MySQL is Oracle MySQL (and servers that report a MySQL version, such as Percona Server).
	MySQL Flavour = iota + 1
	// MariaDB is MariaDB Server.
	MariaDB
)

// String is "mysql" or "mariadb".
func (f Flavour) String() string {
	switch f {
	case MySQL:
		return "mysql"
	case MariaDB:
		return "mariadb"
	}
	return "flavour(" + strconv.Itoa(int(f)) + ")"
}

// Minimum versions: the first releases with SELECT … FOR UPDATE SKIP LOCKED (MySQL 8.0.1), and
// the oldest MariaDB series settle is tested against (10.6; SKIP LOCKED came in 10.6.0).
var (
	minMySQL = Version{Flavour: MySQL, Major: 8, Minor: 0, Patch: 1}
	// jsonTableMySQL: the first MySQL with JSON_TABLE (MariaDB has it from 10.6, its minimum).
	jsonTableMySQL = Version{Flavour: MySQL, Major: 8, Minor: 0, Patch: 4}
	minMariaDB     = Version{Flavour: MariaDB, Major: 10, Minor: 6, Patch: 0}
)

// Version is a server's flavour and release, as parsed from SELECT VERSION().
type Version struct {
	Flavour             Flavour
	Major, Minor, Patch int
	// Raw is the full text VERSION() returned, e.g. "10.11.6-MariaDB-0+deb12u1".
	Raw string
}

// String is the flavour and the raw version text, e.g. "mariadb 10.11.6-MariaDB".
func (v Version) String() string {
	if v.Raw != "" {
		return v.Flavour.String() + " " + v.Raw
	}
	return fmt.Sprintf("%s %d.%d.%d", v.Flavour, v.Major, v.Minor, v.Patch)
}

// less reports whether v is an older release than w (flavours are not compared).
func (v Version) less(w Version) bool {
	if v.Major != w.Major {
		return v.Major < w.Major
	}
	if v.Minor != w.Minor {
		return v.Minor < w.Minor
	}
	return v.Patch < w.Patch
}

// ParseVersion parses the text of SELECT VERSION(): "8.0.36", "8.4.0-log",
// "10.11.6-MariaDB-0+deb12u1". A version containing "MariaDB" is MariaDB; any other is MySQL.
func ParseVersion(s string) (Version, error) {
	v := Version{Flavour: MySQL, Raw: s}
	if strings.Contains(strings.ToLower(s), "mariadb") {
		v.Flavour = MariaDB
	}
	num := s
	if i := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = s[:i]
	}
	parts := strings.Split(num, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("mysql: cannot read server version %q: want major.minor[.patch]", s)
	}
	dst := []*int{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("mysql: cannot read server version %q: %w", s, err)
		}
		*dst[i] = n
	}
	return v, nil
}

// hasJSONTable reports whether the server has JSON_TABLE: MariaDB 10.6+ and MySQL 8.0.4+.
func (v Version) hasJSONTable() bool {
	return v.Flavour == MariaDB || !v.less(jsonTableMySQL)
}

// Supported returns nil when settle can run on v, and otherwise an error that names the
// version and the minimum: MySQL 8.0.1 or MariaDB 10.6, the first releases whose
// SELECT … FOR UPDATE SKIP LOCKED the claims rely on.
func (v Version) Supported() error {
	min := minMySQL
	if v.Flavour == MariaDB {
		min = minMariaDB
	}
	if v.less(min) {
		return fmt.Errorf("%w: server is %s; settle needs MySQL ≥ 8.0.1 or MariaDB ≥ 10.6 (SELECT … FOR UPDATE SKIP LOCKED)",
			ErrUnsupportedServer, v)
	}
	return nil
}

// Detect asks the server behind db for its version (SELECT VERSION()) and the connection's
// current database (SELECT DATABASE()), and refuses a server older than MySQL 8.0.1 or
// MariaDB 10.6 with an error naming its version. A connection without a current database is
// refused too: queue tables and advisory lock names are resolved against it.
func Detect(ctx context.Context, db *sql.DB) (Version, string, error) {
	var raw string
	var database sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), DATABASE()").Scan(&raw, &database); err != nil {
		return Version{}, "", fmt.Errorf("mysql: asking the server for its version: %w", edgeErr(err))
	}
	v, err := ParseVersion(raw)
	if err != nil {
		return Version{}, "", err
	}
	if err := v.Supported(); err != nil {
		return v, "", err
	}
	if !database.Valid || database.String == "" {
		return v, "", fmt.Errorf("mysql: the connection has no current database (name one in the DSN: user@tcp(host:3306)/dbname)")
	}
	return v, database.String, nil
}
