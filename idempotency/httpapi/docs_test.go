package httpapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrysafe/retrysafe/idempotency/httpapi"
)

// Every problem type leads to its section of docs/problems.md.
func TestProblemTypesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "problems.md"))
	require.NoError(t, err)
	for _, typ := range []string{
		httpapi.ProblemMissingKey, httpapi.ProblemInvalidKey, httpapi.ProblemMissingScope, httpapi.ProblemKeyInUse, httpapi.ProblemKeyHeld,
		httpapi.ProblemKeyReused, httpapi.ProblemStoreUnavailable, httpapi.ProblemHandlerFailed, httpapi.ProblemRecordedError,
		httpapi.ProblemResponseNotStored, httpapi.ProblemReplayFailed, httpapi.ProblemBodyTooLarge,
	} {
		base, anchor, ok := strings.Cut(typ, "#")
		require.True(t, ok, typ)
		assert.Equal(t, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md", base)
		assert.Contains(t, string(doc), "\n## "+anchor+"\n", "a section for %s", anchor)
		assert.Contains(t, string(doc), "["+anchor+"](#"+anchor+")", "a row of the table for %s", anchor)
	}
}
