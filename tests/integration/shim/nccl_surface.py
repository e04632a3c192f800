#!/usr/bin/env python3
"""Every function of the nccl.h the shim is built with is either exported (wrapped) by
libmetronome.so or listed in shim/nccl_passthrough.txt with a reason, and never both.

usage: nccl_surface.py NCCL_H LIBMETRONOME_SO PASSTHROUGH_TXT
"""
import re
import subprocess
import sys

DECL = re.compile(r"^\s*(?:ncclResult_t|const\s+char\s*\*|void)\s+(nccl[A-Za-z0-9_]+)\s*\(")


def header_functions(path):
    with open(path, encoding="utf-8") as f:
        return {m.group(1) for line in f if (m := DECL.match(line))}


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    return {parts[-1] for parts in (line.split() for line in out.splitlines())
            if parts and parts[-1].startswith("nccl")}


def passthrough(path):
    listed, errors = {}, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                errors.append(f"{path}:{n}: {name} has no reason")
            listed[name] = reason.strip()
    return listed, errors


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    header, wrapped = header_functions(argv[1]), exported(argv[2])
    listed, errors = passthrough(argv[3])
    for name in sorted(header - wrapped - set(listed)):
        errors.append(f"{name} (in {argv[1]}) is neither wrapped nor in {argv[3]}")
    for name in sorted(wrapped & set(listed)):
        errors.append(f"{name} is wrapped and also listed as passed through")
    for name in sorted(wrapped - header):
        errors.append(f"{name} is exported but not in {argv[1]}")
    for e in errors:
        print("FAIL:", e)
    print(f"nccl.h: {len(header)} functions; wrapped {len(header & wrapped)}, "
          f"passed through {len(header & set(listed))}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
