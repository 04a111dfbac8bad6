package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/settlehq/settle/core/sqlqueue"
	"github.com/settlehq/settle/core/sqlqueue/driver"
)

// TableDDL returns the DDL of a queue table described by t: the columns it names with
// MySQL types (times as DATETIME(6), so lease tokens and delays keep their microseconds), the
// id as an auto-increment primary key, and an index for the claim. It is valid on MySQL 8 and
// MariaDB (where JSON is an alias of LONGTEXT with a JSON check). For a table whose dead
// letter is a table, create the dead-letter table with the same description under its name.
//
// For sqlqueue.StandardTable("refunds") it is:
//
//	CREATE TABLE IF NOT EXISTS `refunds` (
//	  `id` BIGINT NOT NULL AUTO_INCREMENT,
//	  `payload` LONGBLOB NOT NULL,
//	  `grp` VARCHAR(191) NOT NULL,
//	  `attempt` INT NOT NULL DEFAULT 0,
//	  `retry_after` DATETIME(6) NULL,
//	  `locked_until` DATETIME(6) NULL,
//	  `processed_at` DATETIME(6) NULL,
//	  `headers` JSON NULL,
//	  `created_at` DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
//	  PRIMARY KEY (`id`),
//	  KEY `refunds_ready` (`grp`, `processed_at`, `id`)
//	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
func TableDDL(t sqlqueue.Table) (string, error) {
	d := &dialect{flavour: MySQL}
	s, err := driver.NewSchema(d, t)
	if err != nil {
		return "", err
	}
	cols := s.ColumnDefs(driver.ColumnTypes{
		ID: "BIGINT NOT NULL AUTO_INCREMENT", Payload: "LONGBLOB NOT NULL", Group: "VARCHAR(191) NOT NULL",
		Attempt: "INT NOT NULL DEFAULT 0", RetryAfter: "DATETIME(6) NULL", LockedUntil: "DATETIME(6) NULL",
		ProcessedAt: "DATETIME(6) NULL", Headers: "JSON NULL", CreatedAt: "DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
	})
	for i, c := range cols {
		cols[i] = "  " + c
	}
	cols = append(cols, "  PRIMARY KEY ("+s.ID+")")
	var idx []string
	if s.Group != "" {
		idx = append(idx, s.Group)
	}
	if s.ProcessedAt != "" {
		idx = append(idx, s.ProcessedAt)
	}
	if len(idx) > 0 {
		name := t.Name + "_ready"
		if len(name) > maxIdent {
			name = name[:maxIdent]
		}
		cols = append(cols, "  KEY "+d.Quote(name)+" ("+strings.Join(append(idx, s.ID), ", ")+")")
	}
	return "CREATE TABLE IF NOT EXISTS " + s.QTable + " (\n" + strings.Join(cols, ",\n") + "\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", nil
}

// CreateTable creates the queue table t (see TableDDL) if it does not exist.
func (db *DB) CreateTable(ctx context.Context, t sqlqueue.Table) error {
	ddl, err := TableDDL(t)
	if err != nil {
		return err
	}
	if _, err := db.pool.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("mysql: create table %s: %w", t.Ref(), edgeErr(err))
	}
	return nil
}
