package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Schema is the SQL that creates the store's table, named "idempotency",
// and its indexes: schema.sql, for migration tools. CreateTable runs the
// same statements for a table of any name.
//
//go:embed schema.sql
var Schema string

// The suffixes of the names of the table's indexes.
const (
	expirationIndex = "_expiration_idx"
	inProgressIndex = "_in_progress_idx"
)

// CreateTable creates the table name with the store's schema and its two
// indexes (see Schema), in Options.Schema when set, unless they exist. It
// runs in one transaction, and needs the CREATE privilege on the schema.
// optFns are the Store's: only Options.Schema matters here.
//
// The name must leave room for the indexes' names, name followed by
// "_in_progress_idx", within PostgreSQL's 63 bytes.
func CreateTable(ctx context.Context, db DB, name string, optFns ...func(*Options)) error {
	o, err := resolveOptions(optFns)
	if err != nil {
		return err
	}
	sql, err := createTableSQL(name, &o)
	if err != nil {
		return err
	}
	// Without arguments, pgx sends the statements in one simple query,
	// which the server runs as one transaction.
	if _, err := db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("persistence/postgres: creating table %s: %w", name, err)
	}
	return nil
}

// createTableSQL returns Schema's statements for table name in o.Schema.
func createTableSQL(name string, o *Options) (string, error) {
	if len(name)+len(inProgressIndex) > maxIdentifier {
		return "", fmt.Errorf("persistence/postgres: table name %q is too long: its index %s%s would be longer than PostgreSQL's %d bytes", name, name, inProgressIndex, maxIdentifier)
	}
	table, err := qualifiedName(name, o)
	if err != nil {
		return "", err
	}
	return strings.NewReplacer(
		`"idempotency"`, table,
		`"idempotency`+expirationIndex+`"`, pgx.Identifier{name + expirationIndex}.Sanitize(),
		`"idempotency`+inProgressIndex+`"`, pgx.Identifier{name + inProgressIndex}.Sanitize(),
	).Replace(Schema), nil
}
