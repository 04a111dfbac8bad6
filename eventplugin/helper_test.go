package eventplugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin/internal/wire"
)

// The test binary doubles as the plugin binary of the failure tests: run with
// EVENTPLUGIN_TEST_HELPER=<mode> it serves (or refuses to serve) as that mode says, so those
// tests need no build of their own.
const helperEnv = "EVENTPLUGIN_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		runHelper(mode)
		os.Exit(0)
	}
	code := m.Run()
	cleanupBuilds()
	os.Exit(code)
}

// Row ids that make the test handler misbehave.
const (
	idCrash    = 666 // the process exits mid-call
	idHang     = 777 // the call never returns
	idError    = 13  // the handler returns an error
	idArgCount = 21  // one placeholder, two arguments
	idWrongEv  = 22  // the answer claims to be for another event (rogue server only)
	idBadSQL   = 31  // the statement does not parse
)

// testHandler declares ack and drop for every dialect and retry_after for sqlite only, and
// answers ack with one fenced statement. Unless plain, the row ids above make it misbehave.
type testHandler struct {
	name  string
	plain bool
}

func (h testHandler) Describe(context.Context) (Manifest, error) {
	return Manifest{Name: h.name, Handles: []Handles{
		{Event: EventAck},
		{Event: EventDrop},
		{Event: EventRetryAfter, Dialects: []string{"sqlite"}},
	}}, nil
}

func (h testHandler) Render(ctx context.Context, r *Request) ([]Statement, error) {
	switch id := r.Row.ID; {
	case h.plain:
	case id == idCrash:
		os.Exit(3)
	case id == idHang:
		<-ctx.Done()
		select {} // never answer, even after the host gave up
	case id == idError:
		return nil, errors.New("row 13 is cursed")
	case id == idBadSQL:
		return []Statement{{SQL: "DELETE FORM " + r.Table.QuotedName + " WHERE id = " + r.Placeholder(1), Args: []any{r.Row.ID}}}, nil
	case id == idArgCount:
		return []Statement{{SQL: "DELETE FROM " + r.Table.QuotedName + " WHERE id = " + r.Placeholder(1), Args: []any{r.Row.ID, "extra"}}}, nil
	}
	// The dialect's own ack of a table without processed_at, fenced by the lease as the
	// dialect fences it, so that the benchmark compares like with like.
	st := Statement{
		SQL:  "DELETE FROM " + r.Table.QuotedName + " WHERE " + r.Table.Quoted.ID + " = " + r.Placeholder(1),
		Args: []any{r.Row.ID},
	}
	if r.Form == sqlqueue.FormLease {
		st.SQL += " AND " + r.Table.Quoted.LockedUntil + " = " + r.Placeholder(2)
		st.Args = append(st.Args, r.Row.Token)
	}
	return []Statement{st}, nil
}

// rogueServer answers row idWrongEv with statements for another event.
type rogueServer struct{ grpcServer }

func (s *rogueServer) Render(ctx context.Context, req *wire.RenderRequest) (*wire.RenderResponse, error) {
	resp, err := s.grpcServer.Render(ctx, req)
	if err == nil && req.GetRow().GetId() == idWrongEv {
		resp.Event = wire.Event_EVENT_DEAD_LETTER
	}
	return resp, err
}

type roguePlugin struct{ GRPCPlugin }

func (p *roguePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	wire.RegisterEventPluginServer(s, &rogueServer{grpcServer{impl: p.Impl}})
	return nil
}

// badManifest declares an unknown event.
type badManifest struct{ testHandler }

func (badManifest) Describe(context.Context) (Manifest, error) {
	return Manifest{Name: "bad", Handles: []Handles{{Event: Event(42)}}}, nil
}

func runHelper(mode string) {
	serve := func(hs plugin.HandshakeConfig, version int, p plugin.Plugin) {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  hs,
			VersionedPlugins: map[int]plugin.PluginSet{version: {PluginName: p}},
			GRPCServer:       plugin.DefaultGRPCServer,
		})
	}
	h := testHandler{name: "test-helper"}
	switch mode {
	case "ok":
		Serve(h)
	case "plain":
		Serve(testHandler{name: "test-helper", plain: true})
	case "claim":
		Serve(quotaClaim{})
	case "rogue":
		serve(Handshake, ProtocolVersion, &roguePlugin{GRPCPlugin{Impl: h}})
	case "bad-manifest":
		Serve(badManifest{h})
	case "wrong-cookie":
		hs := Handshake
		hs.MagicCookieKey, hs.MagicCookieValue = "OTHER_APP_PLUGIN", "not-settle"
		serve(hs, ProtocolVersion, &GRPCPlugin{Impl: h})
	case "version-2":
		hs := Handshake
		hs.ProtocolVersion = 2
		serve(hs, 2, &GRPCPlugin{Impl: h})
	case "not-a-plugin":
		fmt.Println("hello, I am a command-line tool")
	case "silent":
		select {} // a binary that never speaks: the host's start timeout ends it
	case "host", "host-no-deathsig":
		runHost(mode == "host-no-deathsig")
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(2)
	}
}

// runHost is a service that loads the test binary as its plugin ("ok"), prints "ready <pid of
// the plugin>" and runs until it is killed. Without the death signal only the plugin's own
// watch of its parent can end the plugin after the host dies.
func runHost(noDeathSignal bool) {
	os.Unsetenv(helperEnv) // go-plugin passes the host's environment after Env's entries
	opts := []Option{Env(helperEnv + "=ok")}
	if noDeathSignal {
		opts = append(opts, func(c *config) error { c.noDeathSignal = true; return nil })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	p, err := Load(ctx, os.Args[0], opts...)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host: load:", err)
		os.Exit(2)
	}
	p.mu.Lock()
	rc := p.proc.client.ReattachConfig()
	p.mu.Unlock()
	fmt.Printf("ready %d\n", rc.Pid)
	select {}
}

// loadHelper loads the test binary as a plugin in mode.
func loadHelper(t testing.TB, mode string, opts ...Option) (*Plugin, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]Option{Env(helperEnv + "=" + mode)}, opts...)
	p, err := Load(ctx, os.Args[0], opts...)
	if err == nil {
		t.Cleanup(func() { p.Close() })
	}
	return p, err
}

// quotaClaim renders a claim that leaves rows alone once they have had three attempts: they
// wait for an operator instead of cycling on.
type quotaClaim struct{}

func (quotaClaim) Describe(context.Context) (Manifest, error) {
	return Manifest{Name: "quota-claim", Handles: []Handles{{Event: EventClaim}}}, nil
}

func (quotaClaim) Render(_ context.Context, r *Request) ([]Statement, error) {
	t, c, p := r.Table.QuotedName, r.Table.Quoted, r.Placeholder
	headers := c.Headers
	if headers == "" {
		headers = "NULL"
	}
	ready := "(" + c.RetryAfter + " IS NULL OR " + c.RetryAfter + " <= " + p(1) + ") AND " + c.Attempt + " < 3"
	args := []any{r.Now}
	mysql := r.Dialect == "mysql" || r.Dialect == "mariadb"
	switch {
	case r.Form == sqlqueue.FormRowLock:
		return []Statement{{SQL: "SELECT " + c.ID + ", " + c.Payload + ", " + c.Attempt + " + 1, " + headers + " FROM " + t +
			" WHERE " + ready + " ORDER BY " + c.ID + " LIMIT " + p(2) + " FOR UPDATE SKIP LOCKED", Args: append(args, int64(r.Claim.Limit))}}, nil
	case r.Form == sqlqueue.FormLease && mysql:
		// No UPDATE … RETURNING: stamp, then read back the rows that carry this claim's token.
		ready += " AND (" + c.LockedUntil + " IS NULL OR " + c.LockedUntil + " <= ?)"
		return []Statement{
			{SQL: "UPDATE " + t + " SET " + c.LockedUntil + " = ?, " + c.Attempt + " = " + c.Attempt + " + 1 WHERE " + ready +
				" ORDER BY " + c.ID + " LIMIT ?", Args: []any{r.Claim.Token, r.Now, r.Now, int64(r.Claim.Limit)}},
			{SQL: "SELECT " + c.ID + ", " + c.Payload + ", " + c.Attempt + ", " + headers + " FROM " + t + " WHERE " + c.LockedUntil + " = ? ORDER BY " + c.ID,
				Args: []any{r.Claim.Token}},
		}, nil
	case r.Form == sqlqueue.FormLease:
		// Placeholders in text order, so that one argument list serves ? and $n alike.
		lock := ""
		if r.Dialect == "postgres" {
			lock = " FOR UPDATE SKIP LOCKED"
		}
		ready := "(" + c.RetryAfter + " IS NULL OR " + c.RetryAfter + " <= " + p(2) + ") AND (" + c.LockedUntil + " IS NULL OR " +
			c.LockedUntil + " <= " + p(3) + ") AND " + c.Attempt + " < 3"
		return []Statement{{SQL: "UPDATE " + t + " SET " + c.LockedUntil + " = " + p(1) + ", " + c.Attempt + " = " + c.Attempt + " + 1 WHERE " +
			c.ID + " IN (SELECT " + c.ID + " FROM " + t + " WHERE " + ready + " ORDER BY " + c.ID + " LIMIT " + p(4) + lock + ") RETURNING " +
			c.ID + ", " + c.Payload + ", " + c.Attempt + ", " + headers, Args: []any{r.Claim.Token, r.Now, r.Now, int64(r.Claim.Limit)}}}, nil
	}
	return nil, fmt.Errorf("no claim for the %s form", r.Form)
}
