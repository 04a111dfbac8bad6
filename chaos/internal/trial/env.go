// Package trial is the chaos suite's driver: it runs trials (a backend and form, a handler
// mix, faults), each against the suite's own servers, and checks the ledger and the backend
// afterwards.
package trial

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/settlehq/settle/chaos/internal/proxy"
	"github.com/settlehq/settle/chaos/internal/servers"
)

// The suite's loopback port ranges (its own servers; the shared ones are never touched).
var (
	PostgresPorts = [2]int{55432, 55439}
	MariaDBPorts  = [2]int{33306, 33309}
	RabbitPorts   = [2]int{5680, 5689}
	RabbitDist    = 25680 // + the node port's offset in RabbitPorts
	NATSPorts     = [2]int{4230, 4239}
)

// chaosDB is the database the trials' tables live in, on the suite's own servers.
const chaosDB = "chaos"

// Env is one run of the suite: its directory, binaries and servers (started on first use,
// stopped by Close).
type Env struct {
	Dir       string
	WorkerBin string
	// PluginBin is an eventplugin binary for the plugin trials ("" skips them with a reason).
	PluginBin string
	Groups    *servers.Groups
	Profile   Profile
	Log       io.Writer

	mu        sync.Mutex
	pg        *servers.Postgres
	maria     *servers.MariaDB
	rabbit    *servers.RabbitMQ
	amqpProxy *proxy.Proxy
	nats      *servers.NATS
	natsOld   *servers.NATS // a nats-server before 2.10, for the strand trial (natsbackend.go)
	startErr  map[string]error
	seq       int
}

// NewEnv prepares a run in dir.
func NewEnv(dir, workerBin, pluginBin string, p Profile, log io.Writer) (*Env, error) {
	if _, err := os.Stat(workerBin); err != nil {
		return nil, fmt.Errorf("worker binary: %w (build it: go build -o %s ./cmd/chaos-worker)", err, workerBin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Env{Dir: dir, WorkerBin: workerBin, PluginBin: pluginBin, Profile: p, Log: log,
		Groups: servers.NewGroups(filepath.Join(dir, "groups")), startErr: make(map[string]error)}, nil
}

func (e *Env) logf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (e *Env) nextID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return strconv.Itoa(e.seq)
}

// postgres returns the suite's PostgreSQL cluster, starting it on first use.
func (e *Env) postgres(ctx context.Context) (*servers.Postgres, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pg != nil {
		return e.pg, nil
	}
	if err := e.startErr["postgres"]; err != nil {
		return nil, err
	}
	port, err := servers.FreePort(PostgresPorts[0], PostgresPorts[1])
	if err == nil {
		start := time.Now()
		e.pg, err = servers.StartPostgres(ctx, e.Groups, filepath.Join(e.Dir, "postgres"), port)
		if err == nil {
			err = createPGDatabase(ctx, e.pg)
			fmt.Fprintf(e.Log, "%s postgres: own cluster on 127.0.0.1:%d up in %v\n", time.Now().Format("15:04:05.000"), port, time.Since(start).Round(time.Millisecond))
		}
	}
	if err != nil {
		e.startErr["postgres"] = err
		return nil, err
	}
	return e.pg, nil
}

func createPGDatabase(ctx context.Context, pg *servers.Postgres) error {
	c, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "CREATE DATABASE "+chaosDB)
	return err
}

// mariadb returns the suite's MariaDB server, starting it on first use.
func (e *Env) mariadb(ctx context.Context) (*servers.MariaDB, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.maria != nil {
		return e.maria, nil
	}
	if err := e.startErr["mariadb"]; err != nil {
		return nil, err
	}
	port, err := servers.FreePort(MariaDBPorts[0], MariaDBPorts[1])
	if err == nil {
		start := time.Now()
		e.maria, err = servers.StartMariaDB(ctx, e.Groups, filepath.Join(e.Dir, "mariadb"), port)
		if err == nil {
			var db *sql.DB
			if db, err = sql.Open("mysql", e.maria.DSN("")); err == nil {
				_, err = db.ExecContext(ctx, "CREATE DATABASE "+chaosDB)
				db.Close()
			}
			fmt.Fprintf(e.Log, "%s mariadb: own server on 127.0.0.1:%d up in %v\n", time.Now().Format("15:04:05.000"), port, time.Since(start).Round(time.Millisecond))
		}
	}
	if err != nil {
		e.startErr["mariadb"] = err
		return nil, err
	}
	return e.maria, nil
}

// rabbitmq returns the suite's RabbitMQ node and starts the workers' TCP proxy to it, on
// first use.
func (e *Env) rabbitmq(ctx context.Context) (*servers.RabbitMQ, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rabbit != nil {
		return e.rabbit, nil
	}
	if err := e.startErr["rabbitmq"]; err != nil {
		return nil, err
	}
	port, err := servers.FreePort(RabbitPorts[0], RabbitPorts[1])
	if err == nil {
		var proxyPort int
		if proxyPort, err = servers.FreePort(port+1, RabbitPorts[1]); err == nil {
			start := time.Now()
			node := fmt.Sprintf("settle-chaos-%d-%d@localhost", port, os.Getpid())
			e.rabbit, err = servers.StartRabbitMQ(ctx, e.Groups, filepath.Join(e.Dir, "rabbitmq"), node, port, RabbitDist+port-RabbitPorts[0])
			if err == nil {
				e.amqpProxy, err = proxy.Listen("127.0.0.1:"+strconv.Itoa(proxyPort), "127.0.0.1:"+strconv.Itoa(port))
				fmt.Fprintf(e.Log, "%s rabbitmq: own node %s on 127.0.0.1:%d (proxy :%d) up in %v\n", time.Now().Format("15:04:05.000"), node, port, proxyPort, time.Since(start).Round(time.Millisecond))
			}
		}
	}
	if err != nil {
		e.startErr["rabbitmq"] = err
		return nil, err
	}
	return e.rabbit, nil
}

// Close stops every server the run started and kills whatever process group is left.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.amqpProxy != nil {
		e.amqpProxy.Close()
	}
	if e.nats != nil {
		e.nats.Close()
	}
	if e.natsOld != nil {
		e.natsOld.Close()
	}
	if e.rabbit != nil {
		e.rabbit.Close()
	}
	if e.maria != nil {
		e.maria.Close()
	}
	if e.pg != nil {
		e.pg.Close()
	}
	e.Groups.KillAll()
}
