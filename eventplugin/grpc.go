package eventplugin

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/eventplugin/internal/wire"
)

// GRPCPlugin is the go-plugin plugin of an event plugin, in both directions: on the plugin side
// it serves Impl, on the host side it hands out a Handler that calls the plugin process. Plugin
// authors rarely touch it (Serve uses it); it is exported so that a plugin's own tests can
// connect its Handler in process with plugin.TestPluginGRPCConn:
//
//	client, _ := plugin.TestPluginGRPCConn(t, false, plugin.PluginSet{
//		eventplugin.PluginName: &eventplugin.GRPCPlugin{Impl: myHandler{}},
//	})
//	raw, _ := client.Dispense(eventplugin.PluginName)
//	h := raw.(eventplugin.Handler)
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the plugin's Handler (plugin side only).
	Impl Handler
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer registers the plugin's service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	wire.RegisterEventPluginServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Handler that calls the plugin process over c.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &grpcClient{c: wire.NewEventPluginClient(c)}, nil
}

// grpcServer is the plugin-side adapter: wire requests to the Handler and back.
type grpcServer struct {
	wire.UnimplementedEventPluginServer
	impl Handler
}

// A Handler's own error travels as codes.Aborted with its text, so the host can tell it from a
// broken connection.
func handlerError(err error) error { return status.Error(codes.Aborted, err.Error()) }

func (s *grpcServer) Describe(ctx context.Context, _ *wire.DescribeRequest) (*wire.DescribeResponse, error) {
	m, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, handlerError(err)
	}
	resp := &wire.DescribeResponse{Name: m.Name}
	for _, h := range m.Handles {
		resp.Handles = append(resp.Handles, &wire.Handles{Event: wire.Event(h.Event), Dialects: h.Dialects})
	}
	return resp, nil
}

func (s *grpcServer) Render(ctx context.Context, req *wire.RenderRequest) (*wire.RenderResponse, error) {
	r := requestFromWire(req)
	stmts, err := s.impl.Render(ctx, r)
	if err != nil {
		return nil, handlerError(err)
	}
	resp := &wire.RenderResponse{Event: req.Event, Statements: make([]*wire.Statement, len(stmts))}
	for i, st := range stmts {
		ws := &wire.Statement{Sql: st.SQL, Args: make([]*wire.Value, len(st.Args))}
		for j, a := range st.Args {
			v, err := valueToWire(a)
			if err != nil {
				return nil, handlerError(fmt.Errorf("statement %d, argument %d: %w", i+1, j+1, err))
			}
			ws.Args[j] = v
		}
		resp.Statements[i] = ws
	}
	return resp, nil
}

// grpcClient is the host-side adapter: a Handler that calls the plugin process.
type grpcClient struct {
	c wire.EventPluginClient
}

var _ Handler = (*grpcClient)(nil)

func (c *grpcClient) Describe(ctx context.Context) (Manifest, error) {
	resp, err := c.c.Describe(ctx, &wire.DescribeRequest{Protocol: ProtocolVersion})
	if err != nil {
		return Manifest{}, fromStatus(err)
	}
	m := Manifest{Name: resp.Name}
	for _, h := range resp.Handles {
		m.Handles = append(m.Handles, Handles{Event: Event(h.Event), Dialects: h.Dialects})
	}
	return m, nil
}

func (c *grpcClient) Render(ctx context.Context, r *Request) ([]Statement, error) {
	_, stmts, err := c.render(ctx, r)
	return stmts, err
}

// render also reports the event the plugin says the statements are for.
func (c *grpcClient) render(ctx context.Context, r *Request) (Event, []Statement, error) {
	resp, err := c.c.Render(ctx, requestToWire(r))
	if err != nil {
		return 0, nil, fromStatus(err)
	}
	stmts := make([]Statement, len(resp.Statements))
	for i, ws := range resp.Statements {
		st := Statement{SQL: ws.Sql, Args: make([]any, len(ws.Args))}
		for j, v := range ws.Args {
			st.Args[j] = valueFromWire(v)
		}
		stmts[i] = st
	}
	return Event(resp.Event), stmts, nil
}

// HandlerError is the error a plugin's Handler returned, as the host receives it.
type HandlerError struct {
	// Message is the error's text in the plugin process.
	Message string
}

func (e *HandlerError) Error() string { return e.Message }

// fromStatus turns a Handler's error back into a HandlerError and leaves transport errors
// (the process died, the deadline passed) as gRPC status errors for the host to classify.
func fromStatus(err error) error {
	if s, ok := status.FromError(err); ok && s.Code() == codes.Aborted {
		return &HandlerError{Message: s.Message()}
	}
	return err
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func fromTS(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func columnsToWire(c sqlqueue.Columns) *wire.Columns {
	return &wire.Columns{Id: c.ID, Payload: c.Payload, Group: c.Group, Attempt: c.Attempt, RetryAfter: c.RetryAfter,
		LockedUntil: c.LockedUntil, ProcessedAt: c.ProcessedAt, Headers: c.Headers, CreatedAt: c.CreatedAt}
}

func columnsFromWire(c *wire.Columns) sqlqueue.Columns {
	return sqlqueue.Columns{ID: c.GetId(), Payload: c.GetPayload(), Group: c.GetGroup(), Attempt: c.GetAttempt(),
		RetryAfter: c.GetRetryAfter(), LockedUntil: c.GetLockedUntil(), ProcessedAt: c.GetProcessedAt(),
		Headers: c.GetHeaders(), CreatedAt: c.GetCreatedAt()}
}

func tableToWire(t Table) *wire.Table {
	return &wire.Table{Schema: t.Schema, Name: t.Name, Columns: columnsToWire(t.Columns),
		QuotedName: t.QuotedName, QuotedColumns: columnsToWire(t.Quoted)}
}

func requestToWire(r *Request) *wire.RenderRequest {
	w := &wire.RenderRequest{
		Event:        wire.Event(r.Event),
		Dialect:      r.Dialect,
		Form:         wire.Form(r.Form),
		Placeholders: wire.Placeholders(r.Placeholders),
		Table:        r.wireTable,
		Subscription: r.Subscription,
		Queue:        r.Queue,
		Now:          ts(r.Now),
	}
	if w.Table == nil {
		w.Table = tableToWire(r.Table)
	}
	switch r.Event {
	case EventClaim:
		w.Claim = &wire.Claim{Limit: int64(r.Claim.Limit), Group: r.Claim.Group, Token: ts(r.Claim.Token)}
	default:
		w.Row = &wire.Row{Id: r.Row.ID, Attempt: int64(r.Row.Attempt), Group: r.Row.Group, Token: ts(r.Row.Token)}
	}
	if r.Event == EventRetryAfter {
		w.Delay = durationpb.New(r.Delay)
		w.RetryAt = ts(r.RetryAt)
	}
	if r.Event == EventDeadLetter {
		w.Destination = &wire.Destination{Name: r.Dest.Name, IsGroup: r.Dest.IsGroup, QuotedTable: r.Dest.QuotedTable}
	}
	return w
}

func requestFromWire(w *wire.RenderRequest) *Request {
	r := &Request{
		Event:        Event(w.Event),
		Dialect:      w.Dialect,
		Form:         sqlqueue.Form(w.Form),
		Placeholders: Placeholders(w.Placeholders),
		Subscription: w.Subscription,
		Queue:        w.Queue,
		Now:          fromTS(w.Now),
	}
	if t := w.Table; t != nil {
		r.Table = Table{Table: sqlqueue.Table{Schema: t.Schema, Name: t.Name, Columns: columnsFromWire(t.Columns)},
			QuotedName: t.QuotedName, Quoted: columnsFromWire(t.QuotedColumns)}
	}
	if row := w.Row; row != nil {
		r.Row = Row{ID: row.Id, Attempt: int(row.Attempt), Group: row.Group, Token: fromTS(row.Token)}
	}
	if c := w.Claim; c != nil {
		r.Claim = Claim{Limit: int(c.Limit), Group: c.Group, Token: fromTS(c.Token)}
	}
	if w.Delay != nil {
		r.Delay = w.Delay.AsDuration()
	}
	r.RetryAt = fromTS(w.RetryAt)
	if d := w.Destination; d != nil {
		r.Dest = Destination{Name: d.Name, IsGroup: d.IsGroup, QuotedTable: d.QuotedTable}
	}
	return r
}

// valueToWire converts one statement argument; the types it accepts are Statement's.
func valueToWire(a any) (*wire.Value, error) {
	switch v := a.(type) {
	case nil:
		return &wire.Value{Kind: &wire.Value_Null{Null: true}}, nil
	case int:
		return wireInt(int64(v)), nil
	case int8:
		return wireInt(int64(v)), nil
	case int16:
		return wireInt(int64(v)), nil
	case int32:
		return wireInt(int64(v)), nil
	case int64:
		return wireInt(v), nil
	case uint8:
		return wireInt(int64(v)), nil
	case uint16:
		return wireInt(int64(v)), nil
	case uint32:
		return wireInt(int64(v)), nil
	case uint:
		if uint64(v) > math.MaxInt64 {
			return nil, fmt.Errorf("unsigned value %d does not fit a signed 64-bit integer", v)
		}
		return wireInt(int64(v)), nil
	case uint64:
		if v > math.MaxInt64 {
			return nil, fmt.Errorf("unsigned value %d does not fit a signed 64-bit integer", v)
		}
		return wireInt(int64(v)), nil
	case float32:
		return &wire.Value{Kind: &wire.Value_Float{Float: float64(v)}}, nil
	case float64:
		return &wire.Value{Kind: &wire.Value_Float{Float: v}}, nil
	case string:
		return &wire.Value{Kind: &wire.Value_Text{Text: v}}, nil
	case []byte:
		return &wire.Value{Kind: &wire.Value_Bytes{Bytes: v}}, nil
	case bool:
		return &wire.Value{Kind: &wire.Value_Bool{Bool: v}}, nil
	case time.Time:
		return &wire.Value{Kind: &wire.Value_Time{Time: timestamppb.New(v)}}, nil
	}
	return nil, fmt.Errorf("unsupported type %T (use nil, an integer, a float, a string, []byte, a bool or time.Time)", a)
}

func wireInt(v int64) *wire.Value { return &wire.Value{Kind: &wire.Value_Int{Int: v}} }

// valueFromWire converts one argument back: nil, int64, float64, string, []byte, bool or a
// UTC time.Time.
func valueFromWire(v *wire.Value) any {
	switch k := v.GetKind().(type) {
	case *wire.Value_Int:
		return k.Int
	case *wire.Value_Float:
		return k.Float
	case *wire.Value_Text:
		return k.Text
	case *wire.Value_Bytes:
		if k.Bytes == nil {
			return []byte{}
		}
		return k.Bytes
	case *wire.Value_Bool:
		return k.Bool
	case *wire.Value_Time:
		return k.Time.AsTime()
	}
	return nil
}
