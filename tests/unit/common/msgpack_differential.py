#!/usr/bin/python3
"""The wire decoder against Debian's python3-msgpack, on the fuzz corpus.

For every input our decoder accepts, python3-msgpack must read it as exactly one msgpack value
(no error, no trailing bytes), and what we re-encode from the decoded message must read back as
that value: the same types (bool is not int, nil is not 0) and values, arrays no longer than the
input's (trailing fields unknown to this version are dropped), nothing added but the optional
trailing fields our encoder always writes, with the value their absence means; and the
always-open timetable push goes out in its canonical form (canonical() below). An input that
only our decoder can read, or a value it misread, fails the test.

Usage: msgpack_differential.py MSGPACK_REENCODE CORPUS_DIR
Exit 77 (CTest: skipped) without python3-msgpack.
"""
import subprocess
import sys
from pathlib import Path

try:
    import msgpack
except ImportError:
    print("SKIP: python3-msgpack is not installed (scripts/setup.sh installs it)")
    sys.exit(77)


def contained(ours, theirs) -> bool:
    """Whether our re-encoded value is the input's value, less trailing array elements."""
    if isinstance(ours, list) or isinstance(theirs, list):
        return (isinstance(ours, list) and isinstance(theirs, list) and len(ours) <= len(theirs)
                and all(contained(a, b) for a, b in zip(ours, theirs)))
    if isinstance(ours, dict) or isinstance(theirs, dict):
        return (isinstance(ours, dict) and isinstance(theirs, dict) and ours.keys() == theirs.keys()
                and all(contained(ours[k], theirs[k]) for k in ours))
    if type(ours) is bool or type(theirs) is bool or ours is None or theirs is None:
        return type(ours) is type(theirs) and ours == theirs
    if isinstance(ours, float) or isinstance(theirs, float):
        return float(ours) == float(theirs) or (ours != ours and theirs != theirs)  # NaN
    return type(ours) is type(theirs) and ours == theirs


# Optional trailing fields that our encoder always writes, with the value an absent one means:
# a report's hold, jitter, compute, realigned, yielded and yield wait (0), a push's gated flag (1).
OPTIONAL_DEFAULTS = {5: (15, [0, 0, 0, 0, 0, 0]), 6: (8, [1])}


def canonical(value):
    """The input's value as our encoder writes it back: optional trailing fields that the input
    leaves out are written with the value their absence means (OPTIONAL_DEFAULTS), and a timetable
    push that is always open (its "gated" flag 0, or its window at least its period) goes out
    with window = period, no slack, no wait and the flag 0 (protocol.cpp, PackFields of
    TimetablePush). No other message is changed."""
    if not (isinstance(value, list) and len(value) >= 3 and isinstance(value[2], list)
            and value[1] in OPTIONAL_DEFAULTS):
        return value
    f = list(value[2])
    required, defaults = OPTIONAL_DEFAULTS[value[1]]
    if required <= len(f) < required + len(defaults):
        f += defaults[len(f) - required:]
    if value[1] == 6 and len(f) >= 9:
        if f[8] == 0 or f[5] >= f[3]:
            f[5], f[6], f[7] = f[3], 0, 0
            f[8] = 0
    return [value[0], value[1], f, *value[3:]]


def main() -> int:
    tool, corpus = sys.argv[1], Path(sys.argv[2])
    files = sorted(p for p in corpus.iterdir() if p.is_file())
    out = subprocess.run([tool, *map(str, files)], capture_output=True, text=True, check=True)
    accepted = rejected = 0
    failures = []
    for line in out.stdout.splitlines():
        path, verdict, rest = line.split("\t", 2)
        if verdict == "reject":
            rejected += 1
            continue
        accepted += 1
        data = Path(path).read_bytes()
        try:
            theirs = msgpack.unpackb(data, raw=True, strict_map_key=False)
        except Exception as e:  # any failure of theirs on an input we accepted
            failures.append(f"{path}: we accept it, python3-msgpack does not: {e!r}")
            continue
        ours = msgpack.unpackb(bytes.fromhex(rest), raw=True, strict_map_key=False)
        if not contained(ours, canonical(theirs)):
            failures.append(f"{path}: read as {theirs!r}, re-encoded as {ours!r}")
    print(f"{len(files)} inputs: {accepted} accepted, {rejected} rejected; "
          f"{len(failures)} disagreements with python3-msgpack {msgpack.version}")
    for f in failures[:20]:
        print(f"FAIL: {f}")
    if accepted == 0:
        print("FAIL: no input accepted: the corpus checks nothing")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
