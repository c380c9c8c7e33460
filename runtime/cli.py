"""The ``hlo`` command line: ``hlo check FILE.hlo``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import HloError


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise SystemExit(f"hlo: cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SystemExit(f"hlo: {path} is not UTF-8 text") from None


def _print_error(path: str, err: HloError) -> None:
    """Compiler-style: ``FILE:LINE:COL: ...`` first, so editors can jump to it."""
    lines = err._render_traceback_()
    if err.location is not None:
        lines[0] = f"{path}:{err.location.line}:{err.location.column}" + (
            f" ({err.computation})" if err.computation else "")
    else:
        lines.insert(0, path)
    print("\n".join(lines), file=sys.stderr)


def cmd_check(args: argparse.Namespace) -> int:
    from . import parse
    text = _read(args.file)
    try:
        module = parse(text)
    except HloError as e:
        _print_error(args.file, e)
        return 1
    for w in module.warnings:
        print(f"{args.file}: warning: {w}", file=sys.stderr)
    n = sum(len(c.instructions) for c in module.computations)
    print(f"{args.file}: OK: module {module.name}, {len(module.computations)} computations, "
          f"{n} instructions")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hlo", description="Check and run XLA HLO modules.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="parse and verify a module; exit 1 on error")
    c.add_argument("file", help="an .hlo text file")
    c.set_defaults(func=cmd_check)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
