module github.com/lockword/lockword

go 1.26.0

require (
	github.com/gofrs/flock v0.13.2
	github.com/puzpuzpuz/xsync/v4 v4.5.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)
