package grpcidempotency

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/retrysafe/retrysafe/grpcidempotency/internal/engine"
)

// The package's constants are the engine's.
func TestConstantsAreTheEngines(t *testing.T) {
	for _, pair := range [][2]any{
		{DefaultKeyField, engine.DefaultKeyField}, {DefaultMetadataKey, engine.DefaultMetadataKey},
		{MetadataReplayed, engine.MetadataReplayed}, {MaxKeyLength, engine.MaxKeyLength},
		{ErrorDomain, engine.ErrorDomain},
		{ReasonMissingKey, engine.ReasonMissingKey}, {ReasonInvalidKey, engine.ReasonInvalidKey},
		{ReasonMissingScope, engine.ReasonMissingScope}, {ReasonScopeFailed, engine.ReasonScopeFailed},
		{ReasonKeyInUse, engine.ReasonKeyInUse}, {ReasonKeyHeld, engine.ReasonKeyHeld},
		{ReasonKeyReused, engine.ReasonKeyReused},
		{ReasonStoreUnavailable, engine.ReasonStoreUnavailable}, {ReasonNotCommitted, engine.ReasonNotCommitted},
		{ReasonRecordedError, engine.ReasonRecordedError}, {ReasonResponseNotStored, engine.ReasonResponseNotStored},
		{ReasonReplayFailed, engine.ReasonReplayFailed}, {ReasonFingerprintFailed, engine.ReasonFingerprintFailed},
		{int(FieldFirst), int(engine.FieldFirst)}, {int(MetadataFirst), int(engine.MetadataFirst)},
		{int(FieldOnly), int(engine.FieldOnly)}, {int(MetadataOnly), int(engine.MetadataOnly)},
	} {
		assert.EqualValues(t, pair[1], pair[0])
	}
}
