package servers

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestCheckLoopbackRefusesOtherHosts(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:5432", "localhost:3306", "[::1]:5672", "127.0.0.2"} {
		if err := CheckLoopback(ok); err != nil {
			t.Errorf("CheckLoopback(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.1:5432", "db.example.com:3306", "0.0.0.0:5672", ""} {
		if err := CheckLoopback(bad); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("CheckLoopback(%q) = %v, want a refusal", bad, err)
		}
	}
}

func TestFreePortSkipsTakenPorts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	if _, err := FreePort(taken, taken); err == nil || !strings.Contains(err.Error(), strconv.Itoa(taken)) {
		t.Fatalf("FreePort on a taken port: %v", err)
	}
}

func TestFindBinSaysWhatIsMissing(t *testing.T) {
	_, err := findBin("settle-no-such-server", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "settle-no-such-server") {
		t.Fatalf("findBin: %v", err)
	}
}
