package postgres

// Exported for the tests of package postgres_test.

var PrefixEnd = prefixEnd

// CreateTableSQL returns the statements CreateTable runs for table name
// with optFns.
func CreateTableSQL(name string, optFns ...func(*Options)) (string, error) {
	o, err := resolveOptions(optFns)
	if err != nil {
		return "", err
	}
	return createTableSQL(name, &o)
}
