package deploy_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// binary is outboxd built from this checkout by TestMain.
var binary string

func TestMain(m *testing.M) { proc.MainWithBinary(m, &binary) }
