package lockword

import "github.com/lockword/lockword/internal/locktest"

// raceEnabled is whether the race detector is on (locktest.RaceEnabled).
const raceEnabled = locktest.RaceEnabled
