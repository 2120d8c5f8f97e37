module github.com/lockword/lockword

go 1.26.0

require golang.org/x/sys v0.50.0

require github.com/puzpuzpuz/xsync/v4 v4.5.0
