package postgres

import (
	"strings"
	"testing"
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
