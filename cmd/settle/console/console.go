// Package console is settle's web console: a small server-rendered site over ops.Queue
// (html/template, embedded assets, no JavaScript build step and no script at all) that shows
// every configured queue with its depth by state, lists dead letters with why they died, shows
// one with its headers and payload, and redrives or purges one, a selection or all of them.
//
// State-changing requests are POSTs carrying a CSRF token (a random value in a SameSite=Strict
// cookie, repeated in the form, compared in constant time; a cross-site Origin is refused
// too); a purge asks for confirmation on a page of its own. The console is meant to be bound
// to localhost: CheckListen refuses any other address unless a token or basic-auth credentials
// protect it. The settle command serves it as `settle console`.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/settlehq/settle/core/ops"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Queue is one queue the console shows: a name for people and its operations view.
type Queue struct {
	Name string
	Ops  ops.Queue
	// Backend and Host say where the queue lives (e.g. "postgres", "db1:5432"), so that two
	// queues of the same name on different backends or servers are told apart: both are shown
	// beside the name on every page and in its title. Either may be empty.
	Backend, Host string
}

// Where is the queue's backend and host as the pages show them ("postgres db1:5432").
func (q Queue) Where() string {
	return strings.TrimSpace(q.Backend + " " + q.Host)
}

// Label is the queue's name with where it lives, for titles ("refunds · postgres db1:5432").
func (q Queue) Label() string {
	if w := q.Where(); w != "" {
		return q.Name + " · " + w
	}
	return q.Name
}

// Options configure a Server.
type Options struct {
	// Token, when set, is required on every request: "Authorization: Bearer <token>", or once
	// as ?token=<token>, which sets a cookie for the session.
	Token string
	// BasicAuth, "user:password", when set, is required on every request (HTTP basic auth).
	BasicAuth string
	// Refresh is how often the overview page reloads itself (default 5s).
	Refresh time.Duration
	// Timeout bounds each request's backend operations (default 30s).
	Timeout time.Duration
	// Logger logs each change (redrive, purge) and each failure (default: discard).
	Logger *slog.Logger
	// Now is the clock ages are computed on (default time.Now).
	Now func() time.Time
	// AllowedHosts are the host names (without port) a request's Host header may carry; any
	// other answers 421 Misdirected Request, so that a page on another origin cannot read the
	// console through DNS rebinding (its requests carry the attacker's host name). localhost,
	// 127.0.0.1 and ::1 are always allowed. "*" allows every host (only sensible behind a
	// proxy that checks it).
	AllowedHosts []string
	// AsyncAPI is a service's AsyncAPI 3 document (JSON or YAML, as settle asyncapi writes it),
	// shown at /asyncapi and served at /asyncapi.json and /asyncapi.yaml; nil for none.
	AsyncAPI []byte
}

// Server is the console's http.Handler.
type Server struct {
	queues []Queue
	o      Options
	tmpl   map[string]*template.Template
	mux    *http.ServeMux
	hosts  map[string]bool // allowed Host names, lower case; nil allows every host
	moved  *movedSet       // dead letters this console redrove or purged lately
}

// New returns the console over queues.
func New(queues []Queue, o Options) (*Server, error) {
	if len(queues) == 0 {
		return nil, errors.New("console: no queues to show")
	}
	for i, q := range queues {
		if q.Ops == nil || q.Name == "" {
			return nil, fmt.Errorf("console: queue %d has no name or no ops", i)
		}
	}
	if o.BasicAuth != "" && !strings.Contains(o.BasicAuth, ":") {
		return nil, errors.New("console: basic auth must be user:password")
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{queues: queues, o: o, tmpl: map[string]*template.Template{}, mux: http.NewServeMux(),
		moved: newMovedSet(movedKept)}
	if err := s.allowHosts(o.AllowedHosts); err != nil {
		return nil, err
	}
	funcs := template.FuncMap{"age": Age, "pathEscape": url.PathEscape, "oneLine": oneLine,
		"deref": func(n *int64) int64 {
			if n == nil {
				return 0
			}
			return *n
		}}
	for _, page := range []string{"overview", "queue", "dead", "confirm", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		s.tmpl[page] = t
	}
	static, _ := fs.Sub(assets, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /q/{q}", s.queuePage)
	s.mux.HandleFunc("GET /q/{q}/dead/{id}", s.deadPage)
	s.mux.HandleFunc("POST /q/{q}/redrive", s.redrive)
	s.mux.HandleFunc("POST /q/{q}/purge", s.purge)
	if err := s.mountAsyncAPI(); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckListen refuses to serve on addr without protection unless it is a loopback address:
// a console that can purge dead letters must not be open to the network.
func CheckListen(addr string, o Options) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if o.Token == "" && o.BasicAuth == "" {
		what := host
		if what == "" {
			what = "every interface"
		}
		return fmt.Errorf("console: refusing to listen on %s (%s) without --token or --basic-auth: bind it to 127.0.0.1, or protect it", addr, what)
	}
	return nil
}

const csrfCookie = "settle_csrf"
const tokenCookie = "settle_token"

// ServeHTTP serves the console: every request is checked against the token or basic-auth
// credentials first, and every page forbids framing and scripts.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
	if !s.hostAllowed(r.Host) {
		http.Error(w, fmt.Sprintf("settle console: host %q is not one this console answers to (allowed: %s); start it with --allowed-hosts to add one",
			r.Host, strings.Join(s.o.AllowedHosts, ", ")), http.StatusMisdirectedRequest)
		return
	}
	if !s.authorized(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

func equal(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// authorized checks the token or basic-auth credentials, when the console has them.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.o.BasicAuth != "" {
		u, p, ok := r.BasicAuth()
		if !ok || !equal(u+":"+p, s.o.BasicAuth) {
			w.Header().Set("WWW-Authenticate", `Basic realm="settle console", charset="UTF-8"`)
			http.Error(w, "settle console: credentials required", http.StatusUnauthorized)
			return false
		}
	}
	if s.o.Token != "" {
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && equal(t, s.o.Token) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			r.URL.RawQuery = q.Encode()
			http.Redirect(w, r, r.URL.String(), http.StatusSeeOther)
			return false
		}
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if c, err := r.Cookie(tokenCookie); err == nil && got == "" {
			got = c.Value
		}
		if !equal(got, s.o.Token) {
			http.Error(w, "settle console: token required (Authorization: Bearer, or open the console once with ?token=)", http.StatusUnauthorized)
			return false
		}
	}
	return true
}

// csrf returns the request's CSRF token, setting the cookie when the browser has none.
func csrf(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return v
}

// checkPost refuses a POST without the CSRF token of its cookie, or from another origin.
func checkPost(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			return fmt.Errorf("request from origin %q refused", o)
		}
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" || !equal(c.Value, r.PostFormValue("csrf")) {
		return errors.New("missing or wrong CSRF token: reload the page and try again")
	}
	return nil
}

func (s *Server) queue(r *http.Request) (int, Queue, bool) {
	i, err := strconv.Atoi(r.PathValue("q"))
	if err != nil || i < 0 || i >= len(s.queues) {
		return 0, Queue{}, false
	}
	return i, s.queues[i], true
}

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.o.Timeout)
}

// render executes a page into a buffer first, so that a template failure is a 500, not half a
// page.
func (s *Server) render(w http.ResponseWriter, status int, page string, data map[string]any) {
	var buf bytes.Buffer
	if err := s.tmpl[page].Execute(&buf, data); err != nil {
		s.o.Logger.Error("console: rendering a page", "page", page, "error", err)
		http.Error(w, "settle console: rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, status int, err error) {
	s.render(w, status, "error", map[string]any{"Title": "error", "Status": status, "Error": err.Error()})
}

// row is one queue's figures on a page; a nil figure is unmeasured.
type row struct {
	Index                          int
	Name, Where, Label, DeadLetter string
	Ready, Delayed, InFlight, Dead *int64
	Oldest                         string
	Unmeasured                     []ops.Unmeasured
	Err                            string
}

func statsRow(i int, q Queue, s ops.Stats, err error) row {
	r := row{Index: i, Name: q.Name, Where: q.Where(), Label: q.Label(), DeadLetter: s.DeadLetter}
	if err != nil {
		r.Err = err.Error()
		return r
	}
	n := func(f ops.Figure, v int64) *int64 {
		if !s.Measured(f) {
			return nil
		}
		return &v
	}
	r.Ready, r.Delayed, r.InFlight, r.Dead = n(ops.FigureReady, s.Ready), n(ops.FigureDelayed, s.Delayed),
		n(ops.FigureInFlight, s.InFlight), n(ops.FigureDead, s.Dead)
	r.Oldest = "-"
	if HasOldest(s) {
		r.Oldest = Age(s.OldestReady)
	}
	r.Unmeasured = s.Unmeasured
	return r
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	rows := make([]row, len(s.queues))
	for i, q := range s.queues {
		st, err := q.Ops.Stats(ctx)
		rows[i] = statsRow(i, q, st, err)
	}
	s.render(w, http.StatusOK, "overview", map[string]any{"Title": "queues", "Rows": rows,
		"Refresh": int(s.o.Refresh.Round(time.Second).Seconds()), "Now": s.o.Now().UTC().Format("15:04:05Z"),
		"AsyncAPI": s.tmpl["asyncapi"] != nil})
}

// deadItem is a dead letter on a list.
type deadItem struct {
	ops.DeadLetter
	Age string
}

func (s *Server) filterOf(r *http.Request) ops.Filter {
	q := r.URL.Query()
	return ops.Filter{Origin: q.Get("origin"), Reason: q.Get("reason")}
}

func (s *Server) queuePage(w http.ResponseWriter, r *http.Request) {
	i, q, ok := s.queue(r)
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("no such queue"))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := q.Ops.Stats(ctx)
	f := s.filterOf(r)
	data := map[string]any{"Title": q.Label(), "Row": statsRow(i, q, st, err), "Filter": f, "CSRF": csrf(w, r),
		"Done": r.URL.Query().Get("done"), "Cursor": r.URL.Query().Get("cursor")}
	page, err := q.Ops.ListDead(ctx, f, ops.Page{Limit: 50, After: r.URL.Query().Get("cursor")})
	if err != nil {
		data["ListErr"] = err.Error()
	}
	now := s.o.Now()
	items := make([]deadItem, len(page.Items))
	for k, d := range page.Items {
		items[k] = deadItem{DeadLetter: d, Age: "-"}
		if !d.DeadAt.IsZero() {
			items[k].Age = Age(now.Sub(d.DeadAt))
		}
	}
	data["Items"], data["Next"] = items, page.Next
	if !f.IsZero() {
		data["FilterQuery"] = url.Values{"origin": {f.Origin}, "reason": {f.Reason}}.Encode()
	}
	s.render(w, http.StatusOK, "queue", data)
}

func (s *Server) deadPage(w http.ResponseWriter, r *http.Request) {
	i, q, ok := s.queue(r)
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("no such queue"))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	d, err := q.Ops.GetDead(ctx, r.PathValue("id"))
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, ErrUnavailable) {
			status = http.StatusServiceUnavailable
		}
		if errors.Is(err, ops.ErrNotFound) {
			status = http.StatusNotFound
			if how := s.moved.all(i, []string{r.PathValue("id")}); how != "" {
				err = fmt.Errorf("dead letter %s was %s from this console: it is no longer in the dead letter", r.PathValue("id"), how)
			}
		}
		s.fail(w, status, err)
		return
	}
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	headers := make([][2]string, len(keys))
	for k, key := range keys {
		headers[k] = [2]string{key, d.Headers[key]}
	}
	age := "-"
	if !d.DeadAt.IsZero() {
		age = Age(s.o.Now().Sub(d.DeadAt))
	}
	s.render(w, http.StatusOK, "dead", map[string]any{"Title": q.Label() + " · " + d.ID, "Index": i, "Queue": q.Name, "Where": q.Where(),
		"D": d, "Age": age, "Headers": headers, "Payload": Pretty(d.Payload), "CSRF": csrf(w, r)})
}

// selection reads the ids or all=1 of a form.
func selection(r *http.Request) ops.Selection {
	if r.PostFormValue("all") == "1" {
		f := ops.Filter{Origin: r.PostFormValue("origin"), Reason: r.PostFormValue("reason")}
		if !f.IsZero() {
			return ops.Matching(f)
		}
		return ops.All()
	}
	return ops.IDs(r.PostForm["id"]...)
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	i, q, ok := s.queue(r)
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("no such queue"))
		return
	}
	if err := checkPost(r); err != nil {
		s.fail(w, http.StatusForbidden, err)
		return
	}
	sel := selection(r)
	if err := sel.Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, errors.New("select dead letters first"))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	opt := ops.RedriveOptions{KeepAttempts: r.PostFormValue("keep") == "1",
		Moved: func(ids []string) { s.moved.add(i, "redriven", ids) }}
	n, err := q.Ops.Redrive(ctx, sel, opt)
	s.o.Logger.Info("console: redrive", "queue", q.Name, "where", q.Where(), "selection", sel.String(), "redriven", n, "error", err)
	if err != nil {
		status, err := s.changeStatus(i, err)
		if status == http.StatusInternalServerError {
			err = fmt.Errorf("redrove %d, then: %w", n, err)
		}
		s.fail(w, status, err)
		return
	}
	s.moved.add(i, "redriven", sel.IDs)
	done := url.Values{"done": {fmt.Sprintf("redriven %d dead letter%s", n, plural(n))}}
	http.Redirect(w, r, "/q/"+strconv.Itoa(i)+"?"+done.Encode(), http.StatusSeeOther)
}

// purge shows a confirmation page first; the confirmation's form POSTs again with confirm=yes.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	i, q, ok := s.queue(r)
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("no such queue"))
		return
	}
	if err := checkPost(r); err != nil {
		s.fail(w, http.StatusForbidden, err)
		return
	}
	sel := selection(r)
	if err := sel.Validate(); err != nil {
		s.fail(w, http.StatusBadRequest, errors.New("select dead letters first"))
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		s.render(w, http.StatusOK, "confirm", map[string]any{"Title": "purge " + q.Label(), "Index": i, "Queue": q.Name, "Where": q.Where(),
			"Sel": sel, "What": sel.String(), "CSRF": csrf(w, r)})
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	n, err := q.Ops.Purge(ctx, sel)
	s.o.Logger.Info("console: purge", "queue", q.Name, "where", q.Where(), "selection", sel.String(), "purged", n, "error", err)
	if err != nil {
		status, err := s.changeStatus(i, err)
		if status == http.StatusInternalServerError {
			err = fmt.Errorf("purged %d, then: %w", n, err)
		}
		s.fail(w, status, err)
		return
	}
	s.moved.add(i, "purged", sel.IDs)
	done := url.Values{"done": {fmt.Sprintf("purged %d dead letter%s", n, plural(n))}}
	http.Redirect(w, r, "/q/"+strconv.Itoa(i)+"?"+done.Encode(), http.StatusSeeOther)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// HasOldest reports whether s has an oldest ready age to show: it was measured and the queue
// has a ready message (an empty queue has no oldest; its zero age is not one).
func HasOldest(s ops.Stats) bool {
	return s.Measured(ops.FigureOldestReady) && !(s.Measured(ops.FigureReady) && s.Ready == 0)
}

// Age renders a duration for people: 42s, 5m10s, 3h12m, 4d6h.
func Age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Pretty renders a payload for reading: indented when it is JSON, as text when it is UTF-8,
// otherwise base64 with a note.
func Pretty(p []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, p, "", "  ") == nil {
		return buf.String()
	}
	if utf8.Valid(p) {
		return string(p)
	}
	return "(binary, " + strconv.Itoa(len(p)) + " bytes, base64)\n" + base64.StdEncoding.EncodeToString(p)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
