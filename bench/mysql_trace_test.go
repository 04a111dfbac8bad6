package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
)

// BenchmarkMariaDBTrace drains the queue with the lease and row-lock contenders of
// BenchmarkMariaDBDefaults through a TCP proxy that reads the client's side of the MySQL
// protocol: every command the pool sends (a command is one round trip, whatever it holds: a
// multi-statement query is one) is counted by its text, literals and IN lists folded, with
// the time from the command to the last byte of the server's answer before the next command.
// It prints, per contender, round trips and statements per claim and the time outside them.
// Rates are of the proxied drain (each round trip crosses the proxy), not for comparison with
// BenchmarkMariaDBDefaults.
//
//	SETTLE_BENCH_MARIADB_N=20000 go test -run '^$' -bench 'BenchmarkMariaDBTrace$' -benchtime 1x ./bench
//
// SETTLE_BENCH_MARIADB_WHO picks contenders as for the other MariaDB benchmarks.
func BenchmarkMariaDBTrace(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	n := myBenchN(b)
	admin, cfg := myAdminOrSkip(ctx, b)
	defer admin.Close()
	maxB := sqlqueue.DefaultMaxBatch // the claim size the defaults grow to on a backlog
	cs := []myContender{
		myRaw(fmt.Sprintf("raw lease (w=1,B=%d)", maxB), myRawLease, 1, maxB),
		mySettle("settle lease, defaults", mysql.Lease, 1, 1, 0),
		myRaw(fmt.Sprintf("raw rowlock grouped (w=1,B=%d)", maxB), myRawRowLockGrouped, 1, maxB),
		mySettle("settle rowlock, defaults", mysql.RowLock, 1, 1, 0),
	}
	for range b.N {
		for _, c := range cs {
			if !picked("SETTLE_BENCH_MARIADB_WHO", c.name) {
				continue
			}
			func() {
				px, err := newMyProxy(cfg.Addr)
				if err != nil {
					b.Fatal(err)
				}
				defer px.close()
				db, drop := myFreshDB(ctx, b, admin, cfg, px.addr(), c.conns, n)
				defer drop()
				px.reset()
				start := time.Now()
				taken, err := c.drain(ctx, db, n)
				wall := time.Since(start)
				if err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
				px.report(c.name, n, taken, wall)
			}()
		}
	}
}

// myProxy forwards connections to a MySQL server and counts the commands clients send.
type myProxy struct {
	ln       net.Listener
	upstream string
	stats    tally
}

func newMyProxy(upstream string) (*myProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &myProxy{ln: ln, upstream: upstream}
	go p.serve()
	return p, nil
}

func (p *myProxy) addr() string { return p.ln.Addr().String() }

func (p *myProxy) close() { _ = p.ln.Close() }

func (p *myProxy) reset() { p.stats.reset() }

func (p *myProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

// pipe forwards one connection: the server's bytes as they come, noting when the last one
// went out; the client's packet by packet, a packet with sequence number 0 starting a command.
func (p *myProxy) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer s.Close()
	var mu sync.Mutex
	var lastResp time.Time
	go func() {
		buf := make([]byte, 64<<10)
		for {
			k, err := s.Read(buf)
			if k > 0 {
				mu.Lock()
				lastResp = time.Now()
				mu.Unlock()
				if _, werr := c.Write(buf[:k]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = c.Close()
				return
			}
		}
	}()
	var cur string
	var curAt time.Time
	finish := func() {
		if cur == "" {
			return
		}
		mu.Lock()
		end := lastResp
		mu.Unlock()
		took := end.Sub(curAt)
		if took < 0 {
			took = 0
		}
		p.add(cur, took)
	}
	hdr := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			finish()
			return
		}
		size := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		body := make([]byte, size)
		if _, err := io.ReadFull(c, body); err != nil {
			finish()
			return
		}
		if hdr[3] == 0 && size > 0 {
			finish()
			cur, curAt = myCommand(body), time.Now()
		}
		if _, err := s.Write(append(hdr, body...)); err != nil {
			return
		}
		hdr = hdr[:4]
	}
}

var (
	myLitRE  = regexp.MustCompile(`'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b`)
	myListRE = regexp.MustCompile(`\?(?:, \?)+`)
)

// myCommand names a command: a query by its text with literals folded to ? and lists of
// them to ?…, other commands by their code.
func myCommand(body []byte) string {
	switch body[0] {
	case 0x03: // COM_QUERY
		q := myLitRE.ReplaceAllString(string(body[1:]), "?")
		return myListRE.ReplaceAllString(q, "?…")
	case 0x01:
		return "COM_QUIT"
	case 0x0e:
		return "COM_PING"
	case 0x16:
		return "COM_STMT_PREPARE"
	case 0x17:
		return "COM_STMT_EXECUTE"
	case 0x19:
		return "COM_STMT_CLOSE"
	case 0x1f:
		return "COM_RESET_CONNECTION"
	}
	return fmt.Sprintf("command 0x%02x", body[0])
}

func (p *myProxy) add(cmd string, took time.Duration) { p.stats.add(cmd, took) }

// report prints the commands of one drain of n rows: round trips in all and per claim (the
// claims counted as the commands that read ready rows), and the time in and outside them.
func (p *myProxy) report(name string, n int, taken, wall time.Duration) {
	stats, total := p.stats.sorted(func(a, b tallyStat) bool { return a.n > b.n })
	trips, claims := 0, 0
	for _, st := range stats {
		trips += st.n
		if strings.Contains(st.key, "FOR UPDATE SKIP LOCKED") && strings.Contains(st.key, "LIMIT") && !strings.Contains(st.key, "LIMIT 1 ") {
			claims += st.n
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\ntrace %s: %d rows in %v (%.0f msgs/s); %d round trips, %d claims, %.2f round trips a claim; in round trips %v (%.1f µs/row), outside %.1f µs/row\n",
		name, n, taken.Round(time.Millisecond), float64(n)/taken.Seconds(), trips, claims, float64(trips)/float64(max(claims, 1)),
		total.Round(time.Millisecond), float64(total.Microseconds())/float64(n), float64((wall-total).Microseconds())/float64(n))
	for _, st := range stats {
		fmt.Fprintf(&sb, "  %7d × %8.1f µs  %s\n", st.n, float64(st.took.Microseconds())/float64(st.n), short(st.key, 160))
	}
	fmt.Print(sb.String())
}
