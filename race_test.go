//go:build race

package lockword

const raceEnabled = true
