package mysql

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		raw     string
		want    Version
		refused bool
	}{
		{raw: "8.0.36", want: Version{Flavour: MySQL, Major: 8, Minor: 0, Patch: 36}},
		{raw: "8.0.1", want: Version{Flavour: MySQL, Major: 8, Minor: 0, Patch: 1}},
		{raw: "8.0.0-dmr", want: Version{Flavour: MySQL, Major: 8, Minor: 0, Patch: 0}, refused: true},
		{raw: "8.4.0-log", want: Version{Flavour: MySQL, Major: 8, Minor: 4, Patch: 0}},
		{raw: "5.7.44", want: Version{Flavour: MySQL, Major: 5, Minor: 7, Patch: 44}, refused: true},
		{raw: "10.11.6-MariaDB-0+deb12u1", want: Version{Flavour: MariaDB, Major: 10, Minor: 11, Patch: 6}},
		{raw: "10.6.0-MariaDB", want: Version{Flavour: MariaDB, Major: 10, Minor: 6, Patch: 0}},
		{raw: "10.5.23-MariaDB-log", want: Version{Flavour: MariaDB, Major: 10, Minor: 5, Patch: 23}, refused: true},
		{raw: "11.4.2-MariaDB", want: Version{Flavour: MariaDB, Major: 11, Minor: 4, Patch: 2}},
	}
	for _, c := range cases {
		t.Run(c.raw, func(t *testing.T) {
			v, err := ParseVersion(c.raw)
			if err != nil {
				t.Fatal(err)
			}
			c.want.Raw = c.raw
			if v != c.want {
				t.Fatalf("ParseVersion(%q) = %+v, want %+v", c.raw, v, c.want)
			}
			err = v.Supported()
			if c.refused {
				if !errors.Is(err, ErrUnsupportedServer) || !strings.Contains(err.Error(), c.raw) {
					t.Fatalf("Supported() = %v, want ErrUnsupportedServer naming %q", err, c.raw)
				}
			} else if err != nil {
				t.Fatalf("Supported() = %v", err)
			}
		})
	}
	for _, bad := range []string{"", "eight", "8", "1.2.3.4"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", bad)
		}
	}
}

func TestDetect(t *testing.T) {
	servers(t, func(t *testing.T, s testServer) {
		db, name := s.openFresh(t)
		v, database, err := Detect(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if v.Flavour.String() != s.name || database != name {
			t.Fatalf("Detect = %v, %q; want flavour %s, database %q", v, database, s.name, name)
		}
	})
}
