package torture

import (
	"testing"

	"github.com/lockword/lockword/cmd/lockword/internal/clitest"
)

// TestMain removes the lockword binary that the tests share
// (clitest.BuildLockword builds it once).
func TestMain(m *testing.M) { clitest.Main(m) }
