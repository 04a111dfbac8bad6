package mysql_test

import (
	"context"
	"fmt"
	"log"

	"github.com/settlehq/settle/core"
	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/dialect-mysql"
)

// A queue table for one queue (no group column): ack deletes the row, and the dead letter is
// a table with the same columns.
func ExampleTableDDL() {
	t := sqlqueue.StandardTable("refunds")
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	ddl, err := mysql.TableDDL(t)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS `refunds` (
	//   `id` BIGINT NOT NULL AUTO_INCREMENT,
	//   `payload` LONGBLOB NOT NULL,
	//   `attempt` INT NOT NULL DEFAULT 0,
	//   `retry_after` DATETIME(6) NULL,
	//   `locked_until` DATETIME(6) NULL,
	//   `headers` JSON NULL,
	//   `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	//   PRIMARY KEY (`id`)
	// ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
}

// The server's flavour decides what the dialect may say; an old server is refused by name.
func ExampleParseVersion() {
	for _, raw := range []string{"10.11.6-MariaDB-0+deb12u1", "8.0.36", "10.5.23-MariaDB"} {
		v, err := mysql.ParseVersion(raw)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(v.Flavour, v.Major, v.Minor, v.Supported() == nil)
	}
	// Output:
	// mariadb 10 11 true
	// mysql 8 0 true
	// mariadb 10 5 false
}

type refund struct {
	Card   string `json:"card"`
	Amount int    `json:"amount"`
}

// A refunds service on MariaDB or MySQL: a lease-form queue whose failing messages move to
// refunds_dead after five attempts, and a publisher. (Not run: it needs a server.)
func Example_service() {
	ctx := context.Background()
	db, err := mysql.Open(ctx, "root@tcp(127.0.0.1:3306)/shop?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	app := core.New()
	app.Register(db)
	t := sqlqueue.StandardTable("refunds")
	t.Columns.Group, t.Columns.ProcessedAt = "", ""
	dead := t
	dead.Name = "refunds_dead"
	for _, tb := range []sqlqueue.Table{t, dead} {
		if err := db.CreateTable(ctx, tb); err != nil {
			log.Fatal(err)
		}
	}
	ep, err := mysql.Lease(db, t, "")
	if err != nil {
		log.Fatal(err)
	}
	err = core.Subscribe(app, ep, func(ctx context.Context, m *core.Message[refund]) error {
		if m.Payload.Card == "" {
			return core.Drop()
		}
		return nil // ack: the row is deleted, fenced by this delivery's lease
	}, core.DeadLetterAfter(5, "refunds_dead"), core.Workers(4))
	if err != nil {
		log.Fatal(err)
	}
	pub, err := mysql.NewPublisher(db, t, "")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sqlqueue.Publish(ctx, pub, refund{Card: "4242", Amount: 1200}); err != nil {
		log.Fatal(err)
	}
	if err := app.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
