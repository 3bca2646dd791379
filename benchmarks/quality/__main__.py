"""Command line of the quality protocol (see :mod:`benchmarks.quality`).

    python -m benchmarks.quality --suite standard
    python -m benchmarks.quality --synthetic 20newsgroups:50:0.03 --real none \\
        --variants default rp=anchor_method=rp --peers gensim sklearn --name early
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from . import real, report, synthetic, variants
from .suites import SUITES
from .systems import PEERS

CACHE = Path(__file__).resolve().parents[2] / ".artifacts" / "quality"


def _synthetic(spec: str, checkpoints) -> synthetic.Setting:
    corpus, k, alpha = spec.split(":")
    return synthetic.Setting(corpus, int(k), float(alpha), tuple(checkpoints))


def _real(spec: str) -> real.Setting:
    corpus, k = spec.split(":")
    return real.Setting(corpus, int(k))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=sorted(SUITES), default="quick")
    parser.add_argument("--variants", nargs="+", help="our settings: a name (default, rp, hybrid, norefine, "
                        "cap3000, nobg) or name=key=value,key=value; default: the suite's")
    parser.add_argument("--peers", nargs="*", choices=PEERS, help="peers to run; default: the suite's")
    parser.add_argument("--synthetic", nargs="*", metavar="CORPUS:K:ALPHA",
                        help="Gibbs-truth settings instead of the suite's ('none': skip)")
    parser.add_argument("--real", nargs="*", metavar="CORPUS:K", help="real-text settings instead of the suite's ('none': skip)")
    parser.add_argument("--checkpoints", nargs="+", type=int, help="documents at which L1 is read (with --synthetic)")
    parser.add_argument("--truth-iterations", type=int, help="Gibbs iterations of the truth fits (default 500)")
    parser.add_argument("--out", type=Path, default=CACHE, help="folder for <name>.json and <name>.md")
    parser.add_argument("--name", help="file stem of the results (default: the suite's name)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="folder of the cached truth fits")
    parser.add_argument("--render", type=Path, metavar="NAME.json", help="only rewrite NAME.md from a results file")
    return parser.parse_args(argv)


def main(argv=None) -> Path:
    args = parse_args(argv)
    if args.render:
        return report.render(args.render)
    suite = SUITES[args.suite]
    command = "python -m benchmarks.quality " + shlex.join(sys.argv[1:] if argv is None else argv)
    chosen = dict(variants.parse(v) for v in (args.variants or suite.variants))
    peers = suite.peers if args.peers is None else tuple(args.peers)
    checkpoints = tuple(args.checkpoints or max((s.checkpoints for s in suite.synthetic), key=len))
    settings = (suite.synthetic if args.synthetic is None else
                tuple(_synthetic(s, checkpoints) for s in args.synthetic if s != "none"))
    splits = suite.real if args.real is None else tuple(_real(s) for s in args.real if s != "none")
    systems = list(chosen) + list(peers)
    checkpoints = sorted({c for s in settings for c in s.checkpoints})
    done_synthetic, done_real = [], []

    def write(partial_synthetic=(), partial_real=()):
        return report.write(args.out, args.name or args.suite, command, done_synthetic + list(partial_synthetic),
                            done_real + list(partial_real), chosen, checkpoints)

    start = time.perf_counter()
    for setting in settings:
        done_synthetic += synthetic.run(setting, systems, chosen, args.cache, args.truth_iterations or suite.truth_iterations,
                                        report=lambda records: write(partial_synthetic=records))
        print(f"[{time.perf_counter() - start:.0f} s] {setting.key} done", flush=True)
    for split in splits:
        done_real += real.run(split, systems, chosen, report=lambda records: write(partial_real=records))
        print(f"[{time.perf_counter() - start:.0f} s] {split.key} done", flush=True)
    path = write()
    print(path.read_text())
    return path


if __name__ == "__main__":
    main()
