package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Options configures a Store (and [CreateTable]). The zero value is ready
// to use.
//
// The column names are fixed (see the package documentation, Table). They
// are those of the other stores' attributes. The table is the store's own,
// so there is nothing to share a layout with.
type Options struct {
	// Schema is the schema of the table. Empty, the default, leaves the
	// table name unqualified: the connection's search_path finds it
	// (public, unless it was changed).
	Schema string

	// MaxResponseSize, when positive, is the largest response the store
	// keeps. Update completes a record with a larger response without it. It
	// then returns [persistence.ErrResponseOmitted], as a store with an item
	// size limit must. Zero, the default, keeps every response. A bytea holds
	// up to 1 GB, far more than a Lambda response (6 MB).
	MaxResponseSize int
}

// resolveOptions applies optFns to the zero Options and validates the
// result.
func resolveOptions(optFns []func(*Options)) (Options, error) {
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	if o.MaxResponseSize < 0 {
		return o, fmt.Errorf("persistence/postgres: negative Options.MaxResponseSize %d", o.MaxResponseSize)
	}
	return o, nil
}

// maxIdentifier is PostgreSQL's longest identifier, in bytes
// (NAMEDATALEN - 1); longer ones are truncated, which would make two
// names one.
const maxIdentifier = 63

// qualifiedName returns the table's name as SQL: quoted, and qualified
// with the schema when there is one.
func qualifiedName(table string, o *Options) (string, error) {
	if table == "" {
		return "", fmt.Errorf("persistence/postgres: empty table name")
	}
	for _, n := range []string{table, o.Schema} {
		if len(n) > maxIdentifier {
			return "", fmt.Errorf("persistence/postgres: name %q is longer than PostgreSQL's %d bytes", n, maxIdentifier)
		}
	}
	if o.Schema == "" {
		return pgx.Identifier{table}.Sanitize(), nil
	}
	return pgx.Identifier{o.Schema, table}.Sanitize(), nil
}
