package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 42, item 2: with --management, settle stats counts a RabbitMQ queue's messages in flight
// and the ones a quorum queue is dead-lettering (its destination full or missing: not ready, not
// delivered) from the management API, which counts what AMQP cannot. Here a stand-in for the
// API reports 5 messages, 0 ready, 1 unacknowledged.
func TestStatsCountsDeadLetteringThroughTheManagementAPI(t *testing.T) {
	f := rabbitFixture(t)
	var asked string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		asked = r.URL.EscapedPath() + " as " + user + ":" + pass
		_ = json.NewEncoder(w).Encode(map[string]int{"messages": 5, "messages_ready": 0, "messages_unacknowledged": 1})
	}))
	defer api.Close()
	base := strings.Replace(api.URL, "http://", "http://mon:pw@", 1)
	code, out, errOut := settle(t, append([]string{"stats", "--json", "--management", base}, f.args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		InFlight      *int64 `json:"in_flight"`
		DeadLettering *int64 `json:"dead_lettering"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if got.InFlight == nil || *got.InFlight != 1 || got.DeadLettering == nil || *got.DeadLettering != 4 {
		t.Errorf("stats %s: want in_flight 1 and dead_lettering 4", out)
	}
	if !strings.HasPrefix(asked, "/api/queues/%2F/"+f.origin) || !strings.HasSuffix(asked, " as mon:pw") {
		t.Errorf("the API was asked %q", asked)
	}
	code, out, _ = settle(t, append([]string{"stats", "--management", base}, f.args...)...)
	if code != 0 || !strings.Contains(out, "4 messages being dead-lettered by the server") {
		t.Errorf("exit %d, table:\n%s\nwant a note on the 4 dead-lettering messages", code, out)
	}
}
