package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		v    int
		want string // "" for accepted
	}{
		{150004, ""},
		{110000, ""},
		{100023, "server version 10.23 (server_version_num 100023) is too old"},
		{90624, "server version 9.6.24 (server_version_num 90624) is too old"},
	} {
		err := checkVersion(c.v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%d: %v", c.v, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%d: err = %v; want %q", c.v, err, c.want)
		}
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("plain"), false},
		{&pgconn.PgError{Code: "40001"}, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "55P03"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
	} {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("IsTransient(%v) = %t; want %t", c.err, got, c.want)
		}
	}
}
