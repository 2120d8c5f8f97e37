#!/usr/bin/env python3
"""Write the Go fuzzer's []byte seeds ("go test fuzz v1" files) as raw files.

    python3 gofuzz_seeds.py OUT_DIR FILE...

Go quotes bytes with strconv.Quote: printable UTF-8 stays as is, the rest
is escaped (\\xHH, \\n, \\uHHHH, ...). This undoes exactly that.
"""
import os
import sys

ESC = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, '"': 34, "'": 39}


def unquote(s):
    out, i = bytearray(), 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = s[i + 1]
        if e == "x":
            out.append(int(s[i + 2:i + 4], 16))
            i += 4
        elif e in "uU":
            n = 4 if e == "u" else 8
            out += chr(int(s[i + 2:i + 2 + n], 16)).encode()
            i += 2 + n
        elif e in "01234567":
            out.append(int(s[i + 1:i + 4], 8))
            i += 4
        else:
            out.append(ESC[e])
            i += 2
    return bytes(out)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n, path in enumerate(sys.argv[2:]):
        lines = open(path, encoding="utf-8").read().split("\n")
        if len(lines) < 2 or lines[0] != "go test fuzz v1" or not lines[1].startswith('[]byte("'):
            continue
        with open(os.path.join(out, "seed%d" % n), "wb") as f:
            f.write(unquote(lines[1][len('[]byte("'):-2]))


if __name__ == "__main__":
    main()
