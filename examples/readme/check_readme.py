#!/usr/bin/env python3
"""Every ```cpp block of README.md follows a line <!-- example: PATH --> and is
exactly the file PATH, a whole program that CMake builds and CTest runs, so the
README's code cannot drift from code that compiles.

    check_readme.py README.md REPO_ROOT"""
import pathlib
import re
import sys


def main(readme, root):
    lines = pathlib.Path(readme).read_text().split("\n")
    expect, block, checked = None, None, 0
    for number, line in enumerate(lines, 1):
        if block is not None:
            if line == "```":
                want = (pathlib.Path(root) / expect).read_text()
                if "\n".join(block) + "\n" != want:
                    sys.exit(f"{readme}:{number}: the block marked {expect} differs from that file")
                checked += 1
                expect, block = None, None
            else:
                block.append(line)
        elif m := re.fullmatch(r"<!-- example: (.+) -->", line):
            expect = m.group(1)
        elif line == "```cpp":
            if expect is None:
                sys.exit(f"{readme}:{number}: a ```cpp block without an <!-- example: PATH --> line before it")
            block = []
    if checked == 0:
        sys.exit(f"{readme}: no example blocks found")
    print(f"{readme}: {checked} C++ blocks, each equal to its example file")


if __name__ == "__main__":
    main(*sys.argv[1:3])
