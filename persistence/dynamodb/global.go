package dynamodb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GlobalTable says how a table is replicated across AWS Regions, and for a
// global table of multi-Region eventual consistency, how its keys are
// written (Options.GlobalTable). The zero value describes a table in one
// Region. docs/guarantees.md (Global tables) says what each means for the
// guarantees.
type GlobalTable string

const (
	// GlobalTableStrong describes a global table of multi-Region strong
	// consistency (MRSC). Every conditional write is checked against the
	// latest version of the item in every Region, so the guarantees hold
	// across Regions. Such a table runs no transactions, and Commit refuses
	// staged writes without sending them. It has no time to live either:
	// delete expired records with [Store.Sweep].
	GlobalTableStrong GlobalTable = "STRONG"

	// GlobalTableHomeRegion describes a global table of multi-Region
	// eventual consistency (MREC) whose every key is written in one Region
	// only, its home. The application routes each key there. The guarantees
	// then hold as in one Region, except across a change of home, such as a
	// failover.
	GlobalTableHomeRegion GlobalTable = "EVENTUAL_HOME_REGION"

	// GlobalTableLastWriterWins describes a global table of multi-Region
	// eventual consistency (MREC) whose keys are written in any Region. It
	// accepts the risk. Two Regions can each reserve one key and both run the
	// function. Their results are resolved by last writer wins.
	GlobalTableLastWriterWins GlobalTable = "EVENTUAL_LAST_WRITER_WINS"
)

// consistency returns the multi-Region consistency g describes: STRONG,
// EVENTUAL, or "" for a table in one Region.
func (g GlobalTable) consistency() types.MultiRegionConsistency {
	switch g {
	case GlobalTableStrong:
		return types.MultiRegionConsistencyStrong
	case GlobalTableHomeRegion, GlobalTableLastWriterWins:
		return types.MultiRegionConsistencyEventual
	}
	return ""
}

func (g GlobalTable) valid() bool { return g == "" || g.consistency() != "" }

// ErrGlobalTable is matched (with errors.Is) by the error of CheckTable for
// a table whose replication across Regions is not the one
// Options.GlobalTable describes.
var ErrGlobalTable = errors.New("persistence/dynamodb: global table mismatch")

// GlobalTableError is the error of [CheckTable] for a table whose
// replication across Regions is not the one [Options.GlobalTable]
// describes. It is one of these:
//
//   - a global table that the options do not describe
//   - a global table of the other consistency mode
//   - a table in one Region described as one of strong consistency
//
// It matches [ErrGlobalTable].
type GlobalTableError struct {
	Table string

	// Consistency is the table's multi-Region consistency: STRONG (MRSC),
	// EVENTUAL (MREC), or "" for a table in one Region.
	Consistency types.MultiRegionConsistency

	// Replicas are the Regions of the table's replicas that DescribeTable
	// lists, and Witnesses those of its witnesses (MRSC).
	Replicas, Witnesses []string

	// Described is Options.GlobalTable.
	Described GlobalTable
}

// Error implements error.
func (e *GlobalTableError) Error() string {
	where := fmt.Sprintf("persistence/dynamodb: table %q", e.Table)
	if len(e.Replicas) > 0 {
		where += " (replicas in " + strings.Join(e.Replicas, ", ")
		if len(e.Witnesses) > 0 {
			where += ", witness in " + strings.Join(e.Witnesses, ", ")
		}
		where += ")"
	}
	const see = " (docs/guarantees.md, Global tables)"
	switch {
	case e.Consistency == types.MultiRegionConsistencyStrong:
		return where + " is a global table of multi-Region strong consistency (MRSC): set Options.GlobalTable to GlobalTableStrong, " +
			"so that commits are refused before they are sent, since such a table runs no transactions; it has no time to live either: " +
			"delete expired records with Store.Sweep" + see
	case e.Consistency != "" && e.Described == GlobalTableStrong:
		return where + " is a global table of multi-Region eventual consistency (MREC), not of strong consistency as Options.GlobalTable says: " +
			"each Region checks conditions against its own copy, so two Regions can each reserve one key and both run the function" + see
	case e.Consistency != "":
		return where + " is a global table of multi-Region eventual consistency (MREC): each Region checks conditions against its own copy, " +
			"so two Regions can each reserve one key and both run the function. Set Options.GlobalTable to GlobalTableHomeRegion " +
			"if each key is written in one Region only, or to GlobalTableLastWriterWins to accept the risk" + see
	}
	return where + " has no replicas in other Regions, but Options.GlobalTable describes a global table of multi-Region strong consistency" + see
}

// Is makes errors.Is(err, ErrGlobalTable) true.
func (e *GlobalTableError) Is(target error) bool { return target == ErrGlobalTable }

// checkGlobalTable checks that desc, the description of table, is
// replicated as described says.
//
// A table is a global table of strong consistency when DescribeTable says
// MultiRegionConsistency STRONG, and of eventual consistency when it lists
// replicas otherwise (tables made global before the consistency modes
// existed do not say EVENTUAL). A global table of version 2017.11.29
// (legacy) is described by DescribeGlobalTable, and may list no replicas
// here, which is one reason a description of eventual consistency is
// accepted for a table without replicas.
func checkGlobalTable(table string, desc *types.TableDescription, described GlobalTable) error {
	e := &GlobalTableError{Table: table, Described: described}
	for _, r := range desc.Replicas {
		if r.RegionName != nil {
			e.Replicas = append(e.Replicas, *r.RegionName)
		}
	}
	for _, w := range desc.GlobalTableWitnesses {
		if w.RegionName != nil {
			e.Witnesses = append(e.Witnesses, *w.RegionName)
		}
	}
	switch {
	case desc.MultiRegionConsistency == types.MultiRegionConsistencyStrong:
		e.Consistency = types.MultiRegionConsistencyStrong
	case len(desc.Replicas) > 0 || len(desc.GlobalTableWitnesses) > 0:
		e.Consistency = types.MultiRegionConsistencyEventual
	}
	want := described.consistency()
	if e.Consistency == want || (e.Consistency == "" && want == types.MultiRegionConsistencyEventual) {
		return nil
	}
	return e
}
