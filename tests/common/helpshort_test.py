"""Every pstrain tool answers --helpshort with its own flags (gflags alone printed "No modules
matched" for the dashed binaries). Run by ctest with BINARY=FLAG,FLAG,... arguments: each binary
must exit 1 (gflags' exit code for its help flags) and list each named flag."""

import subprocess
import sys


def main(specs):
    failures = []
    for spec in specs:
        binary, flags = spec.split("=", 1)
        result = subprocess.run([binary, "--helpshort"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=30)
        out = result.stdout
        if result.returncode != 1:
            failures.append(f"{binary} --helpshort exited {result.returncode}:\n{out}")
        name = binary.rsplit("/", 1)[-1]
        if not out.startswith(f"{name}: "):
            failures.append(f"{binary} --helpshort does not start with its name:\n{out}")
        if "No modules matched" in out:
            failures.append(f"{binary} --helpshort matched no flags:\n{out}")
        for flag in flags.split(","):
            if f"-{flag} (" not in out:
                failures.append(f"{binary} --helpshort does not list --{flag}:\n{out}")
        print(f"{binary}: {len(out.splitlines())} lines, {flags} listed")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
